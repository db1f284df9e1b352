"""Fixtures for the LlamaIndex tests: a small corpus, its nodes and retriever, and fake LLMs.

The fake OpenAI endpoint is an ``httpx.MockTransport`` behind a real ``OpenAILike``, so the
strict transport is exercised end to end offline and every HTTP attempt is recorded. The
loopback server is a real HTTP endpoint on 127.0.0.1 for the SDKs whose own transport cannot
be swapped (anthropic, aiohttp under google-genai): every request a client attempts reaches it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from llama_index.core import Document, SummaryIndex
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from llama_index.llms.openai_like import OpenAILike
from llama_index.retrievers.bm25 import BM25Retriever

from evidence_first import ModelRequest
from llama_index.response_synthesizers.evidence_first._strict_call import AsyncLLMReader, LLMReader

SECRET = "sk-live-4f9c2d-DO-NOT-SEND"

# Paragraphs are separated the way SentenceSplitter splits first ("\n\n\n"), and each fits a
# chunk, so the splitter never needs its sentence tokenizer.
STANDUP = "\n\n\n".join(
    [
        "Standup notes, April 28. Attendees: Ravi, Mei and Jonas.",
        "Mei said the onboarding emails are drafted and will go out one week before launch.",
        "Ravi reported that the Apollo launch moved to June 15 because the payment provider "
        "needs two more weeks for the security review.",
        "Jonas will update the public roadmap once the new launch date is confirmed in writing.",
    ]
)
BUDGET = "\n\n\n".join(
    [
        "Budget email from finance, May 2.",
        "The marketing budget for the Apollo launch is 40,000 euros, approved by the CFO.",
        "Travel for the launch event is capped at 5,000 euros per team.",
    ]
)
HANDBOOK = "\n\n\n".join(
    [
        "Employee handbook, chapter 3: remote work.",
        "Employees may work remotely up to three days per week with their manager's consent.",
        "Core hours are 10:00 to 15:00 in the office's time zone.",
    ]
)

LAUNCH_QUOTE = "the Apollo launch moved to June 15"


def make_documents() -> list[Document]:
    return [
        Document(
            text=STANDUP,
            doc_id="standup-04-28",
            metadata={"speaker": "Ravi", "api_token": SECRET, "scope": "team-apollo"},
        ),
        Document(
            text=BUDGET,
            doc_id="budget-05-02",
            metadata={"speaker": "finance", "scope": "team-apollo"},
        ),
        Document(text=HANDBOOK, doc_id="handbook-3", metadata={"scope": "everyone"}),
    ]


def node_id(index: int, document: BaseNode) -> str:
    """Stable node IDs, so recorded cassettes cite the same IDs when replayed."""
    return f"{document.node_id}#{index}"


@pytest.fixture
def documents() -> list[Document]:
    return make_documents()


@pytest.fixture
def nodes(documents: list[Document]) -> list[BaseNode]:
    splitter = SentenceSplitter(chunk_size=80, chunk_overlap=0, id_func=node_id)
    return splitter.get_nodes_from_documents(documents)


@pytest.fixture
def index(nodes: list[BaseNode]) -> SummaryIndex:
    return SummaryIndex(nodes)


@pytest.fixture
def retriever(index: SummaryIndex) -> BM25Retriever:
    return BM25Retriever.from_defaults(docstore=index.docstore, similarity_top_k=3)


def sources_in(user_message: str) -> list[dict[str, Any]]:
    """The sources array the core put in the user message."""
    return json.JSONDecoder().raw_decode(user_message, user_message.index("\n[\n") + 1)[0]


def _cite(source: dict[str, Any], quote: str) -> dict[str, Any] | None:
    """Cite ``quote`` in ``source``: by quote, or (passage mode) by the passage holding it."""
    if "passages" not in source:
        return {"source_id": source["id"], "quote": quote} if quote in source["text"] else None
    # Passage text is datamarked: each space is sent as U+02C6.
    labels = [p["label"] for p in source["passages"] if quote in p["text"].replace("\u02c6", " ")]
    return {"source_id": source["id"], "passages": labels[:1], "quote": None} if labels else None


def ledger_for(user_message: str, quote: str | None = LAUNCH_QUOTE, answer: str = "June 15") -> str:
    """A ledger citing ``quote`` from whichever sent source contains it, else an abstention."""
    citations = [c for s in sources_in(user_message) if quote and (c := _cite(s, quote))]
    if not citations:
        return json.dumps(
            {"facts": [], "answer": None, "inference": None, "missing_evidence": ["launch date"]}
        )
    fact = {
        "subject": "launch",
        "relation": "moved to",
        "object": answer,
        "citations": citations[:1],
    }
    return json.dumps(
        {"facts": [fact], "answer": answer, "inference": None, "missing_evidence": []}
    )


USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def chunks(
    content: str, size: int, *, finish_reason: str | None = "stop", usage: bool = True
) -> list[dict[str, Any]]:
    """``content`` as OpenAI's chat-completion chunks of ``size`` characters, as a server
    streams them: the role first, the finish reason on the last, then (``usage``, as
    ``stream_options.include_usage`` asks) a chunk of no choices with the usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": [choice],
        }

    pieces = [chunk({"role": "assistant", "content": ""})]
    pieces += [chunk({"content": content[at : at + size]}) for at in range(0, len(content), size)]
    pieces.append(chunk({}, finish_reason))
    if usage:
        last = chunk({})
        last["choices"], last["usage"] = [], USAGE
        pieces.append(last)
    return pieces


