"""A streamed chat completion: server-sent events, read strictly, within the reply's limits.

:class:`EventReader` reads the event stream format (WHATWG HTML, "Server-sent events"): ``data:``
lines joined into an event at each blank line, comments and ``id``/``retry`` fields skipped,
lines ending in CRLF, LF or CR, and ``data: [DONE]`` ending the stream. Any other line is a
malformed stream. :class:`ChunkReader` reads each event as an OpenAI ``chat.completion.chunk``
into a :class:`~evidence_first.ModelDelta`. :func:`read_deltas` posts one request and reads its
stream through the same watch and byte count as a whole reply
(:func:`~evidence_first._transport.reading.read_stream`), within :func:`stream_limit`: past it
the connection is closed and the last piece says so (``over_limit``). No exception raised here
carries the stream's bytes.
"""

from __future__ import annotations

import contextlib
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

from evidence_first._shapes.errors import ModelCallError
from evidence_first._shapes.model import ModelDelta, ModelRequest, TokenLogprob
from evidence_first._transport.reading import ReplyLimits, read_stream, reply_limits
from evidence_first._transport.stated import OVER_LIMIT, decoded, logprob_entries, reply_usage

__all__ = [
    "STREAM_EVENTS_BEYOND_TOKENS",
    "STREAM_EVENT_BYTES",
    "ChunkReader",
    "EventReader",
    "read_deltas",
    "stream_limit",
]

# What each event of a stream may spend around the text and log-probabilities it carries: the
# "data: " prefix, the chunk's keys, ID, model name, fingerprint, timestamps, an obfuscation
# field, its blank line and the chunked encoding's framing. Measured at 267 to 606 bytes on
# llama.cpp (the embedded tiny model's stream, a 52-character model path, the usage and
# timings event the largest) and at 429 to 544 on OpenAI's documented chunk with every field,
# usage included; allowed 1,024. A stream has at most one event per output token, and a few
# more: the role, the finish reason, the usage and [DONE].
STREAM_EVENT_BYTES = 1024
STREAM_EVENTS_BEYOND_TOKENS = 8


def stream_limit(request: ModelRequest) -> int:
    """The bytes a streamed reply may spend: its whole reply's, and each event's envelope.

    ``reply_limits(request).bytes + (max_tokens + STREAM_EVENTS_BEYOND_TOKENS) *
    STREAM_EVENT_BYTES``: with the defaults 8.5 MB (2.8 MB without log-probabilities); at the
    options' largest, 33.9 MB.
    """
    events = request.max_tokens + STREAM_EVENTS_BEYOND_TOKENS
    return reply_limits(request).bytes + events * STREAM_EVENT_BYTES


_LINE_END = re.compile(rb"\r\n|\r|\n")
_SKIPPED_FIELDS = (b"id", b"retry")


def _malformed() -> ModelCallError:
    msg = "the endpoint's stream is not a server-sent event stream"
    return ModelCallError(msg, cause_type=None)


class EventReader:
    """Server-sent events from bytes in any pieces: each event's data, until ``[DONE]``.

    Linear in the stream's length: each byte is scanned once for a line end, whatever the
    pieces. Raises ``ModelCallError`` (of no stream byte) on a line that is no ``data``,
    ``event``, ``id`` or ``retry`` field or comment, and on an event of a type other than
    ``message`` (an ``event: error``).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line end
        self._after_cr = False  # the last line ended in a CR: a LF next is its CRLF's
        self._data: list[bytes] = []
        self._type = b""
        self.done = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of each event ``chunk`` completes, up to ``[DONE]``."""
        self._buffer += chunk
        events: list[bytes] = []
        at = 0
        while not self.done:
            if self._after_cr and at < len(self._buffer):
                at += self._buffer[at] == ord("\n")
                self._after_cr = False
            end = _LINE_END.search(self._buffer, max(at, self._scanned))
            if end is None:
                break
            self._after_cr = end.group() == b"\r"
            event = self._line(bytes(self._buffer[at : end.start()]))
            if event is not None:
                events.append(event)
            at = end.end()
        del self._buffer[:at]
        self._scanned = len(self._buffer)
        return events

    def end(self) -> None:
        """The stream ended before ``[DONE]``: it was cut off."""
        msg = "the endpoint's stream ended before it was done"
        raise ModelCallError(msg, cause_type=None)

    def _line(self, line: bytes) -> bytes | None:
        """Read one line: the event's data when it ends an event."""
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment: a server's keep-alive
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._type = value
        elif name not in _SKIPPED_FIELDS:
            raise _malformed()
        return None

    def _dispatch(self) -> bytes | None:
        data, kind = b"\n".join(self._data), self._type
        had_data = bool(self._data)
        self._data, self._type = [], b""
        if not had_data:
            return None
        if kind not in (b"", b"message"):
            msg = "the endpoint's stream sent an event other than a message (an error)"
            raise ModelCallError(msg, cause_type=None)
        if data == b"[DONE]":
            self.done = True
            return None
        return data


