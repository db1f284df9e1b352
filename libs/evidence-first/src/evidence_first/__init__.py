"""evidence-first: answer a question only from the evidence you supply, with verified citations.

Every returned citation names a source that was sent to the model and quotes it exactly, at
known character offsets. When the evidence does not support an answer the result abstains;
when the model's output is malformed or unsupported it fails closed.
"""

import dataclasses
import inspect
import typing
from types import FunctionType
from typing import Any

from evidence_first import render as render
from evidence_first._engine.entry_points import aanswer_from_evidence, answer_from_evidence
from evidence_first._engine.result import EvidenceAnswer
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
from evidence_first._shapes.evidence import Evidence, EvidenceStatus
from evidence_first._shapes.model import (
    AsyncEvidenceReaderModel,
    EvidenceReaderModel,
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
    "JudgeRules",
    "KnowledgePolicy",
    "ModelCallError",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "OmissionReason",
    "PromptBudget",
    "ReaderModel",
    "ReasonCode",
    "StoredAnswerError",
    "TokenChoice",
    "TokenLogprob",
    "TokenUsage",
    "ValidationIssue",
    "aanswer_from_evidence",
    "answer_from_evidence",
    "estimate_tokens",
    "profile_for",
]


def _publish(namespace: dict[str, Any]) -> None:
    """Make each exported class and function of a private module name the public one instead.

    As httpx does, so reprs, tracebacks, pickles and the API reference show where an object is
    imported from. A class's annotations are resolved first, in the module that wrote them:
    ``typing.get_type_hints`` and pydantic's rebuilds look names up in ``__module__``.
    """
    for name in namespace["__all__"]:
        value = namespace[name]
        if not isinstance(value, type | FunctionType) or "._" not in f".{value.__module__}":
            continue
        if isinstance(value, type):
            hints = typing.get_type_hints(value, include_extras=True)
            own = inspect.get_annotations(value)
            value.__annotations__ = {key: hints[key] for key in own}
            if dataclasses.is_dataclass(value):
                for field in dataclasses.fields(value):
                    field.type = hints[field.name]
        value.__module__ = namespace["__name__"]


_publish(globals())
