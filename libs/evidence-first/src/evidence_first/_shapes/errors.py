"""The errors and warnings evidence-first issues; no message carries evidence text or payloads.

The tree::

    EvidenceFirstError
    ├── InvalidRequestError (also ValueError)   the caller's arguments break the contract
    │   └── StreamingNotEnabledError            (LlamaIndex integration) a dropped streaming flag
    ├── StoredAnswerError (also ValueError)     a stored answer fails its check, its signature,
    │                                           or the caller's copy of its sources
    ├── ModelCallError                          the model callback raised or returned a non-response
    ├── AnswerTimeoutError (also TimeoutError)  the model did not answer within ``timeout``
    ├── AnswerCancelledError                    the caller's ``cancel`` event was set (sync calls)
    └── LocalModelError                         the embedded model could not be assembled or started

    EvidenceFirstWarning (a UserWarning)
    └── UnenforcedSettingsWarning               a model called with the prompt alone
        └── ModelProfileWarning                 a model name the profile rules do not know

Every class is defined here, except an integration's own, which lives in its package under
the same roots. Async calls propagate :class:`asyncio.CancelledError` unchanged when their task
is cancelled. A malformed or unsupported model *output* is not an error: it is an
``invalid_response`` result.
"""

from __future__ import annotations

__all__ = [
    "AnswerCancelledError",
    "AnswerTimeoutError",
    "EvidenceFirstError",
    "EvidenceFirstWarning",
    "InvalidRequestError",
    "LocalModelError",
    "ModelCallError",
    "ModelProfileWarning",
    "StoredAnswerError",
    "UnenforcedSettingsWarning",
]


class EvidenceFirstError(Exception):
    """Base class of every error raised by evidence-first."""


class InvalidRequestError(EvidenceFirstError, ValueError):
    """The request breaks the contract; nothing was sent to the model.

    Attributes:
        field: The argument at fault, such as ``"sources[3].text"`` or ``"max_output_tokens"``.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class StoredAnswerError(EvidenceFirstError, ValueError):
    """A stored answer is not one evidence-first returned, or it was changed since.

    Raised by ``EvidenceAnswer.load`` (the answer, judged again, differs from what it stores;
    or its signature does not hold under the key given) and ``EvidenceAnswer.check_sources``
    (a cited source differs from the caller's copy). The message names the place, never text.
    """


class ModelCallError(EvidenceFirstError):
    """The model callback failed. The cause is chained; its message is not repeated here.

    Attributes:
        cause_type: The qualified class name of the underlying exception, if any.
    """

    def __init__(self, message: str, *, cause_type: str | None = None) -> None:
        super().__init__(message)
        self.cause_type = cause_type


class AnswerTimeoutError(EvidenceFirstError, TimeoutError):
    """The model did not answer within the timeout (ours or the provider client's).

    Attributes:
        timeout: The timeout in seconds that applied to the call.
    """

    def __init__(self, message: str, *, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout


class AnswerCancelledError(EvidenceFirstError):
    """The caller's ``cancel`` event was set before the model answered."""


class LocalModelError(EvidenceFirstError):
    """The local model could not be installed, assembled or started."""

    # Users catch it from evidence_first.local, so tracebacks name it there.
    __module__ = "evidence_first.local"


class EvidenceFirstWarning(UserWarning):
    """Base class of every warning evidence-first issues."""


class UnenforcedSettingsWarning(EvidenceFirstWarning):
    """A framework model outside an integration's allow-list is called with the prompt alone.

    Its provider-side output limit, timeout, JSON mode or retries could not be set; the engine
    still makes one call, stops waiting at ``timeout`` and rejects output over
    ``max_response_chars``. Integrations issue it once per model class.
    """

    # Integrations and evidence_first.adapters export it; tracebacks name it there.
    __module__ = "evidence_first.adapters"


class ModelProfileWarning(UnenforcedSettingsWarning):
    """A known provider's model name that the profile rules do not know.

    It is called with that provider's cautious profile: nothing a current model of the provider
    is documented to refuse, so some settings (a temperature of 0, log-probabilities) are left
    out. The message says which, and how to give the model's profile. Issued once per name.
    """

    __module__ = "evidence_first.adapters"
