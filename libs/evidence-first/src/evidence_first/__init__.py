"""evidence-first: answer a question only from the evidence you supply, with verified citations.

Every returned citation names a source that was sent to the model and quotes it exactly, at
known character offsets. When the evidence does not support an answer the result abstains;
when the model's output is malformed or unsupported it fails closed.
"""

from evidence_first import render as render
from evidence_first._engine.entry_points import aanswer_from_evidence, answer_from_evidence
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._engine.streaming import (
    astream_answer_from_evidence,
    stream_answer_from_evidence,
)
from evidence_first._models.profiles import ModelProfile, profile_for
from evidence_first._sending.citing.modes import LEDGER_JSON_SCHEMA, PASSAGE_LEDGER_JSON_SCHEMA
from evidence_first._sending.citing.passage import PASSAGE_PROMPT_VERSION
from evidence_first._sending.citing.quote import PROMPT_VERSION
from evidence_first._sending.tokens import estimate_tokens
from evidence_first._shapes.errors import (
    AnswerCancelledError,
    AnswerTimeoutError,
    EvidenceFirstError,
    InvalidRequestError,
    ModelCallError,
    StoredAnswerError,
)
from evidence_first._shapes.events import (
    AnswerTextEvent,
    DecisionEvent,
    FactEvent,
    SourcesEvent,
    StreamEvent,
)
from evidence_first._shapes.evidence import Evidence, EvidenceStatus
from evidence_first._shapes.model import (
    AsyncEvidenceReaderModel,
    EvidenceReaderModel,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ReaderModel,
    TokenChoice,
    TokenLogprob,
)
from evidence_first._shapes.parts import (
    AnswerSegment,
    Citation,
    CitationCheck,
    DocumentSpan,
    EvidenceSpan,
    Fact,
    FactMarker,
    JudgeRules,
    PromptBudget,
    TokenUsage,
    ValidationIssue,
)
from evidence_first._shapes.public import publish
from evidence_first._shapes.vocabulary import (
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
    "AnswerTextEvent",
    "AnswerTimeoutError",
    "AsyncEvidenceReaderModel",
    "Citation",
    "CitationCheck",
    "CitationMode",
    "DecisionEvent",
    "DocumentSpan",
    "Evidence",
    "EvidenceAnswer",
    "EvidenceFirstError",
    "EvidenceReaderModel",
    "EvidenceSpan",
    "EvidenceStatus",
    "Fact",
    "FactEvent",
    "FactMarker",
    "InvalidRequestError",
    "JudgeRules",
    "KnowledgePolicy",
    "ModelCallError",
    "ModelDelta",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "OmissionReason",
    "PromptBudget",
    "ReaderModel",
    "ReasonCode",
    "SourcesEvent",
    "StoredAnswerError",
    "StreamEvent",
    "TokenChoice",
    "TokenLogprob",
    "TokenUsage",
    "ValidationIssue",
    "aanswer_from_evidence",
    "answer_from_evidence",
    "astream_answer_from_evidence",
    "estimate_tokens",
    "profile_for",
    "stream_answer_from_evidence",
]


publish(globals())
