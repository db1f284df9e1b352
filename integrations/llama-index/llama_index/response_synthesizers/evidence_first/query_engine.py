"""`EvidenceQueryEngine`: retrieve, then answer with verified citations through one LLM call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import BaseNode
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore
from typing_extensions import Unpack

from evidence_first import InvalidRequestError, ModelProfile
from evidence_first.adapters import OptionArgs
from llama_index.response_synthesizers.evidence_first.synthesizer import EvidenceSynthesizer

__all__ = ["EvidenceQueryEngine"]


class _SynthesizerArgs(OptionArgs, total=False):
    """The keyword arguments of `EvidenceSynthesizer` that ``from_args`` passes on as given."""

    speaker_key: str
    observed_at_key: str
    status_key: str
    documents: Iterable[BaseNode] | Mapping[str, str] | None
    docstore: BaseDocumentStore | None
    number_sources: bool
    profile: ModelProfile | str | None


class EvidenceQueryEngine(RetrieverQueryEngine):
    """A `RetrieverQueryEngine` whose synthesizer is always an `EvidenceSynthesizer`.

    ::

        engine = EvidenceQueryEngine.from_args(retriever, llm=llm, min_score=0.2)
        response = engine.query("When is the launch?")
        answer = response.metadata["evidence_answer"]   # status, facts, verified citations

    Retrieval, node postprocessors, callbacks and instrumentation are
    ``RetrieverQueryEngine``'s; only the synthesizer, and ``from_args`` that builds it, differ.

    Args:
        retriever: Any LlamaIndex retriever; its nodes are sources, best first.
        response_synthesizer: The synthesizer that answers.
        node_postprocessors: Applied to the retrieved nodes, in order, before answering.
        callback_manager: LlamaIndex callbacks; default the synthesizer's.

    Raises:
        InvalidRequestError: ``response_synthesizer`` is not an `EvidenceSynthesizer`.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        response_synthesizer: EvidenceSynthesizer,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if not isinstance(response_synthesizer, EvidenceSynthesizer):
            # Anything else would answer without verified citations, under this engine's name.
            msg = (
                "response_synthesizer must be an EvidenceSynthesizer, got "
                f"{type(response_synthesizer).__name__}; use RetrieverQueryEngine for others"
            )
            raise InvalidRequestError(msg, field="response_synthesizer")
        # Kept under this class's own names: the base's attributes are private to it.
        self._synthesizer = response_synthesizer
        self._postprocessors = list(node_postprocessors or [])
        super().__init__(
            retriever,
            response_synthesizer=response_synthesizer,
            node_postprocessors=self._postprocessors,
            callback_manager=callback_manager,
        )

    # The base from_args takes the options of LlamaIndex's own synthesizers (response_mode,
    # templates...), which do not apply here; its options are EvidenceSynthesizer's, and
    # streaming, like the base's, builds a streaming synthesizer. The override is incompatible
    # by design, hence the ignore: the base takes response_synthesizer and those options
    # positionally and any keyword (**kwargs: Any), where this one takes only the synthesizer's.
    @classmethod
    def from_args(  # type: ignore[override]
        cls,
        retriever: BaseRetriever,
        llm: LLM | None = None,
        *,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        callback_manager: CallbackManager | None = None,
        streaming: bool = False,
        **options: Unpack[_SynthesizerArgs],
    ) -> EvidenceQueryEngine:
        """Build the engine and its `EvidenceSynthesizer` in one call.

        Args:
            retriever: Any LlamaIndex retriever.
            llm: The LlamaIndex LLM; ``None`` means ``Settings.llm``.
            node_postprocessors: Applied to the retrieved nodes before answering.
            callback_manager: LlamaIndex callbacks; default ``Settings.callback_manager``.
            streaming: Build the synthesizer with ``streaming=True``: ``query`` returns a
                ``StreamingResponse`` (``aquery``, an ``AsyncStreamingResponse``) once the
                answer is planned, whose generator yields the verified answer as it arrives.
            **options: The answering options of :class:`EvidenceSynthesizer` (``knowledge``,
                ``max_context_tokens``, ``timeout``, ``min_score``, ``scope``,
                ``speaker_key``...), checked now.

        Raises:
            InvalidRequestError: An option is out of range, or the LLM is refused.
            TypeError: An option is unknown.
        """
        callback_manager = callback_manager or Settings.callback_manager
        synthesizer = EvidenceSynthesizer(
            llm=llm, callback_manager=callback_manager, streaming=streaming, **options
        )
        return cls(
            retriever,
            synthesizer,
            node_postprocessors=node_postprocessors,
            callback_manager=callback_manager,
        )

    def with_retriever(self, retriever: BaseRetriever) -> EvidenceQueryEngine:
        """The same engine over another retriever (the base would return a plain one)."""
        return type(self)(
            retriever,
            self.response_synthesizer,
            node_postprocessors=self._postprocessors,
            callback_manager=self.callback_manager,
        )

    @property
    def response_synthesizer(self) -> EvidenceSynthesizer:
        """The synthesizer that answers."""
        return self._synthesizer
