"""The strict call's settings, the same for every framework: no tools, no retries, one format.

What an integration sends or refuses, whatever its framework: the OpenAI ``response_format``
for the ledger schema, the request settings that give a model tools or that the strict call
sets itself, the one rule for retries outside an allow-list, the one-time warnings, and the
finish reason that means the output ran out of tokens.
"""

from __future__ import annotations

import inspect
import json
import socket
import ssl
from collections.abc import Mapping
from typing import Any, TypeVar

from evidence_first._models.dialects import DIALECTS
from evidence_first._models.once import warn_once
from evidence_first._models.profiles import ModelProfile
from evidence_first._models.writing import schema_in
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.model import ModelRequest

ClientT = TypeVar("ClientT")

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
    "output_format",
    "refuse_retries",
    "refuse_tools",
    "tool_keys_in",
    "warn_once",
    "warn_unenforced_once",
    "without_redirects",
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
    "grammar",
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


def output_format(request: ModelRequest, profile: ModelProfile) -> dict[str, Any]:
    """The chat-completions setting that asks a model of ``profile`` for the ledger.

    The request's schema written in the profile's dialect (none: as built), as a strict
    ``response_format``; a dialect that writes it ``compact`` sends it as llama.cpp's
    ``grammar`` instead (:func:`llguidance_grammar`).
    """
    schema: Mapping[str, Any] = request.json_schema
    if profile.dialect is not None:
        schema = schema_in(schema, profile.dialect)
        if DIALECTS[profile.dialect].compact:
            return {"grammar": llguidance_grammar(schema)}
    return {"response_format": openai_response_format(request, schema=schema)}


COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""LLGuidance's ``x-guidance`` for JSON with one space after each ``,`` and ``:`` and no other
whitespace (github.com/guidance-ai/llguidance docs/json_schema.md: "set to ``false`` to enforce
compact JSON representation"; the separators are patterns)."""

_KEY_INDENT = "\n  "


def llguidance_grammar(schema: Mapping[str, Any]) -> str:
    """``schema`` as an LLGuidance grammar, for llama.cpp's ``grammar`` field.

    The ledger object is written one key to a line, indented two spaces, as the reader lays it
    out unconstrained, and each key's value as compact JSON. The text up to the decision's value
    (``{``, a line break, two spaces and the first key) is then the one the reader writes
    freely, so the decision's probability, the reader's confidence its floors were calibrated
    on, does not move; inside the values, a free layout spends a token on a line break and an
    indent before most keys, which nobody reads.

    ``%llguidance {}`` hands the grammar to LLGuidance (llama.cpp docs/llguidance.md); a rule
    ``%json { ... }`` inlines a JSON schema, and string literals take JSON's syntax (llguidance
    docs/syntax.md, parser/src/lark/lexer.rs). A root that is not an object, or a choice of
    objects, with every key required and no other allowed is sent as one compact schema.
    """
    shapes = schema.get("anyOf", [schema]) if set(schema) <= {"anyOf"} else [schema]
    if not all(_fixed_keys(shape) for shape in shapes):
        return "%llguidance {}\nstart: %json " + _compact(schema)
    rules = ["start: " + " | ".join(f"ledger{n}" for n in range(len(shapes)))]
    for n, shape in enumerate(shapes):
        parts = []
        for k, (key, value) in enumerate(shape["properties"].items()):
            opening = "{" if k == 0 else ","
            parts.append(json.dumps(opening + _KEY_INDENT + json.dumps(key) + ": "))
            parts.append(f"value{n}_{k}")
            rules.append(f"value{n}_{k}: %json {_compact(value)}")
        parts.append(json.dumps("\n}"))
        rules.insert(1 + n, f"ledger{n}: " + " ".join(parts))
    return "%llguidance {}\n" + "\n".join(rules)


def _fixed_keys(shape: Mapping[str, Any]) -> bool:
    """Whether ``shape`` is an object of only its listed keys, every one of them required."""
    properties = shape.get("properties")
    return (
        shape.get("type") == "object"
        and isinstance(properties, Mapping)
        and bool(properties)
        and shape.get("additionalProperties") is False
        and list(shape.get("required", ())) == list(properties)
    )


def _compact(schema: Mapping[str, Any]) -> str:
    return json.dumps({**schema, "x-guidance": COMPACT_JSON}, ensure_ascii=False)


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


def without_redirects(client: ClientT) -> ClientT:
    """``client`` (an openai or anthropic client of a strict copy's own), never redirected.

    Every request it sends carries ``follow_redirects=False``, which the SDK passes to httpx for
    that request alone, so a 3xx is the SDK's status error and no second request is sent. The
    caller's clients, and the httpx client they share with this one, are not changed. The
    client's ``_prepare_options`` is the hook both SDKs give subclasses to change a request's
    options; it is wrapped on this client object alone.
    """
    prepare = client._prepare_options  # type: ignore[attr-defined]
    if inspect.iscoroutinefunction(prepare):

        async def prepare_async(options: Any) -> Any:
            options = await prepare(options)
            options.follow_redirects = False
            return options

        client._prepare_options = prepare_async  # type: ignore[attr-defined]
    else:

        def prepare_sync(options: Any) -> Any:
            options = prepare(options)
            options.follow_redirects = False
            return options

        client._prepare_options = prepare_sync  # type: ignore[attr-defined]
    return client
