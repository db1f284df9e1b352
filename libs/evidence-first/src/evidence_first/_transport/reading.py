"""A reply read within limits, and given up on when the engine stops waiting.

:func:`read_reply` posts one request, follows no redirect, and reads the reply, its status
line and headers included, only up to :func:`reply_limits`, derived from the request (its
``max_response_chars``, ``max_tokens`` and the log-probabilities it asks for). Past the limit
it stops and the connection is closed. A watch shuts the call's sockets when ``request.cancel``
is set or ``request.timeout`` passes, however slowly the server writes, so no worker thread or
socket outlives the wait. :func:`read_stream` is the same exchange for a reply read as it
arrives, handed to a parser (a streamed reply's server-sent events,
:mod:`evidence_first._transport.sse`), the watch running while its caller holds the iterator.
No exception either raises carries the reply's bytes, as a message, a cause or a context
(:mod:`evidence_first._transport.stated` reads what the reply states).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from evidence_first._models.strict import TOP_LOGPROBS, connection_failure
from evidence_first._shapes.errors import AnswerCancelledError, ModelCallError
from evidence_first._shapes.model import ModelRequest
from evidence_first._transport.stated import reply_count, status_failure

__all__ = [
    "REPLY_BYTES_PER_CHAR",
    "REPLY_BYTES_PER_LOGPROB",
    "REPLY_BYTES_PER_TOKEN",
    "REPLY_ENVELOPE_BYTES",
    "ReplyLimits",
    "StreamParser",
    "read_reply",
    "read_stream",
    "reply_limits",
]


@dataclass(frozen=True)
class ReplyLimits:
    """What :class:`ChatCompletionsModel` reads of one reply at most (:func:`reply_limits`).

    Attributes:
        bytes: The reply's bytes, its status line and headers included.
        tokens: The log-probability entries: one per output token.
        alternatives: The most likely tokens kept at each position (0: no log-probabilities
            were asked for, and none are read).
    """

    bytes: int
    tokens: int
    alternatives: int


# What a reply may spend, in bytes: its envelope (the status line and headers, IDs, model
# name, usage, the keys); each character of the message text, JSON-escaped at worst (one
# astral character is twelve bytes, "\ud83d\ude80"); each output token's text outside the
# message (reasoning), escaped; and each log-probability entry (its token, its bytes as a
# list of numbers, its log-probability, the keys), measured at 60 to 80 bytes on llama.cpp and
# OpenAI replies and allowed 256.
REPLY_ENVELOPE_BYTES = 65_536
REPLY_BYTES_PER_CHAR = 12
REPLY_BYTES_PER_TOKEN = 96
REPLY_BYTES_PER_LOGPROB = 256


def reply_limits(request: ModelRequest) -> ReplyLimits:
    """The limits of one reply, derived from ``request``.

    ``bytes`` is ``REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_CHAR * max_response_chars +
    max_tokens * (REPLY_BYTES_PER_TOKEN + (1 + top) * REPLY_BYTES_PER_LOGPROB)``, where ``top``
    is the number of most likely tokens asked for (:data:`TOP_LOGPROBS` when the request asks
    for log-probabilities, else 0 and no entry at all); entries are at most ``max_tokens``
    tokens of at most ``top`` alternatives each. With the defaults (32,768 characters, 2,048
    tokens, 10 alternatives) 6.4 MB, 0.7 MB without log-probabilities; at the options' largest
    (131,072 and 8,192) 25.5 MB.
    """
    top = TOP_LOGPROBS if request.logprobs else 0
    per_token = REPLY_BYTES_PER_TOKEN + ((1 + top) * REPLY_BYTES_PER_LOGPROB if top else 0)
    return ReplyLimits(
        bytes=REPLY_ENVELOPE_BYTES
        + REPLY_BYTES_PER_CHAR * request.max_response_chars
        + request.max_tokens * per_token,
        tokens=request.max_tokens if top else 0,
        alternatives=top,
    )


# How often the watch looks at the request's cancel event while a reply is awaited.
_WATCH_SECONDS = 0.05
_CHUNK_BYTES = 65_536
_TIMED_OUT = object()
_ENDED = object()
_PARSED = object()
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _Sockets:
    """The sockets one call connects, for its watch to shut, and what their reply may spend.

    Attributes:
        limit: The reply's bytes at most, its status line and headers included.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._shut = False

    def connect(self, *args: Any, **kwargs: Any) -> socket.socket:
        """``socket.create_connection``, the socket kept (and shut at once if already due)."""
        sock = socket.create_connection(*args, **kwargs)
        with self._lock:
            self._open.append(sock)
            if self._shut:
                _shut(sock)
        return sock

    def shut(self) -> None:
        """Shut every socket: a read blocked on one returns at once, whatever the server does."""
        with self._lock:
            self._shut = True
            for sock in self._open:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket's, TLS or not


