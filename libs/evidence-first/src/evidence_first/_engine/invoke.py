"""Calls the reader model exactly once, bounded by a timeout and the caller's cancellation.

A sync callback runs on a daemon worker thread so the engine can stop waiting even when the
callback ignores ``request.cancel``; an async-only model used from the sync entry point runs on
its own event loop in that thread. The caller's context variables (tracing) travel with it.
A streamed call (the model's ``stream``/``astream``) is bounded the same way, as a whole: its
pieces come through a queue from that thread, and closing the stream cancels the call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import socket
import ssl
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from typing import Any

from pydantic import ValidationError

from evidence_first._models.strict import connection_failure
from evidence_first._shapes.errors import (
    AnswerCancelledError,
    AnswerTimeoutError,
    EvidenceFirstError,
    ModelCallError,
)
from evidence_first._shapes.model import ModelDelta, ModelRequest, ModelResponse, TokenLogprob
from evidence_first._shapes.parts import TokenUsage

__all__ = [
    "after_planning",
    "astream_model",
    "call_model",
    "call_model_async",
    "has_async",
    "has_stream",
    "has_sync",
    "merged",
    "stream_model",
    "within_deadline",
]

# How often a sync wait checks the caller's cancel event.
_CANCEL_POLL_SECONDS = 0.02
# The errors a callback may raise as they are: our transports word them without payloads.
_SAFELY_WORDED = (ModelCallError, AnswerTimeoutError, AnswerCancelledError)


def has_sync(model: object) -> bool:
    """Whether ``model`` has a callable ``generate``."""
    return callable(getattr(model, "generate", None))


def has_async(model: object) -> bool:
    """Whether ``model`` has a callable ``agenerate``."""
    return callable(getattr(model, "agenerate", None))


def has_stream(model: object) -> bool:
    """Whether ``model`` streams: a callable ``stream`` or ``astream``."""
    return callable(getattr(model, "stream", None)) or callable(getattr(model, "astream", None))


def call_model(
    model: object, request: ModelRequest, *, cancel: threading.Event | None
) -> ModelResponse:
    """Call ``model`` once from synchronous code and return its normalized response.

    Raises:
        AnswerTimeoutError: No answer within ``request.timeout``, or the client timed out.
        AnswerCancelledError: ``cancel`` was set before the model answered.
        ModelCallError: The callback raised or returned something other than a response.
    """
    if cancel is not None and cancel.is_set():
        msg = "the answer was cancelled before the model was called"
        raise AnswerCancelledError(msg)
    worker = _Worker(model, request)
    worker.start()
    deadline = time.monotonic() + request.timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            worker.abandon()
            raise _timeout_error(request.timeout)
        wait = remaining if cancel is None else min(remaining, _CANCEL_POLL_SECONDS)
        done = worker.done.wait(wait)
        # The deadline is checked after every wait: a reply that came after it is never used.
        if time.monotonic() > deadline:
            worker.abandon()
            raise _timeout_error(request.timeout)
        if done:
            break
        if cancel is not None and cancel.is_set():
            worker.abandon()
            msg = "the answer was cancelled while waiting for the model"
            raise AnswerCancelledError(msg)
    if worker.error is not None:
        raise _call_error(worker.error, request.timeout) from worker.error
    return _normalize(worker.result)


async def call_model_async(model: object, request: ModelRequest) -> ModelResponse:
    """Call ``model`` once from async code and return its normalized response.

    The call runs as its own task, and the engine stops waiting at the deadline even if the
    model swallows its cancellation: the task is cancelled and left behind, and whatever it
    returns late is never judged, even when a model that held the event loop past the deadline
    hands it back at once. Cancelling the awaiting task does the same, sets ``request.cancel``
    and propagates :class:`asyncio.CancelledError`; a model that raises
    :class:`asyncio.CancelledError` by itself, with the caller's task cancelled by no one, has
    failed, as it has on the sync path.

    Raises:
        AnswerTimeoutError: No answer within ``request.timeout``, or the client timed out.
        ModelCallError: The callback raised or returned something other than a response.
    """
    deadline = time.monotonic() + request.timeout
    if has_async(model):
        call = asyncio.ensure_future(_await_agenerate(model, request))
    else:
        call = asyncio.ensure_future(_await_worker(_Worker(model, request), request.timeout))
    try:
        done, _ = await asyncio.wait({call}, timeout=request.timeout)
    except asyncio.CancelledError:
        _leave_behind(call, request)
        raise
    if not done or time.monotonic() > deadline:
        _leave_behind(call, request)
        raise _timeout_error(request.timeout)
    if call.cancelled():
        # Nothing cancelled the caller (its wait returned): the model cancelled itself.
        msg = "the model call was cancelled by the model itself"
        raise ModelCallError(msg, cause_type="asyncio.CancelledError")
    try:
        result = call.result()
    except _SAFELY_WORDED:
        raise
    except Exception as exc:
        raise _call_error(exc, request.timeout) from exc
    return _normalize(result)


def _leave_behind(call: asyncio.Future[object], request: ModelRequest) -> None:
    """Stop waiting for a call: signal and cancel it, and drop whatever it ends with."""
    request.cancel.set()
    call.cancel()
    call.add_done_callback(_drop_outcome)


def _drop_outcome(call: asyncio.Future[object]) -> None:
    # Retrieving the exception keeps asyncio from reporting it as never retrieved.
    if not call.cancelled():
        call.exception()


async def _await_agenerate(model: object, request: ModelRequest) -> object:
    agenerate: Callable[[ModelRequest], Any] = model.agenerate  # type: ignore[attr-defined]
    return await agenerate(request)


async def _await_worker(worker: _Worker, timeout: float) -> object:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    def notify() -> None:
        # The loop may have closed while an abandoned callback was still running.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake)

    worker.on_done = notify
    worker.start()
    try:
        await future
    except asyncio.CancelledError:
        worker.abandon()
        raise
    if worker.error is not None:
        raise _call_error(worker.error, timeout) from worker.error
    return worker.result


class _OnThread:
    """A model call on a daemon thread of its own, that the engine may stop waiting for.

    The caller's context variables (tracing) travel with it; an async model runs on the
    thread's own event loop, and stopping cancels its task there.
    """

    _thread_name = "evidence-first-model-call"

    def __init__(self, model: object, request: ModelRequest) -> None:
        self._model = model
        self._request = request
        self._context = contextvars.copy_context()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        thread.start()

    def abandon(self) -> None:
        """Stop waiting: signal the model, and cancel it if it runs on our event loop."""
        self._request.cancel.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)

    def _on_loop(self) -> None:
        """Note the thread's event loop and task, for :meth:`abandon` to cancel."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()

    def _run(self) -> None:
        raise NotImplementedError


