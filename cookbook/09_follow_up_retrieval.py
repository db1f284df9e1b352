"""Recipe 9: follow-up retrieval, when the answer needs a document the question does not find.

For: LangChain users whose questions chain two facts (who hosts the review, then where they
meet), so one retrieval pass brings back only half of what the answer needs.

Shows: ``FollowUpAnswerer`` (``pip install "langchain-evidence-first[graph]"``, a LangGraph
graph) over a top-1 BM25 retriever. The first answer abstains and names what is missing; each
``missing_evidence`` item, as written, is a follow-up query (no extra model call); what it
retrieves joins the first hop's documents, and the original question is answered again from
both. Each hop's queries and retrieved IDs are printed, then the final answer. It stops at an
answer, or after ``max_hops`` follow-ups: at most ``max_hops + 1`` model calls. ``ChatOpenAI``
points at the embedded default reader; any chat model works the same way.

Run: ``uv run python cookbook/09_follow_up_retrieval.py``
"""

from __future__ import annotations

from typing import Any

import bm25s
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_openai import ChatOpenAI

from evidence_first.local import LocalModel
from langchain_evidence_first import EvidenceAnswerer
from langchain_evidence_first.hops import FollowUpAnswerer, HopsResult


class BM25Retriever(BaseRetriever):
    """Ranks documents with BM25 (``bm25s``); the score goes to ``metadata["score"]``."""

    documents: list[Document]
    k: int = 1
    _index: Any = None

    def model_post_init(self, context: Any) -> None:
        """Index the documents once."""
        self._index = bm25s.BM25()
        corpus = [document.page_content for document in self.documents]
        self._index.index(bm25s.tokenize(corpus, show_progress=False), show_progress=False)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        found, scores = self._index.retrieve(
            bm25s.tokenize([query], show_progress=False),
            k=min(self.k, len(self.documents)),
            show_progress=False,
        )
        return [
            self.documents[int(i)].model_copy(
                update={"metadata": {**self.documents[int(i)].metadata, "score": float(score)}}
            )
            for i, score in zip(found[0], scores[0], strict=True)
        ]


QUESTION = "Where is the launch review held?"
DOCUMENTS = [
    Document(
        id="review-invite",
        page_content="Calendar invite: the launch review on June 12 is hosted by the platform "
        "team.",
        metadata={"title": "Launch review invite"},
    ),
    Document(
        id="platform-rooms",
        page_content="Room bookings: the platform team meets in room 4B on the third floor.",
        metadata={"title": "Room bookings"},
    ),
    Document(
        id="budget-email",
        page_content="From Priya: the budget review is on Friday, May 8.",
        metadata={"title": "Budget email"},
    ),
    Document(
        id="handbook-3",
        page_content="Employees may work remotely up to three days per week.",
        metadata={"title": "Handbook, chapter 3"},
    ),
]


def follow_up(llm: BaseChatModel) -> HopsResult:
    """Answer ``QUESTION`` with follow-up retrieval over a top-1 retriever, printing each hop."""
    # Top-1, so the question alone finds the invite but never the room bookings.
    retriever = BM25Retriever(documents=DOCUMENTS, k=1)
    # On a busy CPU a local model can take minutes: a modest output, the longest timeout.
    answerer = EvidenceAnswerer(llm=llm, max_output_tokens=512, timeout=300)
    result = FollowUpAnswerer(retriever, answerer, max_hops=2, max_followups=3).invoke(QUESTION)

    for hop in result.hops:
        print(f"hop {hop.hop}: queries {list(hop.queries)}")
        print(f"  retrieved {list(hop.retrieved_ids)}, new {list(hop.new_source_ids)}")
        print(f"  answer: {hop.status}, missing {list(hop.missing_evidence)}")
    print(f"model calls: {result.model_calls}")
    print(result.answer)  # the last answer: status, answer, verified spans, omissions
    return result


def main(local: LocalModel | None = None) -> HopsResult:
    """Run the recipe with the given local model, or start the default reader for the run."""
    if local is None:
        with LocalModel() as started:
            return main(started)
    llm = ChatOpenAI(base_url=local.base_url, api_key="unused", model=local.model_name)
    return follow_up(llm)


if __name__ == "__main__":
    main()
