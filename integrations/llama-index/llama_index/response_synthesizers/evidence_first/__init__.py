"""evidence-first for LlamaIndex: a response synthesizer and query engine with verified citations.

``EvidenceSynthesizer`` plugs into any query engine that takes a response synthesizer;
``EvidenceQueryEngine.from_args(retriever, llm=...)`` builds a retrieve-then-answer engine.
A streamed answer's decision and facts are instrumentation events (``EvidenceDecisionEvent``,
``EvidenceFactEvent``).
"""

from evidence_first.adapters import publish
from llama_index.response_synthesizers.evidence_first._events import (
    EvidenceDecisionEvent,
    EvidenceFactEvent,
)
from llama_index.response_synthesizers.evidence_first._streaming import StreamingNotEnabledError
from llama_index.response_synthesizers.evidence_first._strict_call import (
    UnenforcedSettingsWarning,
    profile_for,
)
from llama_index.response_synthesizers.evidence_first.query_engine import EvidenceQueryEngine
from llama_index.response_synthesizers.evidence_first.synthesizer import EvidenceSynthesizer

__all__ = [
    "EvidenceDecisionEvent",
    "EvidenceFactEvent",
    "EvidenceQueryEngine",
    "EvidenceSynthesizer",
    "StreamingNotEnabledError",
    "UnenforcedSettingsWarning",
    "profile_for",
]

# Objects defined in private modules name this one, as the core's do (adapters.publish).
publish(globals())