class _Worker(_OnThread):
    """Runs one model call on a daemon thread and records its outcome."""

    def __init__(self, model: object, request: ModelRequest) -> None:
        super().__init__(model, request)
        self.done = threading.Event()
        self.on_done: Callable[[], None] | None = None
        self.result: object = None
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.result = self._context.run(self._call)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()
            if self.on_done is not None:
                self.on_done()

    def _call(self) -> object:
        if has_sync(self._model):
            return self._model.generate(self._request)  # type: ignore[attr-defined]
        return asyncio.run(self._call_async())

    async def _call_async(self) -> object:
        self._on_loop()
        if self._request.cancel.is_set():
            raise asyncio.CancelledError
        return await _await_agenerate(self._model, self._request)


def within_deadline(
    call: Callable[[], Any], deadline: float, timeout: float, cancel: threading.Event | None
) -> Any:
    """Run a caller-supplied callable (the embedder) on a daemon thread, until ``deadline``.

    What it raises propagates as it is, as a token counter's does; the engine stops waiting at
    the deadline (``AnswerTimeoutError``) or when ``cancel`` is set (``AnswerCancelledError``),
    even if the callable ignores both.
    """
    done = threading.Event()
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["result"] = context.run(call)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="evidence-first-embedder", daemon=True).start()
    while not done.wait(_waited(deadline, cancel)):
        if time.monotonic() >= deadline:
            msg = f"the embedder and the model did not answer within {timeout:g} s"
            raise AnswerTimeoutError(msg, timeout=timeout)
        if cancel is not None and cancel.is_set():
            msg = "the answer was cancelled while the embedder ran"
            raise AnswerCancelledError(msg)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _waited(deadline: float, cancel: threading.Event | None) -> float:
    remaining = max(deadline - time.monotonic(), 0.0)
    return remaining if cancel is None else min(remaining, _CANCEL_POLL_SECONDS)


