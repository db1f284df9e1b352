"""`EvidenceSynthesizer`: a LlamaIndex response synthesizer whose every citation is verified."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.callbacks.base import CallbackManager, EventContext
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.events.synthesis import (
    SynthesizeEndEvent,
    SynthesizeStartEvent,
)
from llama_index.core.llms import LLM
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, QueryType
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore
from llama_index.core.types import RESPONSE_TEXT_TYPE
from typing_extensions import Unpack

from evidence_first import EvidenceAnswer, InvalidRequestError, ModelProfile, StreamEvent
from evidence_first.adapters import (
    AnswerOptions,
    OptionArgs,
    aanswer_selection,
    answer_metadata,
    answer_selection,
    astream_selection,
    outcome_text,
    stream_selection,
)
from llama_index.response_synthesizers.evidence_first._nodes import (
    DocumentTexts,
    MetadataKeys,
    NodeSelection,
    select_nodes,
)
from llama_index.response_synthesizers.evidence_first._numbers import numbered
from llama_index.response_synthesizers.evidence_first._streaming import (
    EvidenceResponse,
    StreamedText,
    async_streaming_response,
    streaming_response,
)
from llama_index.response_synthesizers.evidence_first._strict_call import reader_for

__all__ = ["EvidenceSynthesizer"]

# Spans and events nest under LlamaIndex's root dispatcher, as the core synthesizers' do.
# (llama-index-core re-exports get_dispatcher without declaring it, hence the type ignore.)
dispatcher = get_dispatcher(__name__)

_SOURCE_NUMBERS_KEY = "source_numbers"
_SOURCE_NUMBER_NODE_IDS_KEY = "source_number_node_ids"


class EvidenceSynthesizer(BaseSynthesizer):
    """Answers from the retrieved nodes only, calling the LLM once, and verifies every citation.

    Use it wherever LlamaIndex takes a response synthesizer::

        synth = EvidenceSynthesizer(llm=llm, max_context_tokens=4096)
        engine = RetrieverQueryEngine(retriever, response_synthesizer=synth)
        response = engine.query("When is the launch?")
        response.response                       # the answer, or a sentence stating the outcome
        response.source_nodes                   # the nodes sent to the model, in order
        response.metadata["evidence_answer"]    # the EvidenceAnswer: status, facts, citations
        response.metadata["evidence_flags"]     # what deserves a second look, even if answered
        response.metadata["reader_confidence"]  # the reader's own confidence, or None

    With ``streaming=True`` it returns LlamaIndex's ``StreamingResponse`` (from
    ``asynthesize``, ``AsyncStreamingResponse``) once the answer is planned, so
    ``response.print_response_stream()`` and ``for text in response.response_gen`` work.
    ``source_nodes`` are the nodes to be sent; the generator makes the one call (through the
    LLM's ``stream_chat``, under the same strict settings) and yields the answer's text as it
    arrives, each part only once the facts it rests on are verified (under ``number_sources``
    a segment at a time, its numbers after it). ``metadata`` is filled when the result
    arrives. A non-answer ends the stream with its sentence; if a check of the whole reply
    fails after text was passed on, the sentence follows it on a paragraph of its own, and
    ``get_response().response`` and ``str(response)`` are the sentence alone: the
    non-streaming ``response``, never the pieces joined. The reader's decision and each fact
    are also instrumentation events (``EvidenceDecisionEvent``, ``EvidenceFactEvent``),
    dispatched as they arrive. An error of the call (``ModelCallError``,
    ``AnswerTimeoutError``) raises from the generator; closing it, or cancelling the task
    reading it, cancels the call and closes its connection.

    A non-answer's ``response`` (and so ``str(response)``, what a ``QueryEngineTool`` hands an
    agent) is one sentence stating its status and what is missing or why it failed, the words
    of LangChain's message output (:func:`evidence_first.adapters.outcome_text`):
    ``"No answer (insufficient_evidence). Missing evidence: the launch date."``. The result
    itself is ``metadata["evidence_answer"]``.

    Each node becomes one source: its ``node_id``, its text without metadata
    (``MetadataMode.NONE``), its retrieval score, and the speaker, time and status read from
    its metadata. With the original documents at hand (``documents=`` or ``docstore=``), a
    node whose ``start_char_idx``/``end_char_idx`` slice of its ``ref_doc_id`` document is
    exactly its text also gives each citation its span in that document
    (``citation.document``); otherwise ``citation.document`` is ``None``. Nodes repeating an
    earlier node's ID are set aside as ``duplicate_id``, then nodes past the 64th as
    ``over_source_limit``.

    With ``number_sources=True`` the text reads as LlamaIndex's ``CitationQueryEngine``
    writes it: after each segment of the answer (``EvidenceAnswer.segments``) come the
    numbers of the nodes it rests on, ``[n]`` being ``response.source_nodes[n - 1]``, so
    ``"June 15. It moved."`` becomes ``"June 15.[1] It moved.[1][2]"``. A segment's numbers
    are those of every node cited by the facts it rests on, ascending; an unmarked segment
    gets none, and an answer without segments (one stored before segments existed) is left
    as it is. Every ``[n]`` in the text is one of these: a bracketed number the model wrote
    itself (``[2]``, ``[2, 3]``) is shown in parentheses, ``(2)``, so it never reads as a
    citation of a source node. Two metadata keys then say where each number stands:

    - ``metadata["source_numbers"]``: one entry per segment, in order, ``{"segment_index":
      i, "char_start": ..., "char_end": ..., "source_numbers": [n, ...], "fact_indices":
      [...]}``. ``segment_index`` indexes ``EvidenceAnswer.segments`` (whose offsets are into
      the plain ``EvidenceAnswer.answer``); ``char_start``/``char_end`` are the segment's
      offsets into the numbered ``response.response``, its numbers written right after
      ``char_end``; ``fact_indices`` index ``EvidenceAnswer.facts``. Empty unless answered.
    - ``metadata["source_number_node_ids"]``: ``{n: node_id}`` for each number written.

    Args:
        llm: The LlamaIndex LLM; ``None`` means ``Settings.llm``. ``OpenAI``, ``OpenAILike``,
            ``Anthropic``, ``GoogleGenAI``, ``Ollama`` and their subclasses are called
            strictly (no retries, the output limit, timeout, temperature 0, the ledger's JSON
            schema in the provider's native structured-output field); OpenAI-compatible ones
            must be chat models (``is_chat_model=True``). Other LLMs are called with the
            prompt alone after one :class:`UnenforcedSettingsWarning`; one that retries
            (``max_retries`` > 0) or is configured with tools or structured output is refused.
        callback_manager: LlamaIndex callbacks; default ``Settings.callback_manager``.
        speaker_key: The metadata key of who said or wrote a node's text.
        observed_at_key: The metadata key of when: Unix ms, an aware ``datetime`` or ISO 8601
            with a UTC offset. Any other value raises ``InvalidRequestError`` naming the key
            (never the value), before any call.
        status_key: The metadata key of ``"current"``, ``"superseded"`` or ``"contradicted"``.
            Any other value raises ``InvalidRequestError`` naming the key, before any call:
            dropping a ``superseded`` status silently would change what the model is told.
        documents: The original documents (LlamaIndex documents, or a mapping of document ID
            to text), so citations can be given offsets into them.
        docstore: A docstore holding the original documents by ID, for the same purpose.
        streaming: Return streaming responses, as above. LlamaIndex drops the
            ``streaming=True`` of ``index.as_query_engine(streaming=True,
            response_synthesizer=...)``, so pass it here; a non-streaming response asked to
            stream (``response_gen``, ``print_response_stream()``) raises an
            ``InvalidRequestError`` saying so. ``CondenseQuestionChatEngine`` turns it on for
            ``stream_chat`` and off for ``chat``, as it does for LlamaIndex's synthesizers.
        number_sources: Write ``[n]`` source numbers into ``response.response`` after each
            segment, and the ``source_numbers`` and ``source_number_node_ids`` metadata, as
            above. Off by default: the text is the plain answer and neither key is set.
        profile: What the LLM accepts, when the rule table cannot tell from its provider and
            name (an Azure deployment's name says nothing of its model): a
            :class:`~evidence_first.ModelProfile`, or the name of a model the rules know, such
            as ``"gpt-5"``. ``None``: found by the rules (:func:`profile_for`). The options
            still win over the profile's answering defaults.
        **options: The answering options (``knowledge``, ``citation_mode``,
            ``max_context_tokens``, ``timeout``, ``min_score``, ``scope``...), each with its
            default, range and meaning in :class:`~evidence_first.adapters.AnswerOptionFields`
            and the options table in ``docs/concepts.md``. ``min_score`` takes scores as
            higher-is-better, as LlamaIndex's ``SimilarityPostprocessor`` does.

    Raises:
        InvalidRequestError: An option is out of range, ``streaming`` or ``number_sources``
            is not a bool, or the LLM is refused.
        TypeError: An option name is unknown.
    """

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        callback_manager: CallbackManager | None = None,
        speaker_key: str = "speaker",
        observed_at_key: str = "observed_at",
        status_key: str = "status",
        documents: Iterable[BaseNode] | Mapping[str, str] | None = None,
        docstore: BaseDocumentStore | None = None,
        streaming: bool = False,
        number_sources: bool = False,
        profile: ModelProfile | str | None = None,
        **options: Unpack[OptionArgs],
    ) -> None:
        for name, flag in (("streaming", streaming), ("number_sources", number_sources)):
            if not isinstance(flag, bool):
                msg = f"{name} must be True or False, got {type(flag).__name__}"
                raise InvalidRequestError(msg, field=name)
        self._arguments: dict[str, Any] = {
            "llm": llm,
            "callback_manager": callback_manager,
            "speaker_key": speaker_key,
            "observed_at_key": observed_at_key,
            "status_key": status_key,
            "documents": documents,
            "docstore": docstore,
            "streaming": streaming,
            "number_sources": number_sources,
            "profile": profile,
            **options,
        }
        self._options = AnswerOptions(**options)
        self._keys = MetadataKeys(
            speaker=speaker_key, observed_at=observed_at_key, status=status_key
        )
        self._documents = DocumentTexts(documents, docstore)
        # Refuse before BaseSynthesizer attaches the callback manager to the caller's LLM.
        resolved = llm or Settings.llm
        self._reader = reader_for(resolved, profile)
        # The LLM's own, smaller output limit is the one sent; the schema's bounds follow it.
        own = self._reader.max_tokens
        if own is not None and own < self._options.max_output_tokens:
            self._options = self._options.model_copy(update={"max_output_tokens": own})
        super().__init__(llm=resolved, callback_manager=callback_manager)
        # BaseSynthesizer's name for the flag, read at each call: CondenseQuestionChatEngine
        # sets it on its query engine's synthesizer for one turn (True in stream_chat, False
        # in chat), as it does for LlamaIndex's own synthesizers.
        self._streaming = streaming
        self._number_sources = number_sources

    @property
    def options(self) -> AnswerOptions:
        """The answering options in effect (the output limit may be the LLM's smaller one)."""
        return self._options

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> EvidenceSynthesizer:
        """A new synthesizer with ``update`` applied to its arguments, checked anew.

        ``update`` takes the constructor's keywords (``llm``, ``speaker_key``, any option).

        Raises:
            InvalidRequestError: An updated value is out of range, or the LLM is refused.
            TypeError: An updated name is not a constructor keyword.
        """
        return type(self)(**{**self._arguments, **(update or {})})

    @property
    def llm(self) -> LLM:
        """The LLM this synthesizer reads with (the caller's; calls go through a strict copy)."""
        llm: LLM = self._reader.llm
        return llm

    def _get_prompts(self) -> PromptDictType:
        # The prompt is fixed and versioned (EvidenceAnswer.prompt_version), not a template.
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if prompts:
            msg = (
                "EvidenceSynthesizer's prompt is fixed and versioned, so it cannot be replaced "
                f"(got {', '.join(sorted(prompts))})"
            )
            raise InvalidRequestError(msg, field="prompts")

    def get_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Not supported: answers are built from nodes, so citations keep their node IDs.

        Raises:
            NotImplementedError: Always; call :meth:`synthesize` with the retrieved nodes.
        """
        raise NotImplementedError(_TEXT_CHUNKS_REFUSAL)

    async def aget_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Not supported, like :meth:`get_response`.

        Raises:
            NotImplementedError: Always; await :meth:`asynthesize` with the retrieved nodes.
        """
        raise NotImplementedError(_TEXT_CHUNKS_REFUSAL)

    @dispatcher.span
    def synthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        """Answer ``query`` from ``nodes`` with one LLM call and verify every citation.

        Args:
            query: The question, as a string or a ``QueryBundle``.
            nodes: The retrieved nodes, best first; each becomes one source.
            additional_source_nodes: Nodes the caller attaches without sending them to the
                model; kept in ``metadata["additional_source_nodes"]``, never in
                ``source_nodes``.
            **response_kwargs: Accepted for compatibility with other synthesizers; unused,
                since the prompt is fixed.

        Returns:
            A ``Response`` whose ``response`` is the answer, or a non-answer's sentence, whose
            ``source_nodes`` are the nodes sent, and whose ``metadata["evidence_answer"]`` is
            the :class:`~evidence_first.EvidenceAnswer`. With ``streaming=True``, once
            planned, a ``StreamingResponse`` with the nodes to be sent, whose generator makes
            the call and yields the verified text as it arrives, and whose ``metadata`` is
            filled when the result arrives (see the class).

        Raises:
            InvalidRequestError: The question or a node breaks the contract; nothing was sent.
            ModelCallError: The LLM call failed (HTTP errors included); with
                ``streaming=True``, from the generator.
            AnswerTimeoutError: The LLM did not answer within ``timeout``; with
                ``streaming=True``, from the generator.
        """
        with self._synthesis(query, nodes, additional_source_nodes) as run:
            selection = run.selected.selection
            if self._streaming:
                items = stream_selection(run.question, selection, self._reader, self._options)
                # The plan's event, read before anything is sent: the nodes the call sends.
                return run.respond(streaming_response(items, run.reading(next(items))))
            answer = answer_selection(run.question, selection, self._reader, self._options)
            return run.respond(run.response_to(answer))

    @dispatcher.span
    async def asynthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        """Async :meth:`synthesize`: awaits the LLM's ``achat``, never blocking the loop.

        An LLM without a native ``achat`` runs on a worker thread. Cancelling the task
        propagates ``asyncio.CancelledError``. With ``streaming=True`` it returns an
        ``AsyncStreamingResponse`` once planned, as LlamaIndex's own synthesizers do in async
        streaming; its generator awaits the LLM's ``astream_chat`` (an LLM without a native
        one streams on a worker thread).
        """
        with self._synthesis(query, nodes, additional_source_nodes) as run:
            selection = run.selected.selection
            if self._streaming:
                items = await astream_selection(
                    run.question, selection, self._reader, self._options
                )
                planned = await anext(items)
                return run.respond(async_streaming_response(items, run.reading(planned)))
            answer = await aanswer_selection(run.question, selection, self._reader, self._options)
            return run.respond(run.response_to(answer))

    @contextmanager
    def _synthesis(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None,
    ) -> Iterator[_Synthesis]:
        """The events around one answer, the same for :meth:`synthesize` and :meth:`asynthesize`.

        LlamaIndex's start event; its callback event with the question, in which the nodes are
        selected and the reader checked, and which :meth:`_Synthesis.respond` ends with the
        response it builds from the answer; then its end event. An error ends the callback
        event with it, and no end event follows.
        """
        dispatcher.event(SynthesizeStartEvent(query=query))
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        with self.callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str}
        ) as event:
            selected = select_nodes(nodes, self._keys, self._documents)
            self._reader.check()  # tools added after construction are refused before sending
            run = _Synthesis(
                bundle.query_str,
                selected,
                event,
                additional_source_nodes,
                self._number_sources,
            )
            yield run
        dispatcher.event(SynthesizeEndEvent(query=bundle, response=run.response))


@dataclass
class _Synthesis:
    """One answer under way: its question and selected nodes, then the response it gave."""

    question: str
    selected: NodeSelection
    event: EventContext
    additional_source_nodes: Sequence[NodeWithScore] | None
    number_sources: bool
    response: RESPONSE_TYPE = field(init=False)

    def respond(self, response: RESPONSE_TYPE) -> RESPONSE_TYPE:
        """Return ``response``; it ends the callback event, and is kept for the end one."""
        self.response = response
        self.event.on_end(payload={EventPayload.RESPONSE: self.response})
        return self.response

    def response_to(self, answer: EvidenceAnswer) -> EvidenceResponse:
        """The non-streaming response to ``answer``."""
        text, metadata = self.final(answer)
        source_nodes = self.selected.sent(answer.used_source_ids)
        return EvidenceResponse(response=text, source_nodes=source_nodes, metadata=metadata)

    def reading(self, planned: StreamEvent | EvidenceAnswer) -> StreamedText:
        """What a streaming response reads the core's stream with, its plan read."""
        metadata: dict[str, Any] = {}
        if self.additional_source_nodes:
            metadata["additional_source_nodes"] = list(self.additional_source_nodes)
        reading = StreamedText(
            self.selected, self.final, number_sources=self.number_sources, metadata=metadata
        )
        reading.read(planned)
        return reading

    def final(self, answer: EvidenceAnswer) -> tuple[str, dict[str, Any]]:
        """The response's text and metadata for ``answer``, streamed or not."""
        metadata = answer_metadata(answer)
        if self.additional_source_nodes:
            metadata["additional_source_nodes"] = list(self.additional_source_nodes)
        text = answer.answer if answer.status == "answered" else None
        if self.number_sources:
            source_nodes = self.selected.sent(answer.used_source_ids)
            text, entries, node_ids = numbered(answer, text, source_nodes)
            metadata[_SOURCE_NUMBERS_KEY] = entries
            metadata[_SOURCE_NUMBER_NODE_IDS_KEY] = node_ids
        if text is None:
            # An agent reads a QueryEngineTool's output as str(response), which LlamaIndex
            # makes "None" of a missing text: a non-answer says what happened, in LangChain's
            # words.
            text = outcome_text(answer)
        return text, metadata


_TEXT_CHUNKS_REFUSAL = (
    "EvidenceSynthesizer answers from nodes, not bare text chunks, so that every citation "
    "names the node it quotes; call synthesize(query, nodes) or asynthesize(query, nodes)"
)
