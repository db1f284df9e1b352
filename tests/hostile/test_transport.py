"""The model call, attacked from the wire and from the callback: bounded, on time, no payload.

A fake OpenAI-compatible server on 127.0.0.1 sends what a hostile or broken provider would: a
78 MB log-probabilities payload once took 11.3 s and 1.35 GB, a server writing one byte at a
time kept the worker thread and its socket alive after the timeout, and a malformed ``usage``
put the provider's payload on the chain of the ``ModelCallError``. A redirect once sent a second
request, the bearer key with it, to the origin it named, and a redirect to ``ftp://`` opened a
socket no deadline closed.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support import RawServer

from evidence_first import (
    AnswerTimeoutError,
    Evidence,
    EvidenceAnswer,
    ModelCallError,
    ModelRequest,
    aanswer_from_evidence,
    answer_from_evidence,
    cli,
    stream_answer_from_evidence,
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


# "The HTTP transports send exactly one request and never follow a redirect: a 3xx is a
# `ModelCallError` naming its status, and nothing, credentials least of all, goes to another
# origin." (DESIGN, "Model contract and failures"); "One strict call. The model is called at
# most once" (docs/security.md); "one request, no retries" (docs/concepts.md).

KEY = "sk-bearer-TOPSECRET-7788"
COMPLETION = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": LEDGER}, "finish_reason": "stop"}]}
).encode()


def _redirect(status: int, location: bytes | None) -> Callable[[], Iterator[bytes]]:
    lines = [b"HTTP/1.0 %d Moved" % status, b"Content-Length: 0"]
    if location is not None:
        lines.append(b"Location: " + location)
    return lambda: iter([b"\r\n".join(lines) + b"\r\n\r\n"])


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_nothing_reaches_the_origin_it_names(raw_server, status):
    elsewhere = raw_server(lambda: iter([_head(len(COMPLETION)), COMPLETION]))
    endpoint = raw_server(_redirect(status, f"{elsewhere.origin}/collect?t={SECRET}".encode()))
    model = ChatCompletionsModel(endpoint.url, api_key=KEY)
    with pytest.raises(ModelCallError) as raised:
        answer_from_evidence(QUESTION, [SOURCE], model)
    message = str(raised.value)
    assert f"HTTP {status}" in message
    assert elsewhere.origin in message  # where it pointed: the origin, never the path or query
    assert "/collect" not in message
    assert SECRET not in message
    assert len(endpoint.heads) == 1
    assert endpoint.heads[0].startswith(b"POST ")
    assert elsewhere.heads == []  # no second request, so no key, went there


def test_a_redirect_to_another_scheme_opens_no_socket(raw_server):
    # An FTP client would connect and wait for a banner this listener never sends.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ftp = f"ftp://127.0.0.1:{listener.getsockname()[1]}/collect".encode()
        endpoint = raw_server(_redirect(302, ftp))
        before = _model_call_threads()
        started = time.monotonic()
        model = ChatCompletionsModel(endpoint.url, api_key=KEY)
        with pytest.raises(ModelCallError, match="HTTP 302"):
            answer_from_evidence(QUESTION, [SOURCE], model, timeout=1.5)
        assert time.monotonic() - started < 1.5
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing connected
    assert not _model_call_threads() - before, "a thread was left reading"


@pytest.mark.parametrize(
    ("location", "named"),
    [
        (b"http://user:" + SECRET.encode() + b"@127.0.0.1:9/x", "to http://127.0.0.1:9 "),
        (
            b"HTTPS://Evil.Example.INVALID/collect?k=" + SECRET.encode(),
            "https://evil.example.invalid",
        ),
        (b"http://[::1]:9/" + SECRET.encode(), "to http://[::1]:9 "),
        (b"/collect?token=" + SECRET.encode(), "to {endpoint} "),
        (b"ftp://127.0.0.1:9/" + SECRET.encode(), "not an http or https URL"),
        (b"file:///etc/passwd", "not an http or https URL"),
        (b"javascript:alert(1)//" + SECRET.encode(), "not an http or https URL"),
        (b"http://ev\x01il.example/", "not an http or https URL"),
        (b"http://ev\xe2\x80\xaeil.example/", "not an http or https URL"),
        (b"http://" + b"a" * 5000 + b".example/", "not an http or https URL"),
        (b"http://[::1:9/" + SECRET.encode(), "not an http or https URL"),
        (b"http://127.0.0.1:99999/", "not an http or https URL"),
        (b"http://127.0.0.1:" + SECRET.encode() + b"/", "not an http or https URL"),
        (b"http://127.0.0.1:\xb9\xb2/", "not an http or https URL"),
        (None, "HTTP 302"),
    ],
    ids=[
        "userinfo",
        "upper-case",
        "ipv6",
        "relative",
        "ftp",
        "file",
        "javascript",
        "control",
        "bidi",
        "long-host",
        "broken-ipv6",
        "port-range",
        "port-text",
        "port-superscripts",
        "none",
    ],
)
def test_a_redirects_message_names_its_origin_and_nothing_else(raw_server, location, named):
    endpoint = raw_server(_redirect(302, location))
    with pytest.raises(ModelCallError) as raised:
        answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(endpoint.url), timeout=5)
    error = raised.value
    message = str(error)
    assert named.format(endpoint=endpoint.origin) in message
    assert SECRET not in message
    assert "passwd" not in message
    assert "alert" not in message
    assert message.isascii()
    assert message.isprintable()
    assert len(message) < 200
    assert list(_chain(error)) == [error]  # nothing chained (the engine re-raises it from itself)
    assert len(endpoint.heads) == 1


# "Bounded replies. `ChatCompletionsModel` reads a reply, its status line and headers
# included, only up to a limit derived from `max_response_chars`, `max_output_tokens` and the
# log-probabilities asked for [...] past it the connection is closed and the answer is
# `response_too_large`" (docs/security.md).


def test_a_header_block_past_the_read_limit_fails_closed(raw_server):
    def respond() -> Iterator[bytes]:
        yield b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
        for _ in range(90):  # 5.4 MB: under http.client's own caps (100 lines of 64 KiB)
            yield b"X-Pad: " + b"x" * 60_000 + b"\r\n"
        yield b"Content-Length: %d\r\n\r\n" % len(COMPLETION)
        yield COMPLETION

    server = raw_server(respond)
    model = ChatCompletionsModel(server.url, logprobs=False)
    answer = answer_from_evidence(QUESTION, [SOURCE], model)  # a limit of 0.7 MB
    assert answer.reason_codes == ("response_too_large",)
    assert server.closed.wait(5)


# "A malformed reply is a `ModelCallError` that chains nothing: no exception of ours, its
# cause or its context carries the provider's payload (a malformed `usage` or `logprobs` is
# read as none)." (docs/providers.md, "What ChatCompletionsModel reads")


@pytest.mark.parametrize(
    "declared",
    [b"9\xb2\xb3", b"9" * 5000, b"-1", b"+12", b"1_000", b"0x10", b"12, 12", b""],
    ids=["superscripts", "5000-digits", "negative", "signed", "underscore", "hex", "list", "empty"],
)
def test_a_malformed_content_length_is_a_model_call_error_that_chains_nothing(raw_server, declared):
    head = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    server = raw_server(lambda: iter([head + declared + b"\r\n\r\n", COMPLETION]))
    with pytest.raises(ModelCallError, match="Content-Length") as raised:
        answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(server.url))
    error = raised.value
    assert list(_chain(error)) == [error]  # nothing chained (the engine re-raises it from itself)
    if declared:
        assert declared.decode("latin-1") not in str(error)


@pytest.mark.parametrize(
    "count",
    [10**400, 1 << 53, -1, True, 1.0, "12x"],
    ids=["401-digits", "2**53", "negative", "bool", "float", "text"],
)
def test_a_usage_count_out_of_bounds_is_read_as_none(raw_server, count):
    reply = json.loads(COMPLETION)
    reply["usage"] = {"prompt_tokens": count, "completion_tokens": 7}
    body = json.dumps(reply).encode()
    server = raw_server(lambda: iter([_head(len(body)), body]))
    answer = answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(server.url))
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (None, 7)


# "`ask` sends a key only where you asked for it: the variable `--api-key-env` names, to
# `--base-url`; without it, `OPENAI_API_KEY` to `https://api.openai.com` alone"
# (docs/security.md, "One strict call").


def test_ask_sends_no_key_to_a_base_url_it_was_not_asked_to(raw_server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = raw_server(lambda: iter([_head(len(COMPLETION)), COMPLETION]))
    notes = tmp_path / "notes"
    notes.write_text(SOURCE.text, encoding="utf-8")
    cli.main(["ask", QUESTION, str(notes), "--base-url", server.url], out=io.StringIO())
    (head,) = server.heads
    assert KEY.encode() not in head
    assert b"\r\nauthorization:" not in head.lower()


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


# --- streamed replies: `stream_answer_from_evidence` through `ChatCompletionsModel` ---

SSE_HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"


def _sse(chunk: dict[str, Any] | str) -> bytes:
    data = chunk if isinstance(chunk, str) else json.dumps(chunk)
    return f"data: {data}\n\n".encode()


def _content(text: str) -> bytes:
    return _sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


def _streamed(model: ChatCompletionsModel, **options: Any) -> Any:
    *_, final = stream_answer_from_evidence(QUESTION, [SOURCE], model, **options)
    return final


def _one_streamed_request(server: RawServer) -> bool:
    (body,) = server.bodies
    return json.loads(body)["stream"] is True


def _stream_threads() -> set[threading.Thread]:
    names = {"evidence-first-model-stream", "evidence-first-reply-watch"}
    return {thread for thread in threading.enumerate() if thread.name in names}


# "`ChatCompletionsModel` closes its connection when the engine stops waiting, however slowly
# the server writes, so no thread or socket is left reading; a streamed reply's too, `timeout`
# bounding the whole stream" (docs/security.md, "Timeouts and cancellation").


@pytest.mark.parametrize("trickle", ["events", "one-event", "comments"])
def test_a_stream_trickling_past_the_deadline_leaves_no_thread_or_socket_reading(
    raw_server, trickle
):
    # Each write keeps a read from timing out: only the deadline of the whole stream stops it.
    piece = {"events": _content(" "), "one-event": b" ", "comments": b": ping\n"}[trickle]

    opening = b'data: {"choices": [{"delta": {"content": "' if trickle == "one-event" else b""

    def respond() -> Iterator[bytes]:
        yield SSE_HEAD + opening
        for _ in range(600):  # every 50 ms, for 30 s
            time.sleep(0.05)
            yield piece

    before = _stream_threads()
    server = raw_server(respond)
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        _streamed(ChatCompletionsModel(server.url), timeout=0.5)
    assert time.monotonic() - started < 2
    assert _one_streamed_request(server)
    assert server.closed.wait(2), "the connection was left open"
    deadline = time.monotonic() + 2
    while _stream_threads() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _stream_threads() - before, "a thread was left reading"


# "A streamed reply is read within the same limit and an allowance for each event's envelope;
# past it the connection is closed and the answer is `response_too_large`" (docs/security.md,
# "Bounded replies"; docs/providers.md, "What ChatCompletionsModel reads").


@pytest.mark.parametrize("endless", ["comments", "empty-chunks", "role-chunks"])
def test_an_endless_stream_fails_closed_at_its_limit(raw_server, endless):
    # Nothing here adds to the text, so max_response_chars never stops it: the bytes must.
    piece = {
        "comments": b": " + b"x" * 1000 + b"\n",
        "empty-chunks": _sse({"choices": [{"index": 0, "delta": {}}], "pad": "x" * 1000}),
        "role-chunks": _sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
    }[endless]

    def respond() -> Iterator[bytes]:
        yield SSE_HEAD
        while True:
            yield piece * 64

    server = raw_server(respond)
    started = time.monotonic()
    answer = _streamed(ChatCompletionsModel(server.url), timeout=30)
    assert answer.reason_codes == ("response_too_large",)
    assert answer.raw_response == ""
    assert time.monotonic() - started < 10
    assert server.closed.wait(5)
    assert server.sent < 8 * MB  # the limit's 2.8 MB, and what the sockets buffered
    assert _one_streamed_request(server)


@pytest.mark.parametrize("where", ["data", "comment"])
def test_a_huge_event_fails_closed_and_is_not_read_further(raw_server, where):
    line = b"data: " if where == "data" else b": "

    def respond() -> Iterator[bytes]:
        yield SSE_HEAD + _content("{") + line
        for _ in range(40):  # 40 MB, never ended by a line end
            yield b"x" * MB

    server = raw_server(respond)
    answer = _streamed(ChatCompletionsModel(server.url, logprobs=True), timeout=30)
    assert answer.reason_codes == ("response_too_large",)
    assert server.closed.wait(5)
    assert server.sent < 20 * MB  # the rest was never read
    assert _one_streamed_request(server)


# "Our own transport builds no exception that holds a reply, so none is reachable through
# `__cause__` or `__context__` either" (docs/security.md, "Errors and logs"): a stream's
# events are the reply.

MALFORMED_STREAMS = {
    "json body": b'{"choices": [{"message": {"content": "' + SECRET.encode() + b'"}}]}\n\n',
    "unknown field": SECRET.encode() + b": x\n\n",
    "error field": b"error: " + SECRET.encode() + b"\n\n",
    "error event": b"event: error\ndata: " + SECRET.encode() + b"\n\n",
    "not json": _sse(f"not json {SECRET}"),
    "not utf-8": b'data: {"choices": "' + SECRET.encode() + b'\xff\xfe"}\n\n',
    "choices": _sse({"choices": SECRET}),
    "delta": _sse({"choices": [{"delta": [SECRET]}]}),
    "content": _sse({"choices": [{"delta": {"content": {"text": SECRET}}}]}),
    "error object": _sse({"error": {"message": SECRET, "code": SECRET}}),
    "refusal": _sse({"choices": [{"delta": {"refusal": f"I will not: {SECRET}"}}]}),
    "cut off": _content(SECRET),
}


def _chunked(*parts: bytes) -> list[bytes]:
    """A stream as llama.cpp sends one: HTTP/1.1 chunks, the last ending the body."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    return [head, *(b"%x\r\n%s\r\n" % (len(part), part) for part in parts), b"0\r\n\r\n"]


