"""Recipe 3: a LlamaIndex index answered by ``EvidenceQueryEngine`` over a BM25 retriever.

For: LlamaIndex users who want a query engine whose answers cite exact spans of the retrieved
nodes, and of the original documents the nodes were cut from.

Shows: documents split into nodes, an index over them answered through
``index.as_query_engine(response_synthesizer=EvidenceSynthesizer(...))``, then
``BM25Retriever`` from ``llama-index-retrievers-bm25`` (lexical, offline, no torch) and
``EvidenceQueryEngine`` with citation spans in the original documents; ``OpenAILike`` points at
the embedded default reader (Qwen2.5-Coder-1.5B-Instruct on llama.cpp), and any chat LLM works
the same way.

Run: ``uv run python cookbook/03_llamaindex_query_engine.py``
"""

from __future__ import annotations

from llama_index.core import Document
from llama_index.core.base.response.schema import Response
from llama_index.core.node_parser import SentenceSplitter
from llama_index.retrievers.bm25 import BM25Retriever

from evidence_first import EvidenceAnswer
from llama_index.response_synthesizers.evidence_first import EvidenceQueryEngine

# isort: split
# The imports `ask` needs, kept together so that its excerpt in the README runs as shown.
# --8<-- [start:imports]
from llama_index.core import SummaryIndex
from llama_index.core.schema import BaseNode
from llama_index.llms.openai_like import OpenAILike

from evidence_first.local import LocalModel
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

# --8<-- [end:imports]

DOCUMENTS = [
    Document(
        doc_id="standup-04-28",
        text="Standup notes, April 28. Attendees: Ravi, Mei and Jonas.\n\n\n"
        "Mei: the onboarding emails are drafted and go out one week before the launch.\n\n\n"
        "Ravi: the launch moved to June 15 because the payment provider needs a security "
        "review first.",
        metadata={"speaker": "Ravi", "status": "current", "title": "Standup notes"},
    ),
    Document(
        doc_id="email-17",
        text="From Priya: the budget review is on Friday, May 8.",
        metadata={"speaker": "Priya", "title": "Budget email"},
    ),
    Document(
        doc_id="handbook-3",
        text="Employees may work remotely up to three days per week.",
        metadata={"title": "Handbook, chapter 3"},
    ),
]


# --8<-- [start:engine]
def ask(nodes: list[BaseNode], local: LocalModel) -> OpenAILike:
    """Answer from ``nodes`` (any node parser's), read by ``local``; return the LLM to reuse."""
    index = SummaryIndex(nodes)  # any index
    llm = OpenAILike(
        model=local.model_name,
        api_base=local.base_url,
        api_key="unused",
        is_chat_model=True,  # required: the call sends system and user chat messages
    )
    # A local model on a busy CPU can take minutes: a modest output, the longest timeout.
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=512, timeout=300)
    engine = index.as_query_engine(llm=llm, response_synthesizer=synthesizer)
    print(engine.query("When is the launch?"))  # the verified answer, or why there is none
    return llm
    # --8<-- [end:engine]


def main(local: LocalModel | None = None) -> Response:
    """Query the index with the given local model, or start the default reader for the run."""
    if local is None:
        with LocalModel() as started:
            return main(started)
    # Small chunks, so the standup notes become two nodes; citations map back into the document.
    splitter = SentenceSplitter(
        chunk_size=64,
        chunk_overlap=0,
        id_func=lambda i, document: f"{document.node_id}#{i}",  # readable IDs, not UUIDs
    )
    nodes = splitter.get_nodes_from_documents(DOCUMENTS)
    llm = ask(nodes, local)

    # --8<-- [start:query-engine]
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)
    # documents= puts the original texts at hand, so each citation can be given its span in
    # the document its node was cut from (checked: the node must equal that slice).
    engine = EvidenceQueryEngine.from_args(
        retriever, llm=llm, max_output_tokens=512, timeout=300, documents=DOCUMENTS
    )
    # Or the LlamaIndex convention: set Settings.llm once and leave llm out, since
    # from_args(retriever) with llm=None uses Settings.llm.
    response = engine.query("When is the launch?")
    assert isinstance(response, Response)  # not a streaming response
    answer: EvidenceAnswer = (response.metadata or {})["evidence_answer"]
    print(answer)  # status, answer, facts with verified spans, omissions, or reason codes
    print("response:", response.response)  # the answer text, or the sentence of its outcome
    for node_with_score in response.source_nodes:  # exactly the nodes sent, in order
        print("sent:", node_with_score.node.node_id, node_with_score.score)
    for fact in answer.facts:
        for citation in fact.citations:
            if citation.document is not None:  # where the quote sits in the original document
                span = citation.document
                print(f"{span.doc_id} chars {span.char_start}-{span.char_end}: {citation.quote!r}")
    # --8<-- [end:query-engine]
    return response


if __name__ == "__main__":
    main()
