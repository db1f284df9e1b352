"""Framework overhead against the peers: what one cited answer costs with an instant model.

Every system answers the same question from the same retrieved chunks (8, 32 and 64 chunks of
about 200 pseudo-English words, generated from a fixed seed), and its model answers at once
with a prepared reply, so the time measured is the framework's own work: turning retrieved
documents into a prompt, the model-call plumbing (callbacks, tracing, threads), and reading
the reply. Nothing of that is excluded; the chunks are built once, outside the timed region.

Systems:

- ``evidence-first (LangChain)``: ``EvidenceAnswerer.invoke`` over LangChain ``Document``s,
  with a ``BaseChatModel`` subclass that returns a valid ledger (4 facts x 2 citations, each
  quoting a sentence of one of the first 8 chunks). Every citation is verified.
- ``evidence-first (LlamaIndex)``: ``EvidenceQueryEngine.query`` over a retriever that returns
  the chunks as nodes, with a ``CustomLLM`` subclass that returns the same ledger.
- ``CitationQueryEngine (MockLLM)``: LlamaIndex's ``CitationQueryEngine`` over the same
  retriever with llama-index-core's ``MockLLM(max_tokens=256)`` (256 is LlamaIndex's default
  output reservation; MockLLM answers with that many words). MockLLM declares LlamaIndex's
  default 3,900-token context window, so the compact-and-refine synthesizer spreads the chunks
  over several calls. This is the configuration the issue's target names.
- ``CitationQueryEngine (MockLLM, 128k window)``: the same, with a MockLLM subclass that only
  declares a 131,072-token window, as a modern chat model would: fewer calls, for fairness.
- ``LangChain structured output``: the citation chain of LangChain's "RAG with citations"
  guide: chunks formatted as ``Source ID: i`` / ``Article Snippet: ...`` into a system prompt,
  then ``llm.with_structured_output(QuotedAnswer)`` (an answer and a list of
  ``{source_id, quote}``). The fake chat model implements ``bind_tools`` and answers with a
  tool call to the bound schema whose arguments cite the same 8 sentences; langchain-core's
  ``PydanticToolsParser`` validates them. Nothing checks that the quotes are in the sources.

The model wrappers only count calls and record prompts (the subclasses override the call to
log it, then answer). ``prompt chars`` sums the characters of the messages (or completion
prompt) over a query's calls; tool definitions and JSON schemas are not counted for any
system. ``all chunks sent`` checks the recorded prompts: every chunk's text must appear in
them, allowing a chunk to be split across calls in pieces of 40 characters or more; ours must
also list every chunk in ``used_source_ids``.

Target: at 64 chunks, our median is at least 20x below ``CitationQueryEngine (MockLLM)``'s,
with exactly one model call.

Run from the workspace root::

    uv run python benchmarks/peers.py [--repeat N] [--quick]

It prints the Python version and platform, then a Markdown table. Missed targets show ``NO``
in the ``met`` column; the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from _common import machine_line, p90, prose_sentence, require, run_flags
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_openai_tool
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.base.response.schema import Response
from llama_index.core.constants import DEFAULT_NUM_OUTPUTS
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from evidence_first import EvidenceAnswer
from evidence_first.adapters import UnenforcedSettingsWarning
from langchain_evidence_first import EvidenceAnswerer
from llama_index.response_synthesizers.evidence_first import EvidenceQueryEngine

QUESTION = "What do the field notes say about the survey of the northern valley?"
CHUNK_COUNTS = (8, 32, 64)
WORDS_PER_CHUNK = 200
CITED_CHUNKS = 8
TARGET_RATIO = 20.0
MIN_PIECE_CHARS = 40

OURS_LANGCHAIN = "evidence-first (LangChain)"
OURS_LLAMAINDEX = "evidence-first (LlamaIndex)"
CITATION_ENGINE = "CitationQueryEngine (MockLLM)"
CITATION_ENGINE_WIDE = "CitationQueryEngine (MockLLM, 128k window)"
LANGCHAIN_STRUCTURED = "LangChain structured output"
SYSTEMS = (
    OURS_LANGCHAIN,
    OURS_LLAMAINDEX,
    CITATION_ENGINE,
    CITATION_ENGINE_WIDE,
    LANGCHAIN_STRUCTURED,
)
OURS = (OURS_LANGCHAIN, OURS_LLAMAINDEX)

# --- The retrieved chunks --------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    sentences: tuple[str, ...]


def make_chunks(count: int, seed: int = 200) -> list[Chunk]:
    """``count`` chunks of sentences, each stopping at the first sentence that reaches 200 words."""
    rng = random.Random(seed)
    chunks: list[Chunk] = []
    for index in range(count):
        sentences: list[str] = []
        words = 0
        while words < WORDS_PER_CHUNK:
            sentence = prose_sentence(rng)
            sentences.append(sentence)
            words += len(sentence.split())
        chunks.append(Chunk(f"chunk-{index:02d}", " ".join(sentences), tuple(sentences)))
    return chunks


def cited_sentences(chunks: Sequence[Chunk]) -> list[tuple[int, str]]:
    """One sentence from each of the first 8 chunks that occurs only once in its chunk."""
    cited: list[tuple[int, str]] = []
    for index, chunk in enumerate(chunks[:CITED_CHUNKS]):
        quote = next(s for s in chunk.sentences[1:] if chunk.text.find(s) == chunk.text.rfind(s))
        cited.append((index, quote))
    return cited


def ledger_reply(chunks: Sequence[Chunk]) -> str:
    """Our model's reply: a valid ledger of 4 facts x 2 citations."""
    cited = cited_sentences(chunks)
    facts = [
        {
            "subject": "survey",
            "relation": f"is described in note {number}",
            "object": "the northern valley",
            "citations": [
                {"source_id": chunks[index].id, "quote": quote}
                for index, quote in cited[2 * number : 2 * number + 2]
            ],
        }
        for number in range(len(cited) // 2)
    ]
    ledger = {
        "facts": facts,
        "answer": "The survey team measured the northern valley and recorded its roads.",
        "inference": None,
        "missing_evidence": [],
    }
    return json.dumps(ledger)


# --- Counting what reaches the model ---------------------------------------------------------


@dataclass
class CallLog:
    """The prompts one query sent to its model, one entry per call."""

    prompts: list[str] = field(default_factory=list)

    def record(self, prompt: str) -> None:
        self.prompts.append(prompt)

    def reset(self) -> None:
        self.prompts.clear()

    @property
    def calls(self) -> int:
        return len(self.prompts)

    @property
    def chars(self) -> int:
        return sum(len(prompt) for prompt in self.prompts)


def is_sent(text: str, prompts: Sequence[str]) -> bool:
    """Whether ``text`` appears in the prompts whole, or in pieces of >= 40 chars (split calls)."""
    position = 0
    while position < len(text):
        while position < len(text) and text[position].isspace():
            position += 1  # a splitter may drop the space it cut at
        rest = len(text) - position
        if rest == 0:
            return True
        # The longest prefix of the rest found in one prompt (containment is monotone).
        low, high = 0, rest
        while low < high:
            middle = (low + high + 1) // 2
            piece = text[position : position + middle]
            if any(piece in prompt for prompt in prompts):
                low = middle
            else:
                high = middle - 1
        if low < min(MIN_PIECE_CHARS, rest):
            return False
        position += low
    return True


def chunks_sent(chunks: Sequence[Chunk], prompts: Sequence[str]) -> int:
    return sum(is_sent(chunk.text, prompts) for chunk in chunks)


# --- Instant models --------------------------------------------------------------------------


class InstantChatModel(BaseChatModel):
    """A LangChain chat model that answers every call at once with ``reply``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reply: str
    log: CallLog = Field(exclude=True)

    @property
    def _llm_type(self) -> str:
        return "instant-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.log.record("".join(message.text for message in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])


class InstantToolCallingChatModel(BaseChatModel):
    """A LangChain chat model that supports ``bind_tools`` and calls the first bound tool."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool_args: dict[str, Any]
    log: CallLog = Field(exclude=True)

    @property
    def _llm_type(self) -> str:
        return "instant-fake-tools"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.log.record("".join(message.text for message in messages))
        name = kwargs["tools"][0]["function"]["name"]
        call = {"name": name, "args": self.tool_args, "id": "call-1", "type": "tool_call"}
        message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


class InstantLedgerLLM(CustomLLM):
    """A LlamaIndex chat LLM that answers every call at once with ``reply``."""

    reply: str = ""
    _log: CallLog = PrivateAttr(default_factory=CallLog)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=131_072, num_output=8192, is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._log.record("".join(message.content or "" for message in messages))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=self.reply))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._log.record(prompt)
        return CompletionResponse(text=self.reply)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        yield self.complete(prompt, formatted=formatted)


