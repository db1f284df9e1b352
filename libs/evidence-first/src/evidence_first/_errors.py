"""The errors evidence-first raises; none of their messages carries evidence text or payloads.

The tree::

    EvidenceFirstError
    ├── InvalidRequestError (also ValueError)   the caller's arguments break the contract
    ├── ModelCallError                          the model callback raised or returned a non-response
    ├── AnswerTimeoutError (also TimeoutError)  the model did not answer within ``timeout``
    └── AnswerCancelledError                    the caller's ``cancel`` event was set (sync calls)

Async calls propagate :class:`asyncio.CancelledError` unchanged when their task is cancelled.
A malformed or unsupported model *output* is not an error: it is an ``invalid_response`` result.
"""

from __future__ import annotations

__all__ = [
    "AnswerCancelledError",
    "AnswerTimeoutError",
    "EvidenceFirstError",
    "InvalidRequestError",
    "ModelCallError",
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