def after_planning(request: ModelRequest, deadline: float) -> ModelRequest:
    """``request`` with what is left of a deadline that counted from the entry point.

    Raises:
        AnswerTimeoutError: Nothing is left: the model is not called.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        msg = f"the embedder and the model did not answer within {request.timeout:g} s"
        raise AnswerTimeoutError(msg, timeout=request.timeout)
    return dataclasses.replace(request, timeout=remaining)


def _normalize(result: object) -> ModelResponse:
    if isinstance(result, ModelResponse):
        return result
    if isinstance(result, str):
        return ModelResponse(text=result)
    msg = f"the model returned {type(result).__name__}; expected ModelResponse or str"
    raise ModelCallError(msg, cause_type=None)


def _timeout_error(timeout: float) -> AnswerTimeoutError:
    return AnswerTimeoutError(f"the model did not answer within {timeout:g} s", timeout=timeout)


def _call_error(exc: BaseException, timeout: float) -> EvidenceFirstError:
    """Map a callback's exception to ours, without repeating its message (it may hold payloads).

    Only the errors our own transports raise, worded without payloads, pass through; any
    other, an ``InvalidRequestError`` a callback raised included, becomes ``ModelCallError``.
    """
    if isinstance(exc, _SAFELY_WORDED):
        return exc
    if _is_timeout(exc):
        return _timeout_error(timeout)
    cause_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
    if isinstance(exc, ValidationError):
        msg = "the model returned an invalid ModelResponse"
    else:
        msg = f"the model call failed with {type(exc).__qualname__}"
        unreachable = next((err for err in _chain(exc) if isinstance(err, _UNREACHABLE)), None)
        if unreachable is not None:
            msg += f": {connection_failure(unreachable)}"
    return ModelCallError(msg, cause_type=cause_type)


# What a client's connection error was raised from when the endpoint could not be reached,
# worded as the CLI words it (a bare ConnectionError says no more than its name).
_UNREACHABLE = (ConnectionRefusedError, socket.gaierror, ssl.SSLError)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_timeout(exc: BaseException) -> bool:
    """Whether the exception, or one it was raised from, is a client timeout.

    Provider clients do not share a base class: httpx raises ``ReadTimeout``, openai raises
    ``APITimeoutError``, requests raises ``Timeout``. So a class named like a timeout counts.
    """
    return any(
        isinstance(current, TimeoutError)
        or any("Timeout" in cls.__name__ for cls in type(current).__mro__)
        for current in _chain(exc)
    )


# --- streamed calls ---

_END = object()  # a stream's end, put in its queue after its last piece


class _Failed:
    """A stream's failure, put in its queue."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def stream_model(
    model: object, request: ModelRequest, *, cancel: threading.Event | None
) -> Generator[ModelDelta | ModelResponse, None, None]:
    """Call ``model`` once from synchronous code, yielding its reply's pieces as they come.

    A model that streams (``stream``, or ``astream`` on an event loop of the worker thread's)
    yields :class:`ModelDelta` pieces; one that does not is called once with ``generate`` and
    yields its one :class:`ModelResponse`. Pieces that arrived while the last was being read
    come as one (the reply is the same, cut otherwise). The timeout bounds the whole stream.
    Closing the iterator (or leaving it) cancels the call: ``request.cancel`` is set, and the
    worker stops at the model's next piece.

    Raises:
        AnswerTimeoutError: The stream did not end within ``request.timeout``.
        AnswerCancelledError: ``cancel`` was set before it ended.
        ModelCallError: The model raised, or yielded something other than a piece.
    """
    if not has_stream(model):
        yield call_model(model, request, cancel=cancel)
        return
    if cancel is not None and cancel.is_set():
        msg = "the answer was cancelled before the model was called"
        raise AnswerCancelledError(msg)
    worker = _StreamWorker(model, request)
    worker.start()
    deadline = time.monotonic() + request.timeout
    ended = False
    try:
        while True:
            items = _waiting_pieces(worker, deadline, request.timeout, cancel)
            ended = items[-1] is _END
            pieces = items[:-1] if ended else items
            if pieces:
                yield merged(pieces)
            if ended:
                return
    finally:
        if not ended:
            worker.abandon()