class CountingMockLLM(MockLLM):
    """llama-index-core's MockLLM; only logs each completion prompt before answering."""

    _log: CallLog = PrivateAttr(default_factory=CallLog)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._log.record(prompt)
        return super().complete(prompt, formatted=formatted, **kwargs)


class WideCountingMockLLM(CountingMockLLM):
    """The same MockLLM, declaring the 131,072-token context window of a modern chat model."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=131_072, num_output=self.max_tokens or -1, is_chat_model=False
        )


class FixedRetriever(BaseRetriever):
    """A LlamaIndex retriever that returns the prepared nodes, best first."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self._nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self._nodes)


# --- The peer chain from LangChain's citation guide ------------------------------------------


class QuotedCitation(BaseModel):
    source_id: int = Field(
        description="The integer ID of a SPECIFIC source which justifies the answer."
    )
    quote: str = Field(
        description="The VERBATIM quote from the specified source that justifies the answer."
    )


class QuotedAnswer(BaseModel):
    """Answer the user question based only on the given sources, and cite the sources used."""

    answer: str = Field(
        description="The answer to the user question, which is based only on the given sources."
    )
    citations: list[QuotedCitation] = Field(
        description="Citations from the given sources that justify the answer."
    )


GUIDE_SYSTEM_PROMPT = (
    "You're a helpful AI assistant. Given a user question and some article snippets, answer "
    "the user question. If none of the articles answer the question, just say you don't know."
    "\n\nHere are the articles:{context}"
)


