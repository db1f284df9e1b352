"""A reader model for any OpenAI-compatible ``/chat/completions`` endpoint, using only the stdlib.

It makes exactly one HTTP request per call (no retries, and a redirect is a failure, never
followed), asks for the request's JSON schema as the response format (and, where the server
returns them, the output's token log-probabilities), and maps the reply to a
:class:`~evidence_first.ModelResponse`, or, streamed, its server-sent events to
:class:`~evidence_first.ModelDelta` pieces. Use it for llama.cpp, vLLM, Ollama's OpenAI
endpoint, or a hosted API. What it sends a model follows the model's profile
(:func:`~evidence_first.profile_for`): found from the host and the model's name by the rule
table, or given.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from evidence_first._models.dialects import DIALECTS, DialectName
from evidence_first._models.profiles import (
    DEFAULT_PROFILE,
    ModelProfile,
    family_for_url,
    profile_for_name,
    profile_of,
)
from evidence_first._models.strict import (
    SCHEMA_NAME,
    TOP_LOGPROBS,
    chat_completions_settings,
    output_format,
)
from evidence_first._shapes.errors import InvalidRequestError, ModelCallError
from evidence_first._shapes.limits import MAX_OUTPUT_TOKENS
from evidence_first._shapes.model import ModelDelta, ModelRequest, ModelResponse, TokenLogprob
from evidence_first._shapes.public import publish
from evidence_first._transport.reading import ReplyLimits, read_reply, reply_limits
from evidence_first._transport.sse import read_deltas
from evidence_first._transport.stated import OVER_LIMIT, decoded, logprob_entries, reply_usage

__all__ = [
    "SCHEMA_NAME",
    "ChatCompletionsModel",
    "ReplyLimits",
    "chat_completions_body",
    "reply_limits",
    "token_logprobs",
]


def chat_completions_body(
    request: ModelRequest,
    *,
    model: str,
    seed: int | None,
    profile: ModelProfile = DEFAULT_PROFILE,
) -> dict[str, Any]:
    """Build the OpenAI chat-completions body for ``request``: no tools, JSON-schema output.

    What the model accepts follows ``profile``: the output-limit field (and its allowance for
    reasoning), a temperature only where one is accepted, log-probabilities only when the
    request asks. The schema is written in the profile's dialect
    (:mod:`evidence_first._models.dialects`; none: the schema as built), and left out when
    the profile asks for JSON in the prompt only; the ``llguidance`` dialect sends it as a
    llama.cpp ``grammar`` for compact JSON instead of a ``response_format``.
    """
    settings = chat_completions_settings(request, profile)
    logprobs: dict[str, Any] = {
        key: settings.pop(key) for key in ("logprobs", "top_logprobs") if key in settings
    }
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.user},
        ],
        **settings,
    }
    if profile.structured_output:
        body.update(output_format(request, profile))
    body["stream"] = False
    if seed is not None:
        body["seed"] = seed
    body.update(logprobs)
    return body


class ChatCompletionsModel:
    """Calls ``{base_url}/chat/completions`` once per request.

    Args:
        base_url: The API root, such as ``http://127.0.0.1:8080/v1``.
        model: The model name to send.
        api_key: Sent as a bearer token when given. Never logged or put in errors.
        seed: A sampling seed, for providers that honour one.
        dialect: The JSON Schema subset the server accepts (:data:`DIALECTS`), over the
            profile's: ``"full"`` for llama.cpp, vLLM and Ollama (the ledger as a choice of
            answered and abstained shapes), ``"llguidance"`` for llama.cpp built with
            LLGuidance (the same, sent as a grammar for compact JSON), ``"openai"`` for
            OpenAI's strict structured outputs. By default the profile's: ``"openai"`` for
            ``api.openai.com`` (``"openai-fine-tuned"`` when ``model`` starts with ``ft:``),
            ``"azure-openai"`` for Azure OpenAI hosts, ``"llguidance"`` for the embedded
            models' names, else ``"json-schema"`` (standard JSON Schema with every bound, the
            root an object). The engine checks each request's schema against it before the call.
        logprobs: Whether the server returns token log-probabilities (``logprobs`` and
            ``top_logprobs``), from which the engine reads the reader's confidence, over the
            profile's: by default, yes for the embedded models and for OpenAI's and Azure's
            chat models, never for their reasoning models, which refuse them; pass ``True``
            for another server that returns them (vLLM does). A server that refuses the field
            would fail every call.
        profile: What the model accepts (:class:`~evidence_first.ModelProfile`, or the name
            of a model the rules know, such as ``"gpt-5"``); by default found from the host
            and ``model`` (:func:`~evidence_first.profile_for`). Give it for an Azure
            deployment, whose name says nothing of its model.

    Raises:
        InvalidRequestError: ``base_url``, ``dialect`` or ``profile`` is not valid.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "default",
        api_key: str | None = None,
        seed: int | None = None,
        dialect: DialectName | None = None,
        logprobs: bool | None = None,
        profile: ModelProfile | str | None = None,
    ) -> None:
        self.base_url = _checked_base_url(base_url)
        self.model = model
        self.seed = seed
        if dialect is not None and dialect not in DIALECTS:
            msg = f"dialect must be one of {', '.join(DIALECTS)}"
            raise InvalidRequestError(msg, field="dialect")
        family = family_for_url(self.base_url)
        found = profile_of(profile, family) or profile_for_name(model, family)
        changes: dict[str, Any] = {}
        if dialect is not None:
            changes["dialect"] = dialect
            # The full and llguidance dialects name a llama.cpp-family server, which returns them.
            changes["logprobs"] = found.logprobs or dialect in ("full", "llguidance")
        if logprobs is not None:
            changes["logprobs"] = logprobs
        # Declared to the engine (profile_for), which plans each request by it.
        self.profile: ModelProfile = found.replace(**changes) if changes else found
        self._api_key = api_key

    @property
    def dialect(self) -> DialectName | None:
        """The JSON Schema dialect the server is sent (the profile's)."""
        return self.profile.dialect

    @property
    def returns_logprobs(self) -> bool:
        """Whether the call asks for token log-probabilities and reads them (the profile's)."""
        return self.profile.logprobs

    def __repr__(self) -> str:
        return f"ChatCompletionsModel(base_url={self.base_url!r}, model={self.model!r})"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body :meth:`generate` posts for ``request``."""
        return chat_completions_body(
            request, model=self.model, seed=self.seed, profile=self.profile
        )

    def stream_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body :meth:`stream` posts: :meth:`body`'s, streamed.

        ``"stream": true``, and ``"stream_options": {"include_usage": true}`` where the
        profile's ``stream_usage`` says the server takes it; nothing else differs.
        """
        body = self.body(request)
        body["stream"] = True
        if self.profile.stream_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    def stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
        """Send ``request`` once, streamed, and yield the reply's pieces as they arrive.

        The same one request as :meth:`generate` (:meth:`stream_body`), its server-sent events
        read (:mod:`evidence_first._transport.sse`) within the reply's limits and an allowance
        for each event's envelope: past it the connection is closed and the last piece has
        ``over_limit`` set, which the engine fails closed as ``response_too_large``. The usage
        is read from the event that carries it (else none), and the log-probabilities from each
        event. The connection is closed when ``request.cancel`` is set (the engine stops
        waiting, or its stream is closed), at ``request.timeout``, which bounds the whole
        stream, and when this iterator is closed. The async entry points run it on a worker
        thread.

        Raises:
            ModelCallError: An HTTP error status, a redirect (never followed), a stream that
                broke off, is malformed, or reports an error.
            TimeoutError: The stream did not end within ``request.timeout``.
            AnswerCancelledError: ``request.cancel`` was set before it ended.
        """
        yield from read_deltas(self._http_request(self.stream_body(request)), request)

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the message text, finish reason, tool calls and usage.

        The reply is read only up to :func:`~evidence_first._transport.reading.reply_limits`
        (its bytes, and the log-probability entries kept): past them the connection is closed
        and the response is empty with ``over_limit`` set, which the engine fails closed as
        ``response_too_large``. The connection is also closed when ``request.cancel`` is set or
        ``request.timeout`` passes while connecting or reading, however slowly the server
        writes (:func:`~evidence_first._transport.reading.read_reply`).

        Raises:
            ModelCallError: The endpoint answered with an HTTP error, a redirect (never
                followed) or an unexpected body.
            TimeoutError: No reply within ``request.timeout``.
            AnswerCancelledError: ``request.cancel`` was set before the reply was read.
        """
        limits = reply_limits(request)
        raw = read_reply(self._http_request(self.body(request)), request, limits)
        if raw is None:
            return ModelResponse(text="", over_limit="reply_bytes")
        return _parse_reply(decoded(raw), limits)

    def _http_request(self, body: dict[str, Any]) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=headers,
            method="POST",
        )


def _checked_base_url(base_url: object) -> str:
    """The API root without its trailing slash; its shape is checked before any call."""
    if not isinstance(base_url, str):
        msg = f"base_url must be a string, got {type(base_url).__name__}"
        raise InvalidRequestError(msg, field="base_url")
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        msg = "base_url must start with http:// or https://, such as http://127.0.0.1:8080/v1"
        raise InvalidRequestError(msg, field="base_url")
    if not parts.hostname:
        msg = "base_url has no host, such as http://127.0.0.1:8080/v1"
        raise InvalidRequestError(msg, field="base_url")
    return base_url.rstrip("/")


def _parse_reply(payload: Any, limits: ReplyLimits | None = None) -> ModelResponse:
    """The reply as a response, each part checked by its type before it is read.

    Nothing here raises while another exception is handled, and nothing is built from the
    reply that could fail on it (pydantic's errors quote their input): a malformed reply is a
    ``ModelCallError`` with no cause, and a malformed ``usage`` or ``logprobs`` is read as
    none. ``limits``: the log-probability entries kept (:func:`reply_limits`); more is
    ``over_limit="logprob_entries"``. Without limits, log-probabilities are read within the
    contract's largest (:func:`token_logprobs`).
    """
    choice, message = _first_choice(payload)
    text = message.get("content")
    calls = message.get("tool_calls")
    tool_calls = tuple(calls) if isinstance(calls, list) else (calls,) if calls else ()
    finish_reason = choice.get("finish_reason")
    logprobs = None
    if limits is None or limits.alternatives:
        read = _logprobs(choice.get("logprobs"), limits or _CONTRACT_LIMITS)
        if read is OVER_LIMIT:
            return ModelResponse(text="", over_limit="logprob_entries")
        logprobs = read if isinstance(read, tuple) else None
    return ModelResponse(
        logprobs=logprobs,
        text=text or "",
        tool_calls=tool_calls,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        usage=reply_usage(payload.get("usage")),
    )


def _first_choice(payload: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reply's first choice and its message, whose content is a string or ``None``.

    Raises:
        ModelCallError: The reply is not a chat completion.
    """
    choices = payload.get("choices") if isinstance(payload, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    if choice is None or not isinstance(message, dict) or not isinstance(text, (str, type(None))):
        msg = "the endpoint's reply is not a chat completion"
        raise ModelCallError(msg, cause_type=None)
    return choice, message


# With no request at hand (the integrations read a framework's reply): the contract's largest.
_CONTRACT_LIMITS = ReplyLimits(bytes=0, tokens=MAX_OUTPUT_TOKENS, alternatives=TOP_LOGPROBS)


def token_logprobs(logprobs: object) -> tuple[TokenLogprob, ...] | None:
    """A chat completion choice's ``logprobs`` as the core's tokens, or ``None``.

    OpenAI and llama.cpp give ``{"content": [{"token", "logprob", "top_logprobs": [...]}]}``,
    as JSON or as the openai SDK's objects; anything else in that place is read as no
    log-probabilities, never as an error, and so is more than the contract's largest output
    (8,192 tokens of at most :data:`TOP_LOGPROBS` alternatives): no more entries are built.
    """
    read = _logprobs(logprobs, _CONTRACT_LIMITS)
    return read if isinstance(read, tuple) else None


def _logprobs(logprobs: object, limits: ReplyLimits) -> tuple[TokenLogprob, ...] | object | None:
    return logprob_entries(logprobs, tokens=limits.tokens, alternatives=limits.alternatives)


publish(globals())
