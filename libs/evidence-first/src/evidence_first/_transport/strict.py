"""The strict call's settings, the same for every framework: no tools, no retries, one format.

What an integration sends or refuses, whatever its framework: the OpenAI ``response_format``
for the ledger schema, the request settings that give a model tools or that the strict call
sets itself, the one rule for retries outside an allow-list, the one-time warnings, and the
finish reason that means the output ran out of tokens.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from evidence_first._errors import InvalidRequestError
from evidence_first._model import ModelRequest
from evidence_first._transport.once import warn_once
from evidence_first._transport.profiles import ModelProfile

__all__ = [
    "COMPACT_JSON",
    "NESTED_SETTINGS",
    "SCHEMA_NAME",
    "STRICT_KEYS",
    "TOOL_KEYS",
    "TOP_LOGPROBS",
    "chat_completions_settings",
    "connection_failure",
    "limits_in",
    "llguidance_grammar",
    "normalized_finish_reason",
    "openai_response_format",
    "refuse_retries",
    "refuse_tools",
    "tool_keys_in",
    "warn_once",
    "warn_unenforced_once",
    "without_strict_keys",
]

SCHEMA_NAME = "evidence_ledger"
"""The name given to the ledger schema in an OpenAI ``json_schema`` response format."""

TOOL_KEYS = frozenset({"tools", "functions", "tool_choice", "function_call", "parallel_tool_calls"})
"""Request settings that give a model tools; a model configured with any of them is refused."""

STRICT_KEYS = TOOL_KEYS | {
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "n",
    "stream",
    "stream_options",
    "response_format",
    "timeout",
}
"""Request settings the strict call sets itself: a caller's own values for them are dropped."""

NESTED_SETTINGS = ("extra_body", "model_kwargs")
"""Keys under which frameworks nest more request settings; searched below as well."""

TOP_LOGPROBS = 10
"""How many of the most likely tokens at each position a transport asks for: enough that both
of the reader's decision values are among them whenever either is likely."""

_LIMIT_KEYS = ("max_tokens", "max_completion_tokens")
# Finish reasons that mean the output hit its token limit: OpenAI's and Ollama's, Anthropic's.
_OUT_OF_TOKENS = frozenset({"length", "max_tokens"})


def openai_response_format(
    request: ModelRequest, *, schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking strictly for ``schema``, default the request's."""
    schema = request.json_schema if schema is None else schema
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True},
    }


COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""LLGuidance's ``x-guidance`` for JSON with one space after each ``,`` and ``:`` and no other
whitespace (github.com/guidance-ai/llguidance docs/json_schema.md: "set to ``false`` to enforce
compact JSON representation"; the separators are patterns)."""


def llguidance_grammar(schema: Mapping[str, Any]) -> str:
    """``schema`` as an LLGuidance grammar for compact JSON, for llama.cpp's ``grammar`` field.

    ``%llguidance {}`` hands the grammar to LLGuidance (llama.cpp docs/llguidance.md) and
    ``start: %json { ... }`` inlines a JSON schema (llguidance docs/syntax.md).
    """
    compact = {**schema, "x-guidance": COMPACT_JSON}
    return "%llguidance {}\nstart: %json " + json.dumps(compact, ensure_ascii=False)


def chat_completions_settings(request: ModelRequest, profile: ModelProfile) -> dict[str, Any]:
    """The chat-completions sampling settings of ``request`` for a model of ``profile``.

    The output limit under the profile's field, with its allowance for reasoning on top; the
    request's temperature where the model accepts one; and, when the request asks for them,
    ``logprobs`` with :data:`TOP_LOGPROBS` alternatives.
    """
    settings: dict[str, Any] = {profile.output_limit: profile.output_tokens(request.max_tokens)}
    if profile.temperature and request.temperature is not None:
        settings["temperature"] = request.temperature
    if request.logprobs:
        settings.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
    return settings


def limits_in(settings: object) -> list[int]:
    """The output limits (``max_tokens``, ``max_completion_tokens``) set in ``settings``."""
    if not isinstance(settings, Mapping):
        return []
    limits = [
        value
        for key in _LIMIT_KEYS
        if isinstance(value := settings.get(key), int) and not isinstance(value, bool)
    ]
    for name in NESTED_SETTINGS:
        limits.extend(limits_in(settings.get(name)))
    return limits


def tool_keys_in(settings: object, where: str) -> tuple[str, list[str]] | None:
    """Where ``settings`` first sets :data:`TOOL_KEYS` (``where.extra_body``...), and which."""
    if not isinstance(settings, Mapping):
        return None
    if found := sorted(TOOL_KEYS.intersection(settings)):
        return where, found
    for name in NESTED_SETTINGS:
        if nested := tool_keys_in(settings.get(name), f"{where}.{name}"):
            return nested
    return None


def refuse_tools(settings: object, where: str, *, name: str = "llm") -> None:
    """Refuse a model configured with tools in ``settings`` (nested settings included).

    Raises:
        InvalidRequestError: With ``field="llm"``, naming where the tool keys are set.
    """
    found = tool_keys_in(settings, where)
    if found is not None:
        place, keys = found
        msg = (
            f"{name} is configured with tools ({place}: {', '.join(keys)}); remove them: the "
            "model must answer with text only"
        )
        raise InvalidRequestError(msg, field="llm")


def without_strict_keys(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without :data:`STRICT_KEYS`, nested settings included."""
    kept = {key: value for key, value in settings.items() if key not in STRICT_KEYS}
    for name in NESTED_SETTINGS:
        if isinstance(kept.get(name), Mapping):
            kept[name] = without_strict_keys(kept[name])
    return kept


def warn_unenforced_once(model_class: type, *, retries_ruled_out: bool, stacklevel: int) -> None:
    """Issue one :class:`UnenforcedSettingsWarning` per model class, from any thread.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    retries = "" if retries_ruled_out else ", and retries cannot be ruled out"
    msg = (
        f"{model_class.__name__} is not on evidence-first's allow-list, so it is called with the "
        "prompt alone: its output limit (max_tokens), temperature, provider-side timeout and "
        f"JSON output could not be set{retries}. The answer still comes from one call, its "
        "wait is bounded by `timeout` and its size by `max_response_chars`."
    )
    warn_once(model_class, msg, stacklevel=stacklevel + 1)


def normalized_finish_reason(source: object) -> str | None:
    """The finish, stop (Anthropic) or done (Ollama) reason in ``source``; out of tokens: length."""
    for name in ("finish_reason", "stop_reason", "done_reason"):
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if isinstance(value, str) and value:
            return "length" if value.lower() in _OUT_OF_TOKENS else value
    return None


def refuse_retries(model: object) -> None:
    """Refuse a model outside an allow-list that would retry a failed call (``max_retries > 0``).

    Its retries cannot be turned off from outside, and the answer must come from one call.

    Raises:
        InvalidRequestError: With ``field="llm"``, saying how to construct it instead.
    """
    retries = getattr(model, "max_retries", None)
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        msg = (
            f"{type(model).__name__} retries failed calls (max_retries={retries}) and "
            "evidence-first cannot turn that off for this class; construct it with max_retries=0"
        )
        raise InvalidRequestError(msg, field="llm")


def connection_failure(reason: object) -> str:
    """What kind of connection failure ``reason`` is, in words that carry no payload."""
    if isinstance(reason, ConnectionRefusedError):
        return "the endpoint refused the connection (is the server running on that port?)"
    if isinstance(reason, socket.gaierror):
        return "the endpoint's host name could not be resolved (DNS)"
    if isinstance(reason, ssl.SSLError):
        return "the TLS handshake with the endpoint failed"
    if isinstance(reason, OSError):
        return f"the connection failed ({type(reason).__name__})"
    return "the endpoint could not be reached"
