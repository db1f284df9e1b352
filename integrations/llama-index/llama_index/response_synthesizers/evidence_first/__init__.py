"""evidence-first for LlamaIndex: a response synthesizer and query engine with verified citations.

``EvidenceSynthesizer`` plugs into any query engine that takes a response synthesizer;
``EvidenceQueryEngine.from_args(retriever, llm=...)`` builds a retrieve-then-answer engine.
"""

from types import FunctionType

from llama_index.response_synthesizers.evidence_first._streaming import StreamingNotEnabledError
from llama_index.response_synthesizers.evidence_first._strict_call import (
    UnenforcedSettingsWarning,
    profile_for,
)
from llama_index.response_synthesizers.evidence_first.query_engine import EvidenceQueryEngine
from llama_index.response_synthesizers.evidence_first.synthesizer import EvidenceSynthesizer

__all__ = [
    "EvidenceQueryEngine",
    "EvidenceSynthesizer",
    "StreamingNotEnabledError",
    "UnenforcedSettingsWarning",
    "profile_for",
]

# Objects defined in private modules name this one, as httpx's do: reprs, tracebacks, pickles and
# the API reference show where they are imported from. The core's warning names
# ``evidence_first.adapters``.
for _name in __all__:
    _object = globals()[_name]
    if isinstance(_object, type | FunctionType) and "._" in f".{_object.__module__}":
        _object.__module__ = __name__
del _name, _object
