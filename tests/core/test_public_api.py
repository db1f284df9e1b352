"""The public surface of evidence_first is explicit and pinned."""

import evidence_first


def test_public_names_are_pinned():
    assert sorted(evidence_first.__all__) == sorted(
        [
            "LEDGER_JSON_SCHEMA",
            "PASSAGE_LEDGER_JSON_SCHEMA",
            "PASSAGE_PROMPT_VERSION",
            "PROMPT_VERSION",
            "AbstentionReason",
            "AnswerCancelledError",
            "AnswerSegment",
            "AnswerTextEvent",
            "AnswerStatus",
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
            "JudgeRules",
            "InvalidRequestError",
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
    )


def test_every_public_name_resolves():
    for name in evidence_first.__all__:
        assert getattr(evidence_first, name) is not None


def test_error_tree():
    assert issubclass(evidence_first.InvalidRequestError, ValueError)
    assert issubclass(evidence_first.AnswerTimeoutError, TimeoutError)
    for error in (
        evidence_first.InvalidRequestError,
        evidence_first.ModelCallError,
        evidence_first.AnswerTimeoutError,
        evidence_first.AnswerCancelledError,
    ):
        assert issubclass(error, evidence_first.EvidenceFirstError)
