"""LangChain integration for evidence-first: answer only from retrieved documents, verified.

``EvidenceAnswerer`` ends any retrieval chain; ``to_content_blocks`` renders its answer as
langchain-core standard content with Citation annotations, and ``answer_of`` rebuilds the
answer an ``output="message"`` message holds.
"""

from evidence_first.adapters import publish
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

# Objects defined in private modules name this one, as the core's do (adapters.publish).
publish(globals())