def format_docs_with_id(documents: Sequence[Document]) -> str:
    return "\n\n" + "\n\n".join(
        f"Source ID: {index}\nArticle Snippet: {document.page_content}"
        for index, document in enumerate(documents)
    )


def structured_chain(model: InstantToolCallingChatModel) -> Runnable[dict[str, Any], Any]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", GUIDE_SYSTEM_PROMPT), ("human", "{question}")]
    )
    context = RunnablePassthrough.assign(context=lambda x: format_docs_with_id(x["sources"]))
    return context | prompt | model.with_structured_output(QuotedAnswer)


# --- Systems ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """One system ready to answer ``QUESTION`` from one set of chunks."""

    name: str
    run: Callable[[], object]
    log: CallLog
    check: Callable[[object], int | None]
    """Raises unless the answer is what the model replied; returns the sources it reports sent."""


def evidence_answer_sent(answer: object) -> int:
    if not isinstance(answer, EvidenceAnswer) or answer.status != "answered":
        msg = f"our answer is not 'answered': {getattr(answer, 'status', answer)!r}"
        raise RuntimeError(msg)
    return len(answer.used_source_ids)


def ours_options() -> dict[str, int]:
    return {"max_context_tokens": 32_768, "max_output_tokens": 8192, "max_response_chars": 131_072}


def build_systems(chunks: Sequence[Chunk]) -> list[System]:
    reply = ledger_reply(chunks)
    documents = [Document(id=chunk.id, page_content=chunk.text) for chunk in chunks]
    lc_input = {"question": QUESTION, "sources": documents}
    nodes = [
        NodeWithScore(node=TextNode(id_=chunk.id, text=chunk.text), score=1.0 - index / 100)
        for index, chunk in enumerate(chunks)
    ]
    retriever = FixedRetriever(nodes)
    systems: list[System] = []

    lc_log = CallLog()
    with warnings.catch_warnings():
        # A fake model is not on the allow-list; the one-time warning says so.
        warnings.simplefilter("ignore", UnenforcedSettingsWarning)
        answerer = EvidenceAnswerer(llm=InstantChatModel(reply=reply, log=lc_log), **ours_options())
        ledger_llm = InstantLedgerLLM(reply=reply)
        engine = EvidenceQueryEngine.from_args(retriever, llm=ledger_llm, **ours_options())
    systems.append(
        System(OURS_LANGCHAIN, lambda: answerer.invoke(lc_input), lc_log, evidence_answer_sent)
    )
    systems.append(
        System(
            OURS_LLAMAINDEX,
            lambda: engine.query(QUESTION).metadata["evidence_answer"],
            ledger_llm._log,
            evidence_answer_sent,
        )
    )

    for name, llm_class in (
        (CITATION_ENGINE, CountingMockLLM),
        (CITATION_ENGINE_WIDE, WideCountingMockLLM),
    ):
        mock = llm_class(max_tokens=DEFAULT_NUM_OUTPUTS)
        citation_engine = CitationQueryEngine(retriever, llm=mock)
        systems.append(
            System(
                name,
                lambda e=citation_engine: e.query(QUESTION),
                mock._log,
                check_citation_response,
            )
        )

    tool_log = CallLog()
    tool_args = {
        "answer": "The survey team measured the northern valley and recorded its roads.",
        "citations": [
            {"source_id": index, "quote": quote} for index, quote in cited_sentences(chunks)
        ],
    }
    chain = structured_chain(InstantToolCallingChatModel(tool_args=tool_args, log=tool_log))
    systems.append(
        System(LANGCHAIN_STRUCTURED, lambda: chain.invoke(lc_input), tool_log, check_quoted_answer)
    )
    return systems