def as_events(pieces: list[dict[str, Any]]) -> list[str]:
    """Chunks as a server's server-sent events, each with its blank line, then ``[DONE]``."""
    return [f"data: {json.dumps(piece)}\n\n" for piece in pieces] + ["data: [DONE]\n\n"]


def sse_body(choice: dict[str, Any], size: int) -> bytes:
    """The message of ``choice`` streamed as server-sent events, then ``[DONE]``: its usage in
    a last chunk, as a server sends it when asked (this one always does, as some do)."""
    message = choice["message"]
    events = chunks(message["content"], size, finish_reason=choice["finish_reason"])
    if message.get("tool_calls"):
        events[-2]["choices"][0]["delta"]["tool_calls"] = message["tool_calls"]
    return "".join(as_events(events)).encode()


class FakeOpenAI:
    """An OpenAI-compatible endpoint in process: records each attempt, answers as scripted.

    By default it answers the launch question from the sources it was sent. Set ``status`` to
    fail every request, or ``reply`` to control the message and finish reason. A request that
    streams is answered with the same message as server-sent chunks (:func:`chunks`).
    """

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.status = 200
        self.reply: Callable[[dict[str, Any]], dict[str, Any]] = self.answer_launch
        self.raise_error: Exception | None = None
        self.chunk_size = 5  # characters of the message per chunk, when a request streams

    @property
    def attempts(self) -> int:
        return len(self.requests)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]

    @staticmethod
    def answer_launch(body: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        content = ledger_for(user) if "\n[\n" in user else "Hello."  # ordinary chat
        return {"message": {"role": "assistant", "content": content}}

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.raise_error is not None:
            raise self.raise_error
        if self.status != 200:
            error = {"error": {"message": "crafted failure", "type": "server_error"}}
            return httpx.Response(self.status, json=error)
        body = json.loads(request.content)
        choice = {"index": 0, "finish_reason": "stop", **self.reply(body)}
        if body.get("stream"):
            return httpx.Response(
                200,
                content=sse_body(choice, self.chunk_size),
                headers={"content-type": "text/event-stream"},
            )
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": "fake",
                "choices": [choice],
                "usage": USAGE,
            },
        )

    def llm(self, **kwargs: Any) -> OpenAILike:
        """An ``OpenAILike`` chat model wired to this endpoint, with LlamaIndex's defaults."""
        transport = httpx.MockTransport(self.handle)
        settings: dict[str, Any] = {
            "model": "fake-model",
            "api_base": "http://fake-openai.test/v1",
            "api_key": "sk-test",
            "is_chat_model": True,
            "http_client": httpx.Client(transport=transport),
            "async_http_client": httpx.AsyncClient(transport=transport),
        }
        settings.update(kwargs)
        return OpenAILike(**settings)


