"""Recipe 2: a LangChain RAG chain over a real BM25 retriever, ending in ``EvidenceAnswerer``.

For: LangChain users who have a retriever and a chat model and want answers whose every
citation is checked against the retrieved documents.

Shows: a ``BaseRetriever`` over the maintained ``bm25s`` package (lexical, offline, no torch),
the chain ``{"context": retriever, "question": ...} | EvidenceAnswerer(llm=ChatOpenAI(...))``,
the same answerer with ``output="message"`` followed by ``StrOutputParser``, and
``to_content_blocks`` for chat UIs. ``ChatOpenAI`` points at the embedded default reader
(Qwen2.5-Coder-1.5B-Instruct on llama.cpp); any chat model works the same way.

Run: ``uv run python cookbook/02_langchain_rag_chain.py``
"""

from __future__ import annotations

from typing import Any

import bm25s
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document

from langchain_evidence_first import to_content_blocks

# isort: split
# The imports `ask` needs, kept together so that its excerpt in the README runs as shown.
# --8<-- [start:imports]
from langchain_core.output_parsers import StrOutputParser
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_openai import ChatOpenAI

from evidence_first import EvidenceAnswer
from evidence_first.local import LocalModel
from langchain_evidence_first import EvidenceAnswerer

# --8<-- [end:imports]


class BM25Retriever(BaseRetriever):
    """Ranks documents with BM25 (``bm25s``); the score goes to ``metadata["score"]``."""

    documents: list[Document]
    k: int = 2
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


DOCUMENTS = [
    Document(
        id="standup-04-28",
        page_content="Standup, April 28. The launch moved to June 15 because the payment "
        "provider needs a security review first.",
        metadata={"speaker": "Ravi", "status": "current", "title": "Standup notes"},
    ),
    Document(
        id="email-17",
        page_content="From Priya: the budget review is on Friday, May 8.",
        metadata={"speaker": "Priya", "title": "Budget email"},
    ),
    Document(
        id="handbook-3",
        page_content="Employees may work remotely up to three days per week.",
        metadata={"title": "Handbook, chapter 3"},
    ),
]


# --8<-- [start:chain]
def ask(retriever: BaseRetriever, local: LocalModel) -> EvidenceAnswer:
    """Answer from what ``retriever`` finds, read by ``local``, a started embedded reader."""
    llm = ChatOpenAI(base_url=local.base_url, api_key="unused", model=local.model_name)
    # A local model on a busy CPU can take minutes: a modest output, the longest timeout.
    answerer = EvidenceAnswerer(llm=llm, max_output_tokens=512, timeout=300)
    retrieve = {"context": retriever, "question": RunnablePassthrough()}  # or "sources"
    answer = (retrieve | answerer).invoke("When is the launch?")
    print(answer)  # status, answer, facts with verified spans, omissions, or reason codes

    # To go on with text: the answer as an AIMessage with Citation blocks, then any parser.
    as_message = answerer.model_copy(update={"output": "message"})
    print((retrieve | as_message | StrOutputParser()).invoke("When is the launch?"))
    return answer
    # --8<-- [end:chain]


def main(local: LocalModel | None = None) -> EvidenceAnswer:
    """Run the chain with the given local model, or start the default reader for the run."""
    if local is None:
        with LocalModel() as started:
            return main(started)
    # This recipe's own retriever (above); any LangChain retriever works in its place.
    retriever = BM25Retriever(documents=DOCUMENTS, k=2)
    answer = ask(retriever, local)
    # The same chain in one call: EvidenceAnswerer.from_retriever(retriever, llm=llm)
    # Without llm=, EvidenceAnswerer() uses the default reader: langchain-evidence-first[local].
    print(to_content_blocks(answer))  # [] unless answered: then one text block with citations
    return answer


if __name__ == "__main__":
    main()