def _not_a_chunk() -> ModelCallError:
    msg = "the endpoint's stream is not of chat completion chunks"
    return ModelCallError(msg, cause_type=None)


class ChunkReader:
    """Each event of a streamed chat completion as a :class:`~evidence_first.ModelDelta`.

    Each part is checked by its type before it is read, as a whole reply's are; the
    log-probability entries kept are bounded by ``limits`` over the whole stream, and more are
    a last piece with ``over_limit="logprob_entries"``.
    """

    def __init__(self, limits: ReplyLimits) -> None:
        self._limits = limits
        self._entries = 0

    def read(self, data: bytes) -> ModelDelta | None:
        """The event's delta, or ``None`` if it carries nothing (a role, an empty chunk).

        Raises:
            ModelCallError: The event is no chat completion chunk, or reports an error.
        """
        chunk = decoded(data)
        if not isinstance(chunk, dict):
            raise _not_a_chunk()
        if chunk.get("error") is not None:
            msg = "the endpoint's stream reported an error"
            raise ModelCallError(msg, cause_type=None)
        choice, delta = _choice(chunk.get("choices"))
        text = delta.get("content")
        if not isinstance(text, (str, type(None))):
            raise _not_a_chunk()
        # A refusal is no content: as in a whole reply, the ledger is judged without it.
        logprobs = self._logprobs(choice.get("logprobs"))
        if logprobs is OVER_LIMIT:
            return ModelDelta(over_limit="logprob_entries")
        calls = delta.get("tool_calls")
        finish_reason = choice.get("finish_reason")
        usage = chunk.get("usage")
        piece = ModelDelta(
            text=text or "",
            logprobs=logprobs if isinstance(logprobs, tuple) else None,
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            usage=reply_usage(usage) if isinstance(usage, dict) else None,
            tool_calls=tuple(calls) if isinstance(calls, list) else (calls,) if calls else (),
        )
        return None if piece == _NOTHING else piece

    def _logprobs(self, logprobs: object) -> tuple[TokenLogprob, ...] | object | None:
        if not self._limits.alternatives:
            return None  # none were asked for: none are read
        tokens = self._limits.tokens - self._entries
        read = logprob_entries(logprobs, tokens=tokens, alternatives=self._limits.alternatives)
        if isinstance(read, tuple):
            self._entries += len(read)
        return read


_NOTHING = ModelDelta()


def _choice(choices: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chunk's first choice and its delta; none at all in a usage chunk (``[]`` or ``null``)."""
    if choices is None or choices == []:
        return {}, {}
    choice = choices[0] if isinstance(choices, list) else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(delta, (dict, type(None))):
        raise _not_a_chunk()
    return choice, delta or {}


def read_deltas(
    http_request: urllib.request.Request, request: ModelRequest
) -> Iterator[ModelDelta]:
    """Post ``http_request`` and yield its streamed reply's pieces as they arrive.

    Read within :func:`stream_limit`: past it the connection is closed and the last piece has
    ``over_limit="reply_bytes"``. ``request.timeout`` bounds the whole stream, and
    ``request.cancel`` (set when the engine stops waiting, or its iterator is closed) closes
    the connection; so does closing this iterator.

    Raises:
        ModelCallError: An HTTP error status, a redirect (never followed), a failed connection,
            a stream that broke off, is malformed or reports an error.
        TimeoutError: The stream did not end within ``request.timeout``.
        AnswerCancelledError: ``request.cancel`` was set before it ended.
    """
    chunks = ChunkReader(reply_limits(request))
    events = read_stream(http_request, request, stream_limit(request), EventReader())
    counted = False
    with contextlib.closing(events):  # closed on any exit: the connection with it
        for data in events:
            piece = ModelDelta(over_limit="reply_bytes") if data is None else chunks.read(data)
            if piece is not None:
                counted = counted or piece.usage is not None
                yield piece
                if piece.over_limit is not None:
                    return
    if not counted:
        # As a whole reply without ``usage`` reads: counts, each unknown.
        yield ModelDelta(usage=reply_usage(None))