def _waiting_pieces(
    worker: _StreamWorker, deadline: float, timeout: float, cancel: threading.Event | None
) -> list[object]:
    """Every item the stream has passed on since the last call, waiting for the first.

    Waits no later than ``deadline`` and while not cancelled; ends at the stream's end or at
    a failure (raised, once the pieces before it are read).
    """
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout_error(timeout)
        wait = remaining if cancel is None else min(remaining, _CANCEL_POLL_SECONDS)
        items = worker.pieces.take(wait)
        # The deadline is checked after every wait: a piece that came after it is never used.
        if time.monotonic() > deadline:
            raise _timeout_error(timeout)
        if cancel is not None and cancel.is_set():
            msg = "the answer was cancelled while the model was answering"
            raise AnswerCancelledError(msg)
        # A failure or the end is the last item the worker passes on.
        if items and isinstance(items[-1], _Failed):
            if len(items) > 1:
                worker.pieces.put_back(items[-1:])
                return items[:-1]
            raise _call_error(items[-1].error, timeout) from items[-1].error
        if items:
            return items


def merged(pieces: list[object]) -> ModelDelta:
    """Pieces of a stream, in order, as one: their texts and tokens joined, what ends it kept.

    Raises:
        ModelCallError: A piece is neither a :class:`ModelDelta` nor a ``str``.
    """
    if len(pieces) == 1:
        return _piece(pieces[0])
    try:
        return ModelDelta(text="".join(pieces))  # type: ignore[arg-type]
    except TypeError:
        pass  # not all text: some are deltas (or something else, refused below)
    return _joined([_piece(piece) for piece in pieces])


def _joined(deltas: list[ModelDelta]) -> ModelDelta:
    """Deltas as one: texts and tokens joined, the last finish reason and usage given kept.

    A piece at which a transport stopped reading ends them: what follows it is not read.
    """
    texts: list[str] = []
    tokens: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    calls: list[Any] = []
    for delta in deltas:
        if delta.over_limit is not None:
            return ModelDelta(over_limit=delta.over_limit)
        texts.append(delta.text)
        if delta.logprobs is not None:
            tokens = [*(tokens or ()), *delta.logprobs]
        finish_reason = delta.finish_reason or finish_reason
        usage = delta.usage or usage
        calls += delta.tool_calls
    return ModelDelta(
        text="".join(texts),
        logprobs=None if tokens is None else tuple(tokens),
        finish_reason=finish_reason,
        usage=usage,
        tool_calls=tuple(calls),
    )


class _Pieces:
    """What a stream's thread passes on: taken all at once, the first waited for.

    A deque and an event rather than a queue: one thread appends, one takes, and taking
    what waits costs no lock per piece.
    """

    def __init__(self) -> None:
        self._items: collections.deque[object] = collections.deque()
        self._ready = threading.Event()

    def put(self, item: object) -> None:
        self._items.append(item)
        # Setting an event takes its lock: only when the taker may be waiting. An item put
        # while the event is still set is taken with what the taker finds after clearing it.
        if not self._ready.is_set():
            self._ready.set()

    def put_back(self, items: list[object]) -> None:
        self._items.extendleft(reversed(items))
        self._ready.set()

    def take(self, timeout: float) -> list[object]:
        """Every item waiting, or none if none came within ``timeout``."""
        if not self._items:
            self._ready.wait(timeout)
        self._ready.clear()
        take = self._items.popleft
        return [take() for _ in range(len(self._items))]


