"""evidence-first: answer a question only from the evidence you supply, with verified citations.

Every returned citation names a source that was sent to the model and quotes it exactly, at
known character offsets. When the evidence does not support an answer the result abstains;
when the model's output is malformed or unsupported it fails closed.
"""

# Imported for its effect too: the renderers give an answer its str() and its notebook view.
from evidence_first import render as render
from evidence_first._answer import (
    AnswerSegment,
    Citation,
    CitationCheck,
    DocumentSpan,
    EvidenceAnswer,
    EvidenceSpan,
    Fact,
    FactMarker,
    PromptBudget,
    TokenUsage,
    ValidationIssue,
)
from evidence_first._citing.modes import LEDGER_JSON_SCHEMA, PASSAGE_LEDGER_JSON_SCHEMA
from evidence_first._citing.passage import PASSAGE_PROMPT_VERSION
from evidence_first._citing.quote import PROMPT_VERSION
from evidence_first._engine import aanswer_from_evidence, answer_from_evidence
from evidence_first._errors import (
    AnswerCancelledError,
    AnswerTimeoutError,
    EvidenceFirstError,
    InvalidRequestError,
    ModelCallError,
)
from evidence_first._evidence import Evidence, EvidenceStatus
from evidence_first._model import (
    AsyncEvidenceReaderModel,
    EvidenceReaderModel,
    ModelRequest,
    ModelResponse,
    ReaderModel,
    TokenChoice,
    TokenLogprob,
)
from evidence_first._request import profile_for
from evidence_first._tokens import estimate_tokens
from evidence_first._transport.profiles import ModelProfile
from evidence_first._vocabulary import (
    AbstentionReason,
    AnswerStatus,
    CitationMode,
    KnowledgePolicy,
    OmissionReason,
    ReasonCode,
)

__all__ = [
    "LEDGER_JSON_SCHEMA",
    "PASSAGE_LEDGER_JSON_SCHEMA",
    "PASSAGE_PROMPT_VERSION",
    "PROMPT_VERSION",
    "AbstentionReason",
    "AnswerCancelledError",
    "AnswerSegment",
    "AnswerStatus",
    "AnswerTimeoutError",
    "AsyncEvidenceReaderModel",
    "Citation",
    "CitationCheck",
    "CitationMode",
    "DocumentSpan",
    "Evidence",
    "EvidenceAnswer",
    "EvidenceFirstError",
    "EvidenceReaderModel",
    "EvidenceSpan",
    "EvidenceStatus",
    "Fact",
    "FactMarker",
    "InvalidRequestError",
    "KnowledgePolicy",
    "ModelCallError",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "OmissionReason",
    "PromptBudget",
    "ReaderModel",
    "ReasonCode",
    "TokenChoice",
    "TokenLogprob",
    "TokenUsage",
    "ValidationIssue",
    "aanswer_from_evidence",
    "answer_from_evidence",
    "estimate_tokens",
    "profile_for",
]