class _Watch:
    """Shuts a call's sockets when the engine stops waiting or the timeout passes.

    A server that writes one byte at a time never lets a read time out; only closing the
    connection stops it. The watch runs on its own daemon thread while the call runs.
    """

    def __init__(self, request: ModelRequest, sockets: _Sockets) -> None:
        self._request = request
        self._sockets = sockets
        self._deadline = time.monotonic() + request.timeout
        self._done = threading.Event()
        self.stopped: Literal["cancel", "deadline"] | None = None

    def __enter__(self) -> _Watch:
        name = "evidence-first-reply-watch"
        threading.Thread(target=self._run, name=name, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()

    def _run(self) -> None:
        while not self._done.wait(min(_WATCH_SECONDS, max(0.0, self._deadline - time.monotonic()))):
            if self._request.cancel.is_set():
                self.stopped = "cancel"
            elif time.monotonic() >= self._deadline:
                self.stopped = "deadline"
            else:
                continue
            self._sockets.shut()
            return


class _OverLimit(Exception):
    """The reply passed its byte limit: raised by its reader, caught where it is read."""


class _Counted(io.RawIOBase):
    """A connection's reader that counts every byte of the reply, up to ``limit``."""

    def __init__(self, raw: io.RawIOBase, limit: int) -> None:
        super().__init__()
        self._raw = raw
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        read = self._raw.readinto(buffer)
        self._left -= read or 0
        if self._left < 0:
            raise _OverLimit
        return read

    def close(self) -> None:
        self._raw.close()
        super().close()


def _counted(limit: int) -> type[http.client.HTTPResponse]:
    """http.client's response, read through :class:`_Counted`.

    The status line and headers count too: http.client alone lets them reach 100 lines of
    64 KiB each.
    """

    class Response(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            unread, self.fp = self.fp, io.BufferedReader(_Counted(sock.makefile("rb", 0), limit))
            unread.close()  # its socket stays open: the counted reader holds it

    return Response


def _opener(sockets: _Sockets) -> urllib.request.OpenerDirector:
    """An opener like urllib's (proxies, TLS) that follows no redirect and opens only HTTP(S).

    Its connections connect through ``sockets`` and read at most ``sockets.limit`` bytes of a
    reply.
    """
    response = _counted(sockets.limit)

    def tracked(connection_class: Any) -> Any:
        def connection(*args: Any, **kwargs: Any) -> Any:
            conn = connection_class(*args, **kwargs)
            # http.client connects (and proxies tunnel) through this attribute, set in
            # HTTPConnection.__init__ for tests to replace; each socket is then known to the
            # watch before any byte is read on it, the TLS handshake's included.
            conn._create_connection = sockets.connect
            conn.response_class = response
            return conn

        return connection

    class HTTP(urllib.request.HTTPHandler):
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            return super().do_open(tracked(http_class), req, **kwargs)

    class HTTPS(urllib.request.HTTPSHandler):
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            return super().do_open(tracked(http_class), req, **kwargs)

    # urllib's default handlers but its redirect handler, which would send a second request,
    # the key with it, wherever a 3xx points, and the ftp, file and data handlers a redirect
    # could reach: a 3xx is an HTTPError like any other status.
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        HTTP(),
        HTTPS(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class StreamParser(Protocol[T_co]):
    """What :func:`read_stream` hands a reply's body to, as it arrives.

    ``feed`` takes each chunk of the body and gives the items it completes (it may raise a
    ``ModelCallError`` on a malformed body, built of no reply byte); once ``done``, nothing more
    is read. ``end`` is called when the body ended before the parser was done, and raises if
    that cut it short.
    """

    @property
    def done(self) -> bool:
        """Whether the parser has read all it needs."""
        ...

    def feed(self, chunk: bytes) -> Iterable[T_co]:
        """The items ``chunk`` completes."""
        ...

    def end(self) -> None:
        """The body ended: raise if that is too early."""
        ...


def read_stream(
    http_request: urllib.request.Request,
    request: ModelRequest,
    limit: int,
    parser: StreamParser[T],
) -> Generator[T | None, None, None]:
    """Post ``http_request`` and yield the items ``parser`` reads of the reply as it arrives.

    The reply, its status line and headers included, is read up to ``limit`` bytes: past it the
    connection is closed and ``None`` is the last item. The watch runs while the caller holds
    the iterator, so ``request.timeout`` bounds the whole read and ``request.cancel`` stops it
    at any time; closing the iterator closes the connection.

    Raises:
        ModelCallError: An HTTP error status, a failed connection, a broken-off or malformed
            reply.
        TimeoutError: The reply did not end within ``request.timeout``.
        AnswerCancelledError: ``request.cancel`` was set before the reply ended.
    """
    sockets = _Sockets(limit)
    with _Watch(request, sockets) as watch:
        outcome = _open(_opener(sockets), http_request, request.timeout)
        if not _is_failure(outcome):
            with outcome as reply:  # closing the reply closes the connection (one request each)
                outcome = yield from _parsed(reply, limit, parser)
    # Each failure is raised here, after its handler ran: no exception of the exchange, which
    # may hold the reply's bytes, is reachable as a cause or a context.
    if watch.stopped == "cancel":
        msg = "the model call was cancelled while its reply was read"
        raise AnswerCancelledError(msg)
    if watch.stopped == "deadline" or outcome is _TIMED_OUT:
        msg = f"the endpoint did not reply within {request.timeout:g} s"
        raise TimeoutError(msg)
    if isinstance(outcome, ModelCallError):
        raise outcome
    if outcome is _ENDED:
        parser.end()
    if outcome is None:
        yield None


def _is_failure(outcome: object) -> bool:
    return outcome is None or outcome is _TIMED_OUT or isinstance(outcome, ModelCallError)


def _open(
    opener: urllib.request.OpenerDirector, http_request: urllib.request.Request, timeout: float
) -> Any:
    """Post and open the reply: the reply, ``None`` past the limit, or the failure.

    A failure is returned, never raised here, so that the caller raises it outside every
    handler: the exceptions caught below may hold the reply's bytes (a bad status line).
    """
    try:
        return opener.open(http_request, timeout=timeout)
    except _OverLimit:
        return None
    except urllib.error.HTTPError as exc:
        exc.close()  # the error holds the open response
        return status_failure(exc.code, exc.headers.get("Location"), http_request.full_url)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return _TIMED_OUT
        failure = connection_failure(exc.reason)
        return ModelCallError(
            f"the model call failed: {failure}", cause_type="urllib.error.URLError"
        )
    except (OSError, http.client.HTTPException) as exc:
        return _broken_off(exc)


def _parsed(reply: Any, limit: int, parser: StreamParser[T]) -> Generator[T, None, object]:
    """The items of the reply's body as it arrives; returns how reading ended.

    ``_ENDED`` (the body ended), ``_PARSED`` (the parser was done first), ``None`` (past
    ``limit``) or the failure, returned like :func:`_open`'s.
    """
    declared = reply.headers.get("Content-Length")
    length = None if declared is None else reply_count(declared)
    if declared is not None and length is None:
        msg = "the endpoint's reply has a malformed Content-Length"
        return ModelCallError(msg, cause_type=None)
    if length is not None and length > limit:
        return None
    while not parser.done:
        chunk = _chunk(reply)
        if not isinstance(chunk, bytes):
            return chunk
        if not chunk:
            return _ENDED
        yield from parser.feed(chunk)
    return _PARSED


def _chunk(reply: Any) -> bytes | ModelCallError | object | None:
    """The next bytes of the body: ``b""`` at its end, ``None`` past the limit, or a failure."""
    try:
        chunk: bytes = reply.read1(_CHUNK_BYTES)
    except _OverLimit:
        return None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return _broken_off(exc)
    return chunk


def _broken_off(exc: Exception) -> ModelCallError | object:
    """A failed read as its failure, named by its class alone: ``_TIMED_OUT`` for a timeout."""
    if isinstance(exc, TimeoutError):
        return _TIMED_OUT
    return ModelCallError(
        f"the endpoint's reply broke off ({type(exc).__name__})",
        cause_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
    )


class _Whole:
    """The body as one piece: what :func:`read_reply` reads."""

    done = False

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes) -> tuple[()]:
        self.parts.append(chunk)
        return ()

    def end(self) -> None:
        pass


def read_reply(
    http_request: urllib.request.Request, request: ModelRequest, limits: ReplyLimits
) -> bytes | None:
    """Post ``http_request`` and read the reply's body: its bytes, or ``None`` past the limit.

    Raises:
        ModelCallError: An HTTP error status, a failed connection or a broken-off reply.
        TimeoutError: No whole reply within ``request.timeout``.
        AnswerCancelledError: ``request.cancel`` was set before the reply was read.
    """
    whole = _Whole()
    past_limit = list(read_stream(http_request, request, limits.bytes, whole))  # [None] or []
    return None if past_limit else b"".join(whole.parts)