@pytest.fixture
def openai_chunks() -> Callable[..., list[dict[str, Any]]]:
    """Return :func:`chunks`: a message as the chat-completion chunks a server streams."""
    return chunks


@pytest.fixture
def openai_events() -> Callable[[list[dict[str, Any]]], list[str]]:
    """Return :func:`as_events`: chunks as the events a loopback server streams."""
    return as_events


@pytest.fixture
def fake_openai() -> FakeOpenAI:
    return FakeOpenAI()


class LedgerLLM(CustomLLM):
    """A LlamaIndex ``CustomLLM`` (outside the allow-list) that answers with a ledger.

    It records the chat messages it receives, so tests can see exactly what was sent.
    """

    quote: str | None = LAUNCH_QUOTE
    received: list[list[ChatMessage]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, model_name="ledger-llm")

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.received.append(list(messages))
        user = next(m.content for m in messages if m.role == "user")
        content = ledger_for(user, self.quote)
        return ChatResponse(message=ChatMessage(role="assistant", content=content))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("the synthesizer must call chat, not complete")

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise AssertionError("the synthesizer must not stream")


@pytest.fixture
def ledger_llm() -> LedgerLLM:
    return LedgerLLM(received=[])


@pytest.fixture
def ledger_llm_class() -> type[LedgerLLM]:
    return LedgerLLM


@pytest.fixture
def secret() -> str:
    """A credential kept in one document's metadata; it must never reach the model."""
    return SECRET


@pytest.fixture
def launch_quote() -> str:
    return LAUNCH_QUOTE


@pytest.fixture
def launch_nodes(launch_quote) -> list[NodeWithScore]:
    """Two nodes, the first holding the launch quote."""
    return [
        NodeWithScore(
            node=TextNode(id_="notes", text=f"Standup: {launch_quote}. Ravi owns it."), score=2.0
        ),
        NodeWithScore(node=TextNode(id_="budget", text="Budget review is Friday."), score=1.0),
    ]


@pytest.fixture(name="ledger_for")
def ledger_for_fixture() -> Callable[..., str]:
    """Return :func:`ledger_for`: a ledger answering from the sources a user message holds."""
    return ledger_for


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    """The requests the synthesizer hands its reader, to compare with what went on the wire."""
    requests: list[ModelRequest] = []
    generate, agenerate = LLMReader.generate, AsyncLLMReader.agenerate

    def spy(self: LLMReader, request: ModelRequest) -> Any:
        requests.append(request)
        return generate(self, request)

    async def aspy(self: AsyncLLMReader, request: ModelRequest) -> Any:
        requests.append(request)
        return await agenerate(self, request)

    monkeypatch.setattr(LLMReader, "generate", spy)
    monkeypatch.setattr(AsyncLLMReader, "agenerate", aspy)
    return requests


def anthropic_chat_arguments(strict: Any, request: ModelRequest) -> dict[str, Any]:
    """What ``Anthropic.chat`` passes its client's ``messages.create`` for ``request`` through
    the strict copy, without the message conversion that fails with anthropic 2.x."""
    return {
        "messages": [{"role": "user", "content": request.user}],
        "system": request.system,
        "stream": False,
        **strict._get_all_kwargs(),
    }


@pytest.fixture
def anthropic_chat_call() -> Callable[[Any, ModelRequest], dict[str, Any]]:
    """Return :func:`anthropic_chat_arguments`."""
    return anthropic_chat_arguments