@pytest.mark.parametrize("stream", MALFORMED_STREAMS, ids=list(MALFORMED_STREAMS))
def test_no_payload_of_a_stream_is_reachable_from_the_error(raw_server, stream):
    parts = _chunked(_content("{"), MALFORMED_STREAMS[stream])
    server = raw_server(lambda: iter(parts))
    model = ChatCompletionsModel(server.url, logprobs=True)
    items: list[Any] = []
    with pytest.raises(ModelCallError) as raised:
        items.extend(stream_answer_from_evidence(QUESTION, [SOURCE], model))
    assert not any(isinstance(item, EvidenceAnswer) for item in items)  # none is made up
    assert _one_streamed_request(server)
    for link in _chain(raised.value):
        shown = [str(link), repr(link), *map(repr, link.args), repr(vars(link))]
        assert not any(SECRET in text for text in shown), type(link)
    assert SECRET not in "".join(traceback.format_exception(raised.value))


def test_a_usage_count_out_of_bounds_in_a_stream_is_read_as_none(raw_server):
    usage = {"prompt_tokens": int("9" * 401), "completion_tokens": 1 << 53}
    events = [_content(LEDGER), _sse({"choices": [], "usage": usage}), _sse("[DONE]")]
    server = raw_server(lambda: iter([SSE_HEAD, *events]))
    answer = _streamed(ChatCompletionsModel(server.url))
    assert answer.status == "answered"
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (None, None)
