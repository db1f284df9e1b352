"""LangChain integration for evidence-first: answer only from retrieved documents, verified.

``EvidenceAnswerer`` ends any retrieval chain; ``to_content_blocks`` renders its answer as
langchain-core standard content with Citation annotations, and ``answer_of`` rebuilds the
answer an ``output="message"`` message holds.
"""

from types import FunctionType

from langchain_evidence_first._chat_model import UnenforcedSettingsWarning, profile_for
from langchain_evidence_first._message import answer_of
from langchain_evidence_first.answerer import EvidenceAnswerer
from langchain_evidence_first.content_blocks import to_content_blocks

__all__ = [
    "EvidenceAnswerer",
    "UnenforcedSettingsWarning",
    "answer_of",
    "profile_for",
    "to_content_blocks",
]

# Objects defined in private modules name this one, as httpx's do: reprs, tracebacks, pickles and
# the API reference show where they are imported from. The core's warning names
# ``evidence_first.adapters``.
for _name in __all__:
    _object = globals()[_name]
    if isinstance(_object, type | FunctionType) and "._" in f".{_object.__module__}":
        _object.__module__ = __name__
del _name, _object
