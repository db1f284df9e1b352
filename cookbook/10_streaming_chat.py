"""Recipe 10: a chat that streams its answer as it is verified, in a LangGraph graph.

For: chat applications on LangGraph that show the answer while it is written, and must never
show text whose citations were not checked.

Shows: a ``MessagesState`` graph whose node streams ``EvidenceAnswerer(output="message")``.
Each chunk of verified answer text goes out through LangGraph's ``get_stream_writer()`` as it
arrives (``stream_mode="custom"``); the node returns the message the chunks add up to, which
``stream_mode="messages"`` shows and the checkpointer keeps, so the second turn on the thread
sees the first. The model's own tokens, the ledger whose quotes are not checked yet, reach
neither mode: the answerer tags its call ``nostream``. A non-answer sends
``{"replace": sentence}``: the interface replaces whatever it showed with the sentence stating
the outcome, which is also all the kept message says. ``ChatOpenAI`` points at the embedded
default reader; any chat model that streams works the same way (one that does not is called
once, and its text comes at the end).

Run: ``uv run python cookbook/10_streaming_chat.py``
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, message_chunk_to_message
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from evidence_first.adapters import outcome_text
from evidence_first.local import LocalModel
from langchain_evidence_first import EvidenceAnswerer, answer_of

QUESTIONS = ["When is the launch?", "Who owns the launch checklist?"]
DOCUMENTS = [
    Document(
        id="standup-06-11",
        page_content="Standup, June 11: the launch moved to June 15. Ravi owns the launch "
        "checklist.",
        metadata={"title": "Standup notes"},
    ),
    Document(
        id="budget-email",
        page_content="From Priya: the budget review is on Friday, May 8.",
        metadata={"title": "Budget email"},
    ),
]


# --8<-- [start:node]
def build_chat(llm: BaseChatModel) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A one-node chat graph: the answer streams as it is verified, the message is kept."""
    # On a busy CPU a local model can take minutes: a modest output, the longest timeout.
    answerer = EvidenceAnswerer(llm=llm, output="message", max_output_tokens=512, timeout=300)

    def answer(state: MessagesState) -> dict[str, list[AnyMessage]]:
        write = get_stream_writer()
        question = state["messages"][-1].text
        chunks = []
        for chunk in answerer.stream({"question": question, "sources": DOCUMENTS}):
            chunks.append(chunk)
            if chunk.chunk_position != "last" and chunk.text:
                write({"text": chunk.text})  # verified: its facts and citations were checked
        message = message_chunk_to_message(functools.reduce(operator.add, chunks))
        final = answer_of(message)  # the final answer, judged on the whole reply
        if final.status != "answered":
            # A non-answer reads as its outcome sentence alone, as invoke() returns it, even
            # when verified text came first and the reply failed later (a late failure).
            sentence = outcome_text(final)
            write({"replace": sentence})
            message = message.model_copy(update={"content": [{"type": "text", "text": sentence}]})
        return {"messages": [message]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=InMemorySaver())


# --8<-- [end:node]


# --8<-- [start:chat]
def chat(llm: BaseChatModel, questions: list[str] = QUESTIONS) -> list[AnyMessage]:
    """Ask each question on one thread, printing the verified text as it streams."""
    graph = build_chat(llm)
    config = {"configurable": {"thread_id": "recipe-10"}}
    for question in questions:
        print(f"> {question}")
        shown = False
        for data in graph.stream(
            {"messages": [HumanMessage(question)]}, config, stream_mode="custom"
        ):
            if "text" in data:
                print(data["text"], end="", flush=True)
                shown = True
            else:  # a screen would replace what it showed; a terminal says so
                print(f"\n(withdrawn) {data['replace']}" if shown else data["replace"], end="")
        print()
    messages: list[AnyMessage] = graph.get_state(config).values["messages"]  # kept per thread
    return messages


# --8<-- [end:chat]


def main(local: LocalModel | None = None) -> list[AnyMessage]:
    """Run the recipe with the given local model, or start the default reader for the run."""
    if local is None:
        with LocalModel() as started:
            return main(started)
    llm = ChatOpenAI(base_url=local.base_url, api_key="unused", model=local.model_name)
    return chat(llm)


if __name__ == "__main__":
    main()