def check_citation_response(response: object) -> None:
    # CitationQueryEngine reports the numbered citation chunks it made, not the chunks given.
    if not isinstance(response, Response) or not response.source_nodes:
        msg = f"CitationQueryEngine returned {type(response).__name__}"
        raise RuntimeError(msg)


def check_quoted_answer(answer: object) -> None:
    if not isinstance(answer, QuotedAnswer) or len(answer.citations) != CITED_CHUNKS:
        msg = f"the structured-output chain returned {answer!r}"
        raise RuntimeError(msg)


# --- Measuring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    system: str
    chunks: int
    timings_ms: list[float]
    calls: int
    prompt_chars: int
    sent: int
    used_source_ids: int | None

    @property
    def median(self) -> float:
        return statistics.median(self.timings_ms)

    @property
    def p90(self) -> float:
        return p90(self.timings_ms)

    @property
    def all_sent(self) -> bool:
        return self.sent == self.chunks and self.used_source_ids in (None, self.chunks)


def measure(system: System, chunks: Sequence[Chunk], warmup: int, repeat: int) -> Result:
    """One checked run, ``warmup`` more, then ``repeat`` timed runs with the call count checked."""
    system.log.reset()
    answer = system.run()
    used = system.check(answer)
    calls, chars = system.log.calls, system.log.chars
    sent = chunks_sent(chunks, system.log.prompts)
    for _ in range(warmup):
        system.run()
    gc.collect()
    timings: list[float] = []
    for _ in range(repeat):
        system.log.reset()
        start = time.perf_counter()
        system.run()
        timings.append((time.perf_counter() - start) * 1000)
        require(system.log.calls == calls, f"{system.name}: the call count changed")
    system.log.reset()
    return Result(system.name, len(chunks), timings, calls, chars, sent, used)


def repeats(system: str, chunks: int, quick: bool, override: int | None) -> int:
    if quick:
        return 1
    if override is not None:
        return override
    if system in OURS:
        return 100
    return 40 if chunks <= 8 else 20


# --- Reporting -------------------------------------------------------------------------------


def verdict(result: Result, reference: Result) -> tuple[str, str]:
    """The target and whether it is met, for our rows at 64 chunks."""
    if result.system not in OURS or result.chunks != max(CHUNK_COUNTS):
        return "", ""
    met = reference.median / result.median >= TARGET_RATIO and result.calls == 1 and result.all_sent
    return f">= {TARGET_RATIO:g}x below, 1 call", "yes" if met else "NO"


def render(results: list[Result]) -> str:
    reference = {r.chunks: r for r in results if r.system == CITATION_ENGINE}
    lines = [
        machine_line(),
        "",
        "| system | chunks | median ms | p90 ms | model calls | prompt chars | all chunks sent "
        "| CitationQueryEngine median / this | target | met |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for r in results:
        ratio = reference[r.chunks].median / r.median
        sent = "yes" if r.all_sent else "NO"
        target, met = verdict(r, reference[r.chunks])
        lines.append(
            f"| {r.system} | {r.chunks} | {r.median:.2f} | {r.p90:.2f} | {r.calls} "
            f"| {r.prompt_chars:,} | {sent} ({r.sent}/{r.chunks}) | {ratio:.1f}x "
            f"| {target} | {met} |"
        )
    lines.append("")
    lines.extend(
        f"{r.system}, {r.chunks} chunks: min {min(r.timings_ms):.2f} ms over "
        f"{len(r.timings_ms)} runs"
        for r in results
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return run_flags(
        argv,
        argparse.ArgumentParser(description=__doc__.splitlines()[0]),
        repeat_help="timed runs per system and size (default: 100 ours, 20 to 40 peers)",
        quick_help="one run each, as a smoke test",
    )


def run_all(quick: bool, repeat: int | None) -> Iterator[Result]:
    all_chunks = make_chunks(max(CHUNK_COUNTS))
    warmup = 0 if quick else 3
    for count in CHUNK_COUNTS:
        chunks = all_chunks[:count]
        for system in build_systems(chunks):
            yield measure(system, chunks, warmup, repeats(system.name, count, quick, repeat))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(render(list(run_all(args.quick, args.repeat))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
