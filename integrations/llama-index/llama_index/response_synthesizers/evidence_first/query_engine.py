"""`EvidenceQueryEngine`: retrieve, then answer with verified citations through one LLM call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from llama_index.response_synthesizers.evidence_first.synthesizer import EvidenceSynthesizer

__all__ = ["EvidenceQueryEngine"]

# Spans and events nest under LlamaIndex's root dispatcher, as the core synthesizers' do.
# (llama-index-core re-exports get_dispatcher without declaring it, hence the type ignore.)
dispatcher = get_dispatcher(__name__)


class EvidenceQueryEngine(BaseQueryEngine):
    """Retrieves nodes, optionally post-processes them, and answers with `EvidenceSynthesizer`.

    ::

        engine = EvidenceQueryEngine.from_args(retriever, llm=llm, min_score=0.2)
        response = engine.query("When is the launch?")
        answer = response.metadata["evidence_answer"]   # status, facts, verified citations

    Args:
        retriever: Any LlamaIndex retriever; its nodes are sources, best first.
        response_synthesizer: The synthesizer that answers.
        node_postprocessors: Applied to the retrieved nodes, in order, before answering.
        callback_manager: LlamaIndex callbacks; default the synthesizer's.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        response_synthesizer: EvidenceSynthesizer,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        self._retriever = retriever
        self._response_synthesizer = response_synthesizer
        self._node_postprocessors = list(node_postprocessors or [])
        callback_manager = callback_manager or response_synthesizer.callback_manager
        for postprocessor in self._node_postprocessors:
            postprocessor.callback_manager = callback_manager
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_args(
        cls,
        retriever: BaseRetriever,
        llm: LLM | None = None,
        *,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        callback_manager: CallbackManager | None = None,
        **options: Any,
    ) -> EvidenceQueryEngine:
        """Build the engine and its `EvidenceSynthesizer` in one call.

        Args:
            retriever: Any LlamaIndex retriever.
            llm: The LlamaIndex LLM; ``None`` means ``Settings.llm``.
            node_postprocessors: Applied to the retrieved nodes before answering.
            callback_manager: LlamaIndex callbacks; default ``Settings.callback_manager``.
            **options: The answering options of :class:`EvidenceSynthesizer` (``knowledge``,
                ``max_context_tokens``, ``timeout``, ``min_score``, ``scope``,
                ``speaker_key``...), checked now.

        Raises:
            InvalidRequestError: An option is out of range, or the LLM is refused.
            TypeError: An option is unknown.
        """
        callback_manager = callback_manager or Settings.callback_manager
        synthesizer = EvidenceSynthesizer(llm=llm, callback_manager=callback_manager, **options)
        return cls(
            retriever,
            synthesizer,
            node_postprocessors=node_postprocessors,
            callback_manager=callback_manager,
        )

    @property
    def retriever(self) -> BaseRetriever:
        """The retriever whose nodes are the sources."""
        return self._retriever

    @property
    def response_synthesizer(self) -> EvidenceSynthesizer:
        """The synthesizer that answers."""
        return self._response_synthesizer

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"response_synthesizer": self._response_synthesizer}

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieve nodes for ``query_bundle`` and apply the node postprocessors."""
        nodes = self._retriever.retrieve(query_bundle)
        for postprocessor in self._node_postprocessors:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle=query_bundle)
        return nodes

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Async :meth:`retrieve`."""
        nodes = await self._retriever.aretrieve(query_bundle)
        for postprocessor in self._node_postprocessors:
            nodes = await postprocessor.apostprocess_nodes(nodes, query_bundle=query_bundle)
        return nodes

    def synthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        """Answer from nodes retrieved elsewhere (see :meth:`EvidenceSynthesizer.synthesize`)."""
        return self._response_synthesizer.synthesize(
            query=query_bundle, nodes=nodes, additional_source_nodes=additional_source_nodes
        )

    async def asynthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        """Async :meth:`synthesize`."""
        return await self._response_synthesizer.asynthesize(
            query=query_bundle, nodes=nodes, additional_source_nodes=additional_source_nodes
        )

    @dispatcher.span
    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as query_event:
            nodes = self.retrieve(query_bundle)
            response = self._response_synthesizer.synthesize(query=query_bundle, nodes=nodes)
            query_event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    @dispatcher.span
    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as query_event:
            nodes = await self.aretrieve(query_bundle)
            response = await self._response_synthesizer.asynthesize(query=query_bundle, nodes=nodes)
            query_event.on_end(payload={EventPayload.RESPONSE: response})
        return response