async def astream_model(
    model: object, request: ModelRequest
) -> AsyncGenerator[ModelDelta | ModelResponse, None]:
    """Async :func:`stream_model`: ``astream`` on this loop, or ``stream`` on a worker thread.

    Cancelling the iterating task cancels the call and propagates
    :class:`asyncio.CancelledError`; closing the iterator cancels it too.

    Raises:
        AnswerTimeoutError: The stream did not end within ``request.timeout``.
        ModelCallError: The model raised, or yielded something other than a piece.
    """
    if not has_stream(model):
        yield await call_model_async(model, request)
        return
    deadline = time.monotonic() + request.timeout
    if callable(getattr(model, "astream", None)):
        pieces: AsyncIterator[object] = model.astream(request)  # type: ignore[attr-defined]
    else:
        pieces = _bridged(_StreamWorker(model, request))
    ended = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout_error(request.timeout)
            # asyncio.wait, not wait_for: wait_for may return a piece that came with the
            # caller's cancellation and drop the cancellation (before Python 3.12).
            step = asyncio.ensure_future(pieces.__anext__())
            try:
                done, _ = await asyncio.wait({step}, timeout=remaining)
            except asyncio.CancelledError:
                step.cancel()
                raise
            if not done:
                step.cancel()
                raise _timeout_error(request.timeout)
            try:
                item = step.result()
            except StopAsyncIteration:
                ended = True
                return
            except _SAFELY_WORDED:
                raise
            except Exception as exc:
                raise _call_error(exc, request.timeout) from exc
            if time.monotonic() > deadline:
                raise _timeout_error(request.timeout)
            yield _piece(item)
    finally:
        if not ended:
            request.cancel.set()
        with contextlib.suppress(Exception):
            await pieces.aclose()  # type: ignore[attr-defined]


async def _bridged(worker: _StreamWorker) -> AsyncIterator[object]:
    """A sync stream's pieces, from its worker thread, on this event loop."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[object] = asyncio.Queue()
    worker.on_piece = lambda item: _put_threadsafe(loop, pieces, item)
    worker.start()
    ended = False
    try:
        while True:
            item = await pieces.get()
            if item is _END:
                ended = True
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        if not ended:
            worker.abandon()


def _put_threadsafe(
    loop: asyncio.AbstractEventLoop, pieces: asyncio.Queue[object], item: object
) -> None:
    # The loop may have closed while an abandoned stream was still running.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(pieces.put_nowait, item)


def _piece(item: object) -> ModelDelta:
    if isinstance(item, ModelDelta):
        return item
    if isinstance(item, str):
        return ModelDelta(text=item)
    msg = f"the model's stream yielded {type(item).__name__}; expected ModelDelta or str"
    raise ModelCallError(msg, cause_type=None)


class _StreamWorker(_OnThread):
    """Runs one streamed model call on a daemon thread and passes on each piece."""

    _thread_name = "evidence-first-model-stream"

    def __init__(self, model: object, request: ModelRequest) -> None:
        super().__init__(model, request)
        self.pieces = _Pieces()
        self.on_piece: Callable[[object], None] = self.pieces.put

    def _run(self) -> None:
        try:
            self._context.run(self._pump)
        except BaseException as exc:
            self.on_piece(_Failed(exc))
        else:
            self.on_piece(_END)

    def _pump(self) -> None:
        stream = getattr(self._model, "stream", None)
        if not callable(stream):
            asyncio.run(self._pump_async())
            return
        pieces = stream(self._request)
        try:
            for item in pieces:
                if self._request.cancel.is_set():
                    break
                self.on_piece(item)
        finally:
            close = getattr(pieces, "close", None)
            if callable(close):
                close()

    async def _pump_async(self) -> None:
        self._on_loop()
        pieces = self._model.astream(self._request)  # type: ignore[attr-defined]
        try:
            async for item in pieces:
                if self._request.cancel.is_set():
                    break
                self.on_piece(item)
        finally:
            with contextlib.suppress(Exception):
                await pieces.aclose()
