"""`EvidenceAnswerer`: a Runnable that answers only from retrieved documents, citations verified."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal, cast, overload
from uuid import UUID

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableParallel,
    RunnablePassthrough,
    RunnableSerializable,
)
from langchain_core.runnables.config import ensure_config, patch_config
from langchain_core.runnables.configurable import RunnableConfigurableFields
from langchain_core.runnables.utils import (
    AnyConfigurableField,
    ConfigurableField,
    ConfigurableFieldSingleOption,
    ConfigurableFieldSpec,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.utils import LC_ID_PREFIX
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from evidence_first import (
    AnswerTextEvent,
    EvidenceAnswer,
    InvalidRequestError,
    ModelProfile,
    StreamEvent,
    local,
)
from evidence_first.adapters import (
    AnswerOptionFields,
    AnswerOptions,
    SourceSelection,
    aanswer_selection,
    answer_selection,
    astream_selection,
    option_error,
    select_sources,
    stream_selection,
)
from langchain_evidence_first._chat_model import StrictChatModel, strict_chat_model
from langchain_evidence_first._documents import DocumentKeys, to_evidence
from langchain_evidence_first._message import MessageChunks, answer_message
from langchain_evidence_first._tools import AnswererInput, QuestionInput, answer_tool, tool_schema

__all__ = ["EVENT_PREFIX", "EvidenceAnswerer"]

EVENT_PREFIX = "evidence_first."
"""A stream's events reach the callbacks as custom events named ``evidence_first.<kind>``:
``evidence_first.sources``, ``.decision``, ``.fact`` and ``.answer_text``."""

_Item = StreamEvent | EvidenceAnswer  # what the core's stream yields
_SOURCE_KEYS = ("sources", "context")
_LIST_OF_SOURCES = "a list of Documents, Evidence, mappings or strings"


class EvidenceAnswerer(
    AnswerOptionFields, RunnableSerializable[dict[str, Any], EvidenceAnswer | AIMessage]
):
    """Answer a question only from the given sources, calling the chat model once.

    Input: ``{"question": str, "sources": list[Document | Evidence | dict | str]}``; the
    sources may come under ``"context"`` instead, as LangChain's RAG chains name them (both
    keys at once is an error; neither means no sources, an abstention without a model call).
    Documents whose ID repeats an earlier one are dropped as ``duplicate_id``; past 64
    documents, the rest are ``over_source_limit``.

    The input schema names ``question`` and ``sources``, so :meth:`as_tool` gives a tool an
    agent fills; the strict call's run is tagged ``nostream`` and ``evidence_first.ledger``, so
    LangGraph's messages mode shows the verified output only, never the model's raw ledger.

    Output, as ``output`` chooses: an :class:`~evidence_first.EvidenceAnswer` whose every
    citation names a source that was sent and quotes it exactly (``"answer"``, the default),
    or an ``AIMessage`` holding it, with the call's ``usage_metadata``, for chains that go on
    with a parser or a chat UI (``"message"``). Every Runnable entry point (invoke, ainvoke,
    batch, abatch) returns the chosen output, and ``OutputType`` and ``output_schema`` name
    it; :meth:`stream` and :meth:`astream` yield the final answer, or the message's chunks,
    its verified text as it arrives, and pass each event on as a custom event.

    Example:
        .. code-block:: python

            chain = {"question": RunnablePassthrough(), "sources": retriever} | EvidenceAnswerer(
                llm=ChatOpenAI(model="gpt-4.1-mini")
            )
            answer = chain.invoke("When is the launch?")

            rag = (
                {"context": retriever, "question": RunnablePassthrough()}
                | EvidenceAnswerer(llm=llm, output="message")
                | StrOutputParser()
            )
            text = rag.invoke("When is the launch?")

    The chat model is called with a system and a human message, no tools and no retries; its
    output limit, timeout and native JSON mode are set for known providers. A known
    provider's own, smaller output limit (``max_tokens``; ``num_predict`` for Ollama) is kept:
    the smaller of it and ``max_output_tokens`` is sent. Without ``llm``, the embedded local
    model is used (``pip install "langchain-evidence-first[local]"``).

    The answering options (``knowledge``, ``max_context_tokens``, ``timeout``...) are the
    fields of :class:`~evidence_first.adapters.AnswerOptionFields`, with the same defaults,
    ranges and checks. The answerer is frozen; :meth:`model_copy` checks its update like
    construction does. An option left unset stays unset in every answerer built from this
    one (:meth:`model_copy`, :meth:`configurable_fields`, ``configurable_alternatives``,
    ``with_config``), so the model's own defaults still apply.

    Raises:
        InvalidRequestError: An option is out of range, or the chat model is refused.
        TypeError: An option name is unknown.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="forbid")

    llm: Any = Field(default=None, exclude=True)
    """The chat model (``BaseChatModel``), or a runnable around one (``bind``,
    ``with_config``, ``configurable_fields``, ``configurable_alternatives``), resolved under
    each call's config and made strict as it resolves. ``None`` uses the embedded local
    model."""

    profile: ModelProfile | str | None = Field(default=None, exclude=True)
    """What the chat model accepts, when the rule table cannot tell from its provider and
    name (an Azure deployment's name says nothing of its model): a
    :class:`~evidence_first.ModelProfile`, or the name of a model the rules know, such as
    ``"gpt-5"``. ``None``: found by the rules (:func:`~langchain_evidence_first.profile_for`).
    The answerer's own options still win over the profile's answering defaults."""

    id_key: str | None = "id"
    """Metadata key for the source ID when ``Document.id`` is unset."""
    speaker_key: str | None = "speaker"
    observed_at_key: str | None = "observed_at"
    status_key: str | None = "status"
    score_key: str | None = "score"
    """Metadata key of the retrieval score (higher is better)."""

    output: Literal["answer", "message"] = "answer"
    """What the answerer returns: ``"answer"``, the :class:`~evidence_first.EvidenceAnswer`;
    or ``"message"``, an ``AIMessage`` for a chain that continues (``| StrOutputParser()``).

    The message's ``response_metadata`` holds the keys of
    ``evidence_first.adapters.answer_metadata(answer)`` (``evidence_status`` and the rest
    listed there), the keys LlamaIndex's ``Response.metadata`` has too, as JSON values only:
    ``evidence_answer`` is the answer's ``as_dict()``, which
    :func:`~langchain_evidence_first.answer_of` rebuilds, checked on load. So the message
    survives ``dumps``/``loads`` and LangGraph checkpoints. Its content is a list of standard
    content blocks:

    - ``answered``: the blocks of :func:`~langchain_evidence_first.to_content_blocks`, one
      text block holding the answer with a ``Citation`` annotation per verified citation (an
      ``inference`` stays in the ``EvidenceAnswer`` only, apart from the verified text);
    - otherwise one text block stating the outcome, never empty and never a source's text:
      ``No answer (insufficient_evidence). Missing evidence: <missing_evidence, joined
      by "; ">.``; ``No answer (insufficient_evidence). The model was not called:
      <diagnostic>.`` when too few sources could be sent; ``No answer (invalid_response).
      The model's output was rejected: <reason codes, joined by ", ">.``

    ``message.text`` (what ``StrOutputParser`` returns) is therefore the verified answer or
    that sentence; check ``response_metadata["evidence_status"]`` to tell them apart.
    """

    _options: AnswerOptions = PrivateAttr()
    _strict: StrictChatModel | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        # Checked once, with the options' own typed errors: a bad option or a retrying model
        # fails before any call.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise option_error(exc) from None
        options = AnswerOptions(**self.option_values())
        if self.llm is not None:
            self._strict = strict_chat_model(
                self.llm,
                timeout=self.timeout,
                max_tokens=self.max_output_tokens,
                profile=self.profile,
            )
            # The chat model's own, smaller output limit is the one sent; the schema's bounds
            # follow it.
            options = options.model_copy(update={"max_output_tokens": self._strict.max_tokens})
        elif not local.is_installed():
            msg = (
                "EvidenceAnswerer() without llm= uses the embedded local model, which is not "
                'installed: pip install "langchain-evidence-first[local]". Or pass a chat '
                "model: EvidenceAnswerer(llm=ChatOpenAI(model=...))"
            )
            raise ImportError(msg)
        self._options = options

    @field_validator("output", mode="before")
    @classmethod
    def _output_choice(cls, value: object) -> object:
        if value not in ("answer", "message"):
            msg = "output must be one of answer, message"
            raise InvalidRequestError(msg, field="output")
        return value

    @property
    def OutputType(self) -> type[EvidenceAnswer | AIMessage]:
        """``EvidenceAnswer``, or ``AIMessage`` with ``output="message"``."""
        return AIMessage if self.output == "message" else EvidenceAnswer

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> EvidenceAnswerer:
        """A new answerer with ``update`` applied, checked (and the model prepared) anew.

        Only the fields that were set are set again: an option left unset stays unset, so the
        model's own defaults (the embedded reader's confidence floor) still apply to the copy.
        Every rebuild goes through here, :meth:`configurable_fields`' included.
        """
        fields = {name: getattr(self, name) for name in self.model_fields_set}
        return type(self)(**{**fields, **(update or {})})

    def configurable_fields(
        self, **kwargs: AnyConfigurableField
    ) -> RunnableSerializable[dict[str, Any], EvidenceAnswer | AIMessage]:
        """LangChain's ``configurable_fields``: the configured answerer is a :meth:`model_copy`.

        Only the fields a config names are set on the copy, so an option the caller left
        unset stays the model's own, as it does through ``configurable_alternatives`` and
        ``with_config``, which rebuild nothing.

        Raises:
            ValueError: A key is not a field of the answerer.
        """
        super().configurable_fields(**kwargs)  # LangChain's check of the names
        return _ConfigurableAnswerer(default=self, fields=kwargs)

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The configurable keys of ``llm`` (``configurable_alternatives``, ``_fields``).

        A chain that holds the answerer lists them in its ``config_schema()``, as it lists
        those of a chat model it holds itself.
        """
        return list(self.llm.config_specs) if isinstance(self.llm, Runnable) else []

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """``{"question": str, "sources": list[Document | dict | Evidence | str]}``.

        ``"context"`` is read as ``"sources"`` (both at once are refused), so the schema's
        JSON, and a tool's arguments built from it, name ``question`` and ``sources``.
        """
        return AnswererInput

    def as_tool(
        self,
        args_schema: type[BaseModel] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        arg_types: dict[str, type] | None = None,
    ) -> BaseTool:
        """The answerer as a tool an agent calls with a question and the sources.

        Its arguments are the input schema's (``question``, ``sources``), or ``args_schema``
        or ``arg_types`` as in LangChain's ``as_tool``, passed as the input mapping. Its
        content is the verified answer, or the sentence stating the outcome of a non-answer
        (the text of an ``output="message"`` message, whichever ``output`` is set); its
        artifact is that message's ``response_metadata``, so
        :func:`~langchain_evidence_first.answer_of` rebuilds the answer from the
        ``ToolMessage``.
        """
        return answer_tool(
            self,
            tool_schema(AnswererInput, args_schema, arg_types, self.get_name()),
            name=name or self.get_name(),
            description=description or _TOOL_DESCRIPTION,
        )

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """The answerer holds a live model; it is not serialized."""
        return False

    @overload
    @classmethod
    def from_retriever(
        cls,
        retriever: BaseRetriever | Runnable[str, Sequence[Any]],
        *,
        llm: BaseChatModel | Runnable[Any, Any] | None = None,
        output: Literal["answer"] = "answer",
        **options: Any,
    ) -> Runnable[str, EvidenceAnswer]: ...

    @overload
    @classmethod
    def from_retriever(
        cls,
        retriever: BaseRetriever | Runnable[str, Sequence[Any]],
        *,
        llm: BaseChatModel | Runnable[Any, Any] | None = None,
        output: Literal["message"],
        **options: Any,
    ) -> Runnable[str, AIMessage]: ...

    @classmethod
    def from_retriever(
        cls,
        retriever: BaseRetriever | Runnable[str, Sequence[Any]],
        *,
        llm: BaseChatModel | Runnable[Any, Any] | None = None,
        output: Literal["answer", "message"] = "answer",
        **options: Any,
    ) -> Runnable[str, EvidenceAnswer | AIMessage]:
        """Build ``question -> EvidenceAnswer`` (or ``AIMessage``, as ``output`` chooses).

        It retrieves, then answers from what was retrieved. Its input is the question, a
        ``str``; its ``as_tool()`` is a tool with one argument, ``question``.
        """
        answerer = cls(llm=llm, output=output, **options)
        retrieve = RunnableParallel(question=RunnablePassthrough(), sources=retriever)
        return _RetrievingAnswerer(
            bound=retrieve | answerer,
            config=RunnableConfig(run_name="EvidenceAnswerer.from_retriever"),
            custom_input_type=str,
        )

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> EvidenceAnswer | AIMessage:
        """Answer one ``{"question", "sources" or "context"}`` input."""
        return self._call_with_config(self._answer, input, config, **kwargs)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> EvidenceAnswer | AIMessage:
        """Answer one input without blocking the event loop."""
        return await self._acall_with_config(self._aanswer, input, config, **kwargs)

    def stream(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[EvidenceAnswer | AIMessage]:
        """Answer one input, streamed: the verified text as it comes (``output="message"``).

        ``output="message"``: ``AIMessageChunk`` chunks, each a piece of one indexed text block of
        verified answer text, the last (``chunk_position="last"``) with the block's
        ``annotations``, the ``response_metadata`` and the ``usage_metadata``; added up, the
        message :meth:`invoke` returns for the same reply, unless text was shown before a late
        failure (then the last chunk adds a blank line and the outcome sentence).
        ``output="answer"``: the one final :class:`~evidence_first.EvidenceAnswer`.

        Either way, each event of the stream (the sources sent, the reader's decision, each fact
        as it verifies, the answer's text) reaches the callbacks as it happens, as a custom
        event named ``evidence_first.<kind>`` whose data is the event's JSON form, so
        ``astream_events`` shows it. The chat model is called once, streamed, its run tagged
        ``nostream`` as :meth:`invoke`'s is; closing the iterator closes the call.

        Raises:
            InvalidRequestError: The input or a source breaks the contract (nothing was sent).
            ModelCallError: The chat model failed.
            AnswerTimeoutError: The reply did not end within ``timeout``.
        """
        yield from self.transform(iter([input]), config, **kwargs)

    def transform(
        self,
        input: Iterator[dict[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[EvidenceAnswer | AIMessage]:
        """:meth:`stream` on an input that arrives in parts (a chain's), added up first."""
        yield from self._transform_stream_with_config(input, self._streamed, config, **kwargs)

    async def astream(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[EvidenceAnswer | AIMessage]:
        """Async :meth:`stream`; cancelling the task, or closing the iterator, ends the call."""

        async def single() -> AsyncIterator[dict[str, Any]]:
            yield input

        async with aclosing(self.atransform(single(), config, **kwargs)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def atransform(
        self,
        input: AsyncIterator[dict[str, Any]],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[EvidenceAnswer | AIMessage, None]:
        """Async :meth:`transform`."""
        chunks = self._atransform_stream_with_config(input, self._astreamed, config, **kwargs)
        async with aclosing(cast("AsyncGenerator[EvidenceAnswer | AIMessage, None]", chunks)):
            async for chunk in chunks:
                yield chunk

    def _streamed(
        self,
        inputs: Iterator[dict[str, Any]],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Iterator[EvidenceAnswer | AIMessage]:
        question, selection = self._read_input(_added_up(inputs))
        model, options = self._reader(config)
        items = cast(
            "Generator[_Item, None, None]", stream_selection(question, selection, model, options)
        )
        output = _StreamOutput(self.output, run_manager.run_id)
        try:
            for item in items:
                if not isinstance(item, EvidenceAnswer):
                    dispatch_custom_event(*_custom_event(item), config=config)
                yield from output.of(item)
        finally:
            items.close()

    async def _astreamed(
        self,
        inputs: AsyncIterator[dict[str, Any]],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[EvidenceAnswer | AIMessage]:
        whole = None
        async for part in inputs:
            whole = part if whole is None else _added(whole, part)
        question, selection = self._read_input(whole)
        model, options = self._reader(config)
        items = cast(
            "AsyncGenerator[_Item, None]",
            await astream_selection(question, selection, model, options),
        )
        output = _StreamOutput(self.output, run_manager.run_id)
        async with aclosing(items):
            async for item in items:
                if not isinstance(item, EvidenceAnswer):
                    await adispatch_custom_event(*_custom_event(item), config=config)
                for chunk in output.of(item):
                    yield chunk

    def _answer(
        self, input: dict[str, Any], run_manager: Any, config: RunnableConfig
    ) -> EvidenceAnswer | AIMessage:
        question, selection = self._read_input(input)
        model, options = self._reader(patch_config(config, callbacks=run_manager.get_child()))
        return self._output(answer_selection(question, selection, model, options))

    async def _aanswer(
        self, input: dict[str, Any], run_manager: Any, config: RunnableConfig
    ) -> EvidenceAnswer | AIMessage:
        question, selection = self._read_input(input)
        model, options = self._reader(patch_config(config, callbacks=run_manager.get_child()))
        answer = await aanswer_selection(question, selection, model, options)
        return self._output(answer)

    def _output(self, answer: EvidenceAnswer) -> EvidenceAnswer | AIMessage:
        return answer_message(answer) if self.output == "message" else answer

    def _reader(self, config: RunnableConfig) -> tuple[Any, AnswerOptions]:
        """The reader of this call, and the options it is answered under.

        A configurable ``llm`` is resolved under the call's config; a chat model other than
        the one prepared at construction has its own output limit, which the schema follows.
        """
        if self._strict is None:
            return local.shared_local_model(), self._options
        strict = self._strict.for_call(config)
        options = self._options
        if strict is not self._strict:
            options = options.model_copy(update={"max_output_tokens": strict.max_tokens})
        return strict.reader(config), options

    def _read_input(self, input: object) -> tuple[str, SourceSelection]:
        if not isinstance(input, Mapping):
            msg = 'input must be a mapping {"question": str, "sources" (or "context"): [...]}'
            raise InvalidRequestError(msg, field="input")
        question = input.get("question")
        if not isinstance(question, str):
            msg = 'input["question"] must be a string'
            raise InvalidRequestError(msg, field="question")
        given = [key for key in _SOURCE_KEYS if key in input]
        if len(given) > 1:
            msg = (
                'input has both "sources" and "context"; pass the sources under one key only '
                "(they are never merged, and neither is preferred)"
            )
            raise InvalidRequestError(msg, field="sources")
        key = given[0] if given else "sources"
        sources = input.get(key, ())
        if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Sequence):
            msg = f'input["{key}"] (the sources; "sources" or "context") must be {_LIST_OF_SOURCES}'
            if isinstance(sources, str):
                msg += ": pass the retrieved documents, not one text formatted from them"
            raise InvalidRequestError(msg, field="sources")
        keys = DocumentKeys(
            id_key=self.id_key,
            speaker_key=self.speaker_key,
            observed_at_key=self.observed_at_key,
            status_key=self.status_key,
            score_key=self.score_key,
        )
        evidence = [to_evidence(item, index, keys) for index, item in enumerate(sources)]
        return question, select_sources(evidence)


class _StreamOutput:
    """What a stream yields for each item of the core's: message chunks, or the answer alone."""

    def __init__(self, output: Literal["answer", "message"], run_id: UUID) -> None:
        # One ID for every chunk of the message, as chat models give theirs (lc_run-<run id>).
        self._chunks = MessageChunks(f"{LC_ID_PREFIX}-{run_id}") if output == "message" else None

    def of(self, item: StreamEvent | EvidenceAnswer) -> Iterator[EvidenceAnswer | AIMessage]:
        if self._chunks is None:
            if isinstance(item, EvidenceAnswer):
                yield item
        elif isinstance(item, EvidenceAnswer):
            yield self._chunks.last(item)
        elif isinstance(item, AnswerTextEvent) and item.text:
            yield self._chunks.text(item.text)


def _custom_event(event: StreamEvent) -> tuple[str, dict[str, Any]]:
    """The custom event a stream event reaches the callbacks as: its name and JSON data."""
    return EVENT_PREFIX + event.kind, event.model_dump(mode="json")


def _added(whole: Any, part: Any) -> Any:
    """Parts of a streamed input added up as langchain-core adds them (``Runnable.transform``).

    A chain's ``RunnableParallel`` streams its mapping key by key, as ``AddableDict`` parts.
    """
    try:
        return whole + part
    except TypeError:
        return part


def _added_up(parts: Iterator[Any]) -> Any:
    whole = None
    for part in parts:
        whole = part if whole is None else _added(whole, part)
    return whole


class _ConfigurableAnswerer(RunnableConfigurableFields[dict[str, Any], EvidenceAnswer | AIMessage]):
    """An answerer's configurable fields, applied with :meth:`EvidenceAnswerer.model_copy`.

    LangChain's own rebuilds the answerer with every field given, which turned each option left
    unset (the model's own) into an explicit default. The values are chosen as LangChain
    chooses them: a field when its ID is configured, an option always.
    """

    def _prepare(
        self, config: RunnableConfig | None = None
    ) -> tuple[Runnable[dict[str, Any], EvidenceAnswer | AIMessage], RunnableConfig]:
        config = ensure_config(config)
        given = config.get("configurable", {})
        update: dict[str, Any] = {}
        for name, spec in self.fields.items():
            if isinstance(spec, ConfigurableField):
                if spec.id in given:
                    update[name] = given[spec.id]
            elif isinstance(spec, ConfigurableFieldSingleOption):
                update[name] = spec.options[given.get(spec.id) or spec.default]
            else:
                update[name] = [spec.options[key] for key in given.get(spec.id, spec.default)]
        answerer = cast("EvidenceAnswerer", self.default)
        return (answerer.model_copy(update=update) if update else answerer), config


_TOOL_DESCRIPTION = (
    "Answers a question only from the sources passed with it, every citation checked against "
    "them. Returns the verified answer, or a sentence saying why there is none (and what "
    "evidence is missing)."
)
# A tool's name is a function's name to the providers: letters, digits, "_" and "-" only.
_RETRIEVER_TOOL_NAME = "EvidenceAnswerer_from_retriever"
_RETRIEVER_TOOL_DESCRIPTION = (
    "Answers a question only from the documents found for it, every citation checked against "
    "them. Returns the verified answer, or a sentence saying why there is none (and what "
    "evidence is missing)."
)


class _RetrievingAnswerer(RunnableBinding[str, Any]):
    """``question -> answer``: retrieve, then answer; as a tool, one ``question`` argument."""

    def as_tool(
        self,
        args_schema: type[BaseModel] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        arg_types: dict[str, type] | None = None,
    ) -> BaseTool:
        """A tool an agent calls with one argument, the question.

        ``args_schema`` or ``arg_types`` (of one field) name that argument otherwise; its
        content and artifact are as :meth:`EvidenceAnswerer.as_tool`'s.
        """
        return answer_tool(
            self,
            tool_schema(QuestionInput, args_schema, arg_types, _RETRIEVER_TOOL_NAME),
            name=name or _RETRIEVER_TOOL_NAME,
            description=description or _RETRIEVER_TOOL_DESCRIPTION,
        )
