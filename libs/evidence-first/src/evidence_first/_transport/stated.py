"""What a reply states, read so that no exception carries its bytes.

Its JSON (:func:`decoded`), its counts, its token usage and log-probabilities, and where a
redirect points. Every number a reply states (a usage count, ``Content-Length``, a redirect's
port) is read by :func:`reply_count` alone, and a redirect is named by its origin alone: a
hostile reply's bytes reach no message, cause or context. Nothing here builds a value that
could fail on what it reads (pydantic's errors quote their input): each part is checked by its
type first, and a malformed ``usage`` or ``logprobs`` is read as none.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from evidence_first._shapes.errors import ModelCallError
from evidence_first._shapes.model import TokenChoice, TokenLogprob
from evidence_first._shapes.parts import TokenUsage

__all__ = [
    "LARGEST_COUNT",
    "OVER_LIMIT",
    "acall_refusing_redirects",
    "call_refusing_redirects",
    "decoded",
    "logprob_entries",
    "refused_redirect",
    "reply_count",
    "reply_field",
    "reply_usage",
    "status_failure",
]

T = TypeVar("T")

LARGEST_COUNT = (1 << 53) - 1
"""The largest count a reply may state: the largest integer every JSON reader holds exactly
(RFC 8259, section 6). A larger one is no count, whatever its digits."""


def reply_count(value: object, *, bound: int = LARGEST_COUNT) -> int | None:
    """A count a reply states, from 0 to ``bound``, or ``None`` when it states none.

    ``value`` is a JSON integer (never a bool) or text of ASCII digits alone: no sign, space,
    underscore or other script's digit, all of which ``int()`` would take, and no more digits
    than ``bound`` has, so that no conversion can fail on what it reads.
    """
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()) or len(value) > len(str(bound)):
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= bound else None


def decoded(raw: bytes) -> Any:
    """The reply's JSON; a reply that is not JSON is a ``ModelCallError`` with no cause."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # a JSONDecodeError holds the whole reply as .doc
        pass
    msg = "the endpoint's reply is not JSON"
    raise ModelCallError(msg, cause_type=None)


def reply_usage(usage: object) -> TokenUsage:
    """The token counts of a reply's ``usage``, each a count (:func:`reply_count`) or ``None``."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    return TokenUsage(
        input_tokens=reply_count(usage.get("prompt_tokens")),
        output_tokens=reply_count(usage.get("completion_tokens")),
        cached_input_tokens=reply_count(details.get("cached_tokens")),
    )


OVER_LIMIT = object()
"""What :func:`logprob_entries` gives for more entries than its limits allow."""


def logprob_entries(
    logprobs: object, *, tokens: int, alternatives: int
) -> tuple[TokenLogprob, ...] | object | None:
    """A choice's ``logprobs`` as the core's tokens: the tokens, ``None``, or :data:`OVER_LIMIT`.

    OpenAI and llama.cpp give ``{"content": [{"token", "logprob", "top_logprobs": [...]}]}``,
    as JSON or as the openai SDK's objects; anything else in that place is read as none. More
    than ``tokens`` entries, or an entry of more than ``alternatives`` most likely tokens, is
    :data:`OVER_LIMIT`: the counts are checked before any entry is built, so a reply past them
    costs nothing more.
    """
    content = reply_field(logprobs, "content")
    if not isinstance(content, (list, tuple)) or not content:
        return None
    if len(content) > tokens:
        return OVER_LIMIT
    read: list[TokenLogprob] = []
    for item in content:
        top = reply_field(item, "top_logprobs") or ()
        if not isinstance(top, (list, tuple)):
            return None
        if len(top) > alternatives:
            return OVER_LIMIT
        token, logprob = reply_field(item, "token"), reply_field(item, "logprob")
        choices = [(reply_field(choice, "token"), reply_field(choice, "logprob")) for choice in top]
        if not all(_is_entry(t, lp) for t, lp in [(token, logprob), *choices]):
            return None
        read.append(
            TokenLogprob(
                token=token,
                logprob=logprob,
                top=tuple(TokenChoice(t, lp) for t, lp in choices),
            )
        )
    return tuple(read)


def _is_entry(token: object, logprob: object) -> bool:
    """A token and its log-probability as the core's types take them, checked beforehand.

    A JSON integer too large for a float would fail in the type's conversion: none is taken.
    """
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
        return False
    return isinstance(token, str) and (isinstance(logprob, float) or abs(logprob) < 1 << 1000)


def reply_field(source: object, name: str) -> Any:
    """``source[name]`` of a JSON object, or the attribute of an SDK's object; else ``None``."""
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def status_failure(code: int, location: str | None, url: str) -> ModelCallError:
    """The failure of a reply of HTTP status ``code`` to a request for ``url``.

    A redirect is never followed. It is named by the origin its ``location`` points to
    (scheme, host and port, never a path, a query or a user), or as a location that is not an
    ``http`` or ``https`` URL, never echoed.
    """
    msg = f"the endpoint answered HTTP {code}"
    if 300 <= code < 400 and location is not None:
        where = _origin(location, url) or "a location that is not an http or https URL"
        msg += f", a redirect to {where} (never followed)"
    return ModelCallError(msg, cause_type="urllib.error.HTTPError")


