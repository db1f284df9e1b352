"""The model call, attacked from the wire and from the callback: bounded, on time, no payload.

A fake OpenAI-compatible server on 127.0.0.1 sends what a hostile or broken provider would: a
78 MB log-probabilities payload once took 11.3 s and 1.35 GB, a server writing one byte at a
time kept the worker thread and its socket alive after the timeout, and a malformed ``usage``
put the provider's payload on the chain of the ``ModelCallError``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evidence_first import (
    AnswerTimeoutError,
    Evidence,
    ModelCallError,
    ModelRequest,
    aanswer_from_evidence,
    answer_from_evidence,
)
from evidence_first.chat_completions import ChatCompletionsModel

SOURCE = Evidence(id="notes", text="Standup, June 11. The launch moved to June 15. Ana owns it.")
QUESTION = "When did the launch move?"
LEDGER = json.dumps(
    {
        "facts": [
            {
                "subject": "the launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "notes", "quote": "The launch moved to June 15."}],
            }
        ],
        "answer": "June 15 [F1].",
        "inference": None,
        "missing_evidence": [],
    }
)
SECRET = "sk-payload-TOPSECRET-0451"
MB = 1 << 20


class RawServer:
    """A one-connection-at-a-time HTTP server on 127.0.0.1 that writes what ``respond`` yields.

    It records how many bytes it managed to send, and when the client closed the connection.
    """

    def __init__(self, respond: Callable[[], Iterator[bytes]]) -> None:
        self.respond = respond
        self.sent = 0
        self.closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _serve(self) -> None:
        with self._listener:
            connection, _ = self._listener.accept()
        with connection:
            self._read_request(connection)
            try:
                for part in self.respond():
                    if self._stop.is_set():
                        return
                    connection.sendall(part)
                    self.sent += len(part)
            except OSError:
                self.closed.set()
                return
            # Everything written: wait for the client to close its end.
            connection.settimeout(10)
            try:
                while connection.recv(65536):
                    pass
            except OSError:
                pass
            self.closed.set()

    @staticmethod
    def _read_request(connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        while len(body) < length:
            body += connection.recv(65536)


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[], Iterator[bytes]]], RawServer]]:
    servers: list[RawServer] = []

    def start(respond: Callable[[], Iterator[bytes]]) -> RawServer:
        servers.append(RawServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _head(length: int | None = None) -> bytes:
    lines = ["HTTP/1.0 200 OK", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _logprobs_payload(entries: int, alternatives: int = 1) -> bytes:
    top = [{"token": "x", "logprob": -0.1}] * alternatives
    content = [{"token": "x", "logprob": -0.1, "top_logprobs": top}] * entries
    return json.dumps(
        {
            "choices": [
                {
                    "message": {"role": "assistant", "content": LEDGER},
                    "finish_reason": "stop",
                    "logprobs": {"content": content},
                }
            ]
        }
    ).encode()


# "Transports bound what they read: a reply body, log-probabilities included, is read only up
# to a documented limit derived from `max_response_chars`, `max_tokens` and the number of top
# log-probabilities asked for, and the log-probability entries kept are bounded likewise. Past
# the limit the call fails closed as `response_too_large`, and the connection is closed."
# (DESIGN, "Model contract and failures"; docs/providers.md, "What ChatCompletionsModel reads")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-closed"])
def test_a_reply_past_the_read_limit_fails_closed_and_is_not_read_further(raw_server, declared):
    body = _logprobs_payload(400_000)  # about 40 MB of log-probabilities
    assert len(body) > 30 * MB

    def respond() -> Iterator[bytes]:
        yield _head(len(body) if declared else None)
        for start in range(0, len(body), MB):
            yield body[start : start + MB]

    server = raw_server(respond)
    model = ChatCompletionsModel(server.url, logprobs=True)
    started = time.monotonic()
    answer = answer_from_evidence(QUESTION, [SOURCE], model, timeout=30)
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("response_too_large",)
    assert answer.raw_response == ""
    assert time.monotonic() - started < 10
    assert server.closed.wait(5)
    assert server.sent < len(body) / 2  # the rest was never read


@pytest.mark.parametrize("shape", [(64, 1), (4, 11)], ids=["tokens", "alternatives"])
def test_more_log_probability_entries_than_asked_for_fail_closed(raw_server, shape):
    body = _logprobs_payload(*shape)
    server = raw_server(lambda: iter([_head(len(body)), body]))
    model = ChatCompletionsModel(server.url, logprobs=True)
    answer = answer_from_evidence(QUESTION, [SOURCE], model, max_output_tokens=16)
    assert answer.reason_codes == ("response_too_large",)


def _model_call_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "evidence-first-model-call"}


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_after_the_timeout_no_thread_or_socket_is_left_reading_a_trickle(raw_server, phase):
    # "The engine stops waiting at `timeout` [...] even if the model ignores its
    # cancellation" (docs/security.md); our own transport does not ignore it.
    def respond() -> Iterator[bytes]:
        trickle = b"X-Slow: " if phase == "headers" else _head(1000) + b"{"
        yield trickle
        for _ in range(600):  # a byte every 50 ms, for 30 s
            time.sleep(0.05)
            yield b" "

    before = _model_call_threads()
    server = raw_server(respond)
    model = ChatCompletionsModel(server.url)
    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence(QUESTION, [SOURCE], model, timeout=0.5)
    assert server.closed.wait(2), "the connection was left open"
    deadline = time.monotonic() + 2
    while _model_call_threads() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _model_call_threads() - before, "the worker thread was left reading"


# "A model exception raises `ModelCallError`. The cause is chained, but no provider payload or
# evidence goes into the message." and "no error message and no log line of ours carries [...]
# a provider payload" (DESIGN; docs/security.md): nor may the exception's chain.

MALFORMED: dict[str, Any] = {
    "usage": {"choices": [{"message": {"content": LEDGER}}], "usage": SECRET},
    "usage counts": {
        "choices": [{"message": {"content": LEDGER}}],
        "usage": {"prompt_tokens": SECRET, "completion_tokens": [SECRET]},
    },
    "usage details": {
        "choices": [{"message": {"content": LEDGER}}],
        "usage": {"prompt_tokens_details": SECRET},
    },
    "choices": {"choices": SECRET},
    "message": {"choices": [{"message": SECRET}]},
    "content": {"choices": [{"message": {"content": {"text": SECRET}}}]},
    "tool calls": {"choices": [{"message": {"content": LEDGER, "tool_calls": 7}, "x": SECRET}]},
    "logprobs": {"choices": [{"message": {"content": LEDGER}, "logprobs": {"content": [SECRET]}}]},
    "not json": f'{{"choices": [{{"message": "{SECRET}"',
    "not utf-8": b'{"choices": "' + SECRET.encode() + b'\xff\xfe"}',
}


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend([current.__cause__, current.__context__])


@pytest.mark.parametrize("reply", MALFORMED, ids=list(MALFORMED))
def test_no_provider_payload_is_reachable_from_the_error(raw_server, reply):
    raw = MALFORMED[reply]
    body = raw if isinstance(raw, bytes) else (raw if isinstance(raw, str) else json.dumps(raw))
    body = body.encode() if isinstance(body, str) else body
    server = raw_server(lambda: iter([_head(len(body)), body]))
    model = ChatCompletionsModel(server.url, logprobs=True)
    error: ModelCallError | None = None
    try:
        answer = answer_from_evidence(QUESTION, [SOURCE], model)
    except ModelCallError as raised:
        error = raised
    else:
        # A malformed part read as none is no error: it never reaches the result either.
        assert SECRET not in json.dumps(answer.as_dict())
    if error is not None:
        for link in _chain(error):
            shown = [str(link), repr(link), *map(repr, link.args), repr(vars(link))]
            assert not any(SECRET in text for text in shown), type(link)
        assert SECRET not in "".join(traceback.format_exception(error))


# "Timeout raises `AnswerTimeoutError` [...] a late reply is never judged" (DESIGN; docs).


async def test_an_async_reply_that_comes_after_the_deadline_is_not_judged():
    class Blocking:
        async def agenerate(self, request: ModelRequest) -> str:
            time.sleep(1.5)  # holds the event loop past the deadline
            return LEDGER

    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        await aanswer_from_evidence(QUESTION, [SOURCE], Blocking(), timeout=0.3)
    assert time.monotonic() - started < 3


def test_a_sync_reply_that_comes_after_the_deadline_is_not_judged():
    class Late:
        def generate(self, request: ModelRequest) -> str:
            time.sleep(0.6)
            return LEDGER

    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence(QUESTION, [SOURCE], Late(), timeout=0.3)


# "Cancellation raises `AnswerCancelledError` for sync calls and `asyncio.CancelledError` for
# async calls" when the caller cancels (DESIGN): a model that cancels itself is a failed call.


async def test_an_async_model_raising_cancelled_error_by_itself_is_a_model_call_error():
    class Cancelling:
        async def agenerate(self, request: ModelRequest) -> str:
            raise asyncio.CancelledError

    with pytest.raises(ModelCallError):
        await aanswer_from_evidence(QUESTION, [SOURCE], Cancelling())
    # The caller's own task was cancelled by no one, and goes on.
    await asyncio.sleep(0)


def test_a_sync_model_raising_cancelled_error_by_itself_is_a_model_call_error():
    class Cancelling:
        def generate(self, request: ModelRequest) -> str:
            raise asyncio.CancelledError

    with pytest.raises(ModelCallError):
        answer_from_evidence(QUESTION, [SOURCE], Cancelling())
