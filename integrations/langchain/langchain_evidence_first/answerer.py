"""`EvidenceAnswerer`: a Runnable that answers only from retrieved documents, citations verified."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableParallel,
    RunnablePassthrough,
    RunnableSerializable,
)
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict, Field, PrivateAttr

from evidence_first import EvidenceAnswer, InvalidRequestError, local
from evidence_first.adapters import (
    AnswerOptions,
    SourceSelection,
    aanswer_selection,
    answer_selection,
    select_sources,
)
from langchain_evidence_first._chat_model import StrictChatModel, strict_chat_model
from langchain_evidence_first._documents import DocumentKeys, to_evidence

__all__ = ["EvidenceAnswerer"]


class EvidenceAnswerer(RunnableSerializable[dict[str, Any], EvidenceAnswer]):
    """Answer a question only from the given sources, calling the chat model once.

    Input: ``{"question": str, "sources": list[Document | Evidence | dict | str]}``.
    Output: an :class:`~evidence_first.EvidenceAnswer` whose every citation names a source that
    was sent and quotes it exactly. Documents whose ID repeats an earlier one are dropped as
    ``duplicate_id``; past 64 documents, the rest are ``over_source_limit``.

    Example:
        .. code-block:: python

            chain = {"question": RunnablePassthrough(), "sources": retriever} | EvidenceAnswerer(
                llm=ChatOpenAI(model="gpt-4.1-mini")
            )
            answer = chain.invoke("When is the launch?")

    The chat model is called with a system and a human message, no tools and no retries; its
    output limit, timeout and native JSON mode are set for known providers. Without ``llm``,
    the embedded local model is used (``pip install "langchain-evidence-first[local]"``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any = Field(default=None, exclude=True)
    """The chat model (``BaseChatModel``). ``None`` uses the embedded local model."""

    knowledge: Literal["evidence-only", "allow-general-inference"] = "evidence-only"
    citation_mode: Literal["quote", "passage"] = "quote"
    """``"quote"``: the model copies exact quotes. ``"passage"``: it cites labeled passages."""
    output_language: str | None = None
    question_time: int | datetime | None = None
    max_context_tokens: int = 2048
    max_output_tokens: int = 2048
    max_response_chars: int = 32768
    timeout: float = 60.0
    min_evidence: int = 1
    min_score: float | None = None
    """Omit documents whose score is lower or missing (``below_min_score``)."""
    scope: Collection[str] | None = None
    """Omit documents whose ``metadata[scope_key]`` is not in it (``out_of_scope``).
    Defence in depth, not authorization: retrieve only what the user may see."""
    scope_key: str = "scope"
    token_counter: Callable[[str], int] | None = Field(default=None, exclude=True)

    id_key: str | None = "id"
    """Metadata key for the source ID when ``Document.id`` is unset."""
    speaker_key: str | None = "speaker"
    observed_at_key: str | None = "observed_at"
    status_key: str | None = "status"
    score_key: str | None = "score"
    """Metadata key of the retrieval score (higher is better)."""

    _options: AnswerOptions = PrivateAttr()
    _strict: StrictChatModel | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Checked once, here rather than in a validator so the errors keep their type: a bad
        # option or a retrying model fails before any call.
        self._options = AnswerOptions.create(
            knowledge=self.knowledge,
            citation_mode=self.citation_mode,
            output_language=self.output_language,
            question_time=self.question_time,
            max_context_tokens=self.max_context_tokens,
            max_output_tokens=self.max_output_tokens,
            max_response_chars=self.max_response_chars,
            timeout=self.timeout,
            min_evidence=self.min_evidence,
            min_score=self.min_score,
            scope=self.scope,
            scope_key=self.scope_key,
            token_counter=self.token_counter,
        )
        if self.llm is not None:
            self._strict = strict_chat_model(
                self.llm, timeout=self.timeout, max_tokens=self.max_output_tokens
            )
            # The chat model's own, smaller output limit is the one sent; the schema's bounds
            # follow it.
            self._options = dataclasses.replace(
                self._options, max_output_tokens=self._strict.max_tokens
            )
        elif not local.is_installed():
            msg = (
                "EvidenceAnswerer() without llm= uses the embedded local model, which is not "
                'installed: pip install "langchain-evidence-first[local]". Or pass a chat '
                "model: EvidenceAnswerer(llm=ChatOpenAI(model=...))"
            )
            raise ImportError(msg)

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """The answerer holds a live model; it is not serialized."""
        return False

    @classmethod
    def from_retriever(
        cls,
        retriever: BaseRetriever | Runnable[str, Sequence[Any]],
        *,
        llm: BaseChatModel | Runnable[Any, Any] | None = None,
        **options: Any,
    ) -> Runnable[str, EvidenceAnswer]:
        """Build ``question -> EvidenceAnswer``: retrieve, then answer from what was retrieved."""
        answerer = cls(llm=llm, **options)
        retrieve = RunnableParallel(question=RunnablePassthrough(), sources=retriever)
        return (retrieve | answerer).with_config(run_name="EvidenceAnswerer.from_retriever")

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> EvidenceAnswer:
        """Answer one ``{"question", "sources"}`` input."""
        return self._call_with_config(self._answer, input, config, **kwargs)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> EvidenceAnswer:
        """Answer one input without blocking the event loop."""
        return await self._acall_with_config(self._aanswer, input, config, **kwargs)

    def _answer(
        self, input: dict[str, Any], run_manager: Any, config: RunnableConfig
    ) -> EvidenceAnswer:
        question, selection = self._read_input(input)
        model = self._reader(patch_config(config, callbacks=run_manager.get_child()))
        return answer_selection(question, selection, model, self._options)

    async def _aanswer(
        self, input: dict[str, Any], run_manager: Any, config: RunnableConfig
    ) -> EvidenceAnswer:
        question, selection = self._read_input(input)
        model = self._reader(patch_config(config, callbacks=run_manager.get_child()))
        return await aanswer_selection(question, selection, model, self._options)

    def _reader(self, config: RunnableConfig) -> Any:
        if self._strict is not None:
            return self._strict.reader(config)
        return local.shared_local_model()

    def _read_input(self, input: object) -> tuple[str, SourceSelection]:
        if not isinstance(input, Mapping):
            msg = 'input must be a mapping {"question": str, "sources": [...]}'
            raise InvalidRequestError(msg, field="input")
        question = input.get("question")
        if not isinstance(question, str):
            msg = 'input["question"] must be a string'
            raise InvalidRequestError(msg, field="question")
        sources = input.get("sources", ())
        if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Sequence):
            msg = 'input["sources"] must be a list of Documents, Evidence, mappings or strings'
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