# A host a message may name: a DNS name or an IP address (urlsplit lowers its case), no more.
_HOST = re.compile(r"[a-z0-9._-]{1,253}|[0-9a-f:.]{2,45}")


def _origin(location: str, url: str) -> str | None:
    """The origin ``location`` points to, resolved against ``url``, or ``None`` for none."""
    try:
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(url, location))
    except ValueError:  # a malformed IPv6 address, whose message quotes it
        return None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host or not _HOST.fullmatch(host):
        return None
    # The port's text, read here and not by urlsplit's .port, which takes a sign before 3.11.
    _, colon, port = parts.netloc.rpartition("@")[2].rpartition(":")
    if not colon or "]" in port:  # no port, or an IPv6 address's last colon
        port = ""
    number = reply_count(port, bound=65_535) if port else None
    if port and number is None:
        return None
    named = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{named}" + (f":{number}" if port else "")


def refused_redirect(error: BaseException) -> ModelCallError | None:
    """The core's failure for the redirect ``error`` reports, or ``None`` if it reports none.

    Each integration's strict copy refuses to follow a 3xx, and its SDK raises its own status error
    holding the response: openai's and anthropic's ``APIStatusError``, httpx's
    ``HTTPStatusError`` (ollama raises its ``ResponseError`` while handling it), google-genai's
    ``APIError``, or an error a framework raised from one of them. The response is read for
    its status, ``Location`` and URL alone, and worded by :func:`status_failure` (the status and
    the origin it names, never a path or query); the SDK's error, whose message holds the
    body, is not kept.
    """
    for current in _chain(error):
        response = getattr(current, "response", None)
        code = getattr(response, "status_code", getattr(response, "status", None))  # aiohttp
        if isinstance(code, int) and not isinstance(code, bool) and 300 <= code < 400:
            location = response.headers.get("location")  # type: ignore[union-attr]
            failure = status_failure(code, location, str(response.url))  # type: ignore[union-attr]
            cause = f"{type(current).__module__}.{type(current).__qualname__}"
            return ModelCallError(str(failure), cause_type=cause)
    return None


def call_refusing_redirects(call: Callable[[], T]) -> T:
    """``call()``, with a refused redirect raised as the core's failure (nothing chained).

    Raises:
        ModelCallError: The model's endpoint answered a redirect, which was not followed.
    """
    try:
        return call()
    except Exception as error:
        refused = refused_redirect(error)
        if refused is None:
            raise
    raise refused  # outside the handler: the SDK's error is not its context


async def acall_refusing_redirects(call: Callable[[], Awaitable[T]]) -> T:
    """Async :func:`call_refusing_redirects`."""
    try:
        return await call()
    except Exception as error:
        refused = refused_redirect(error)
        if refused is None:
            raise
    raise refused


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the exceptions it was raised from or while handling, each once."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not known for known in seen):
        seen.append(current)
        yield current
        current = current.__cause__ or current.__context__
