"""``ChatCompletionsModel.stream``: one request, read as server-sent events within its limits.

The event stream reader (``_transport/sse``) in any pieces, its line ends, comments, ``[DONE]``
and malformed lines; the streamed request through the real class against a loopback server
(llama.cpp's chunk shape over HTTP/1.1 chunked encoding, OpenAI's over HTTP/1.0): one request,
the body ``generate`` posts with ``stream`` set (and ``stream_options`` where the profile's
``stream_usage`` says), the usage read from the chunk that carries it, each chunk's
log-probabilities joined, a tool call refused; an error status, a redirect, the timeout, a
cancellation and a closed stream; and the same result as ``answer_from_evidence`` on the same
reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, get_args

import _support
import pytest
from _support import RawServer

from evidence_first import (
    AnswerCancelledError,
    AnswerTimeoutError,
    DecisionEvent,
    Evidence,
    EvidenceAnswer,
    ModelCallError,
    ModelRequest,
    SourcesEvent,
    TokenUsage,
    answer_from_evidence,
    astream_answer_from_evidence,
    stream_answer_from_evidence,
)
from evidence_first._models.rules import CAUTIOUS, PROFILE_RULES
from evidence_first._transport import reading
from evidence_first._transport.sse import EventReader, stream_limit
from evidence_first.adapters import DialectName, ModelProfileWarning
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import TINY_MODEL, LocalModel

SOURCE = Evidence(id="notes", text="Standup, June 11. The launch moved to June 15. Ana owns it.")
QUESTION = "When did the launch move?"
LEDGER = json.dumps(
    {
        "answerable": "yes",
        **_support.ledger_dict(
            [
                _support.fact(
                    {"source_id": "notes", "quote": "The launch moved to June 15."},
                    subject="the launch",
                    relation="moved to",
                    obj="June 15",
                )
            ],
            answer="June 15 [F1].",
        ),
    }
)
USAGE = {
    "prompt_tokens": 661,
    "completion_tokens": 42,
    "prompt_tokens_details": {"cached_tokens": 7},
}
SECRET = "sk-payload-TOPSECRET-0451"


# --- the event stream format ---


def _events(stream: bytes, sizes: list[int]) -> tuple[list[bytes], bool]:
    reader, events, at, index = EventReader(), [], 0, 0
    while at < len(stream) and not reader.done:
        size = sizes[index % len(sizes)]
        events += reader.feed(stream[at : at + size])
        at, index = at + size, index + 1
    return events, reader.done


STREAM = (
    b": a keep-alive comment\r\n"
    b"id: 1\r\nretry: 100\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: message\ndata: first line\ndata:second\ndata\n\n"
    b"data:  two spaces\r\r"
    b"\n\n"  # a blank line alone ends no event
    b"data: [DONE]\n\n"
    b'data: {"after": "done"}\n\n'
)
EXPECTED = [b'{"a": 1}', b"first line\nsecond\n", b" two spaces"]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, len(STREAM)])
def test_events_are_read_alike_in_any_pieces_up_to_done(size):
    events, done = _events(STREAM, [size])
    assert (events, done) == (EXPECTED, True)


def test_a_cr_ending_one_piece_and_its_lf_beginning_the_next_are_one_line_end():
    for at in range(len(STREAM)):
        events, done = _events(STREAM, [at or 1, len(STREAM)])
        assert (events, done) == (EXPECTED, True), at


@pytest.mark.parametrize(
    "line",
    [
        b'{"choices": [{"message": {"content": "' + SECRET.encode() + b'"}}]}',  # a JSON body
        b"error: " + SECRET.encode(),
        SECRET.encode() + b": x",
        b"\xef\xbb\xbfdata: x",  # a byte-order mark: a field no stream of these servers sends
    ],
    ids=["json-body", "error-field", "unknown-field", "bom"],
)
def test_a_line_that_is_no_field_is_a_malformed_stream_naming_nothing(line):
    with pytest.raises(ModelCallError) as raised:
        EventReader().feed(line + b"\n\n")
    assert SECRET not in str(raised.value)
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None


def test_an_event_of_another_type_is_an_error():
    with pytest.raises(ModelCallError, match="other than a message"):
        EventReader().feed(b"event: error\ndata: " + SECRET.encode() + b"\n\n")


def test_a_stream_that_ends_before_done_was_cut_off():
    reader = EventReader()
    assert reader.feed(b'data: {"a": 1}\n\n') == [b'{"a": 1}']
    with pytest.raises(ModelCallError, match="ended before it was done"):
        reader.end()


def test_one_long_line_in_small_pieces_is_read_in_linear_time():
    def seconds(size: int) -> float:
        stream = b"data: " + b"x" * size + b"\n\n"
        started = time.perf_counter()
        events, _ = _events(stream, [4096])
        assert len(events[0]) == size
        return time.perf_counter() - started

    seconds(1 << 20)  # warm
    assert seconds(8 << 20) < 4 * seconds(4 << 20)


def test_the_stream_limit_is_the_documented_one():
    def request(chars: int, tokens: int, logprobs: bool) -> ModelRequest:
        return ModelRequest(
            system="s",
            user="u",
            max_tokens=tokens,
            json_schema={},
            timeout=1,
            prompt_version="v",
            logprobs=logprobs,
            max_response_chars=chars,
        )

    # docs/providers.md, "What ChatCompletionsModel reads".
    assert round(stream_limit(request(32_768, 2048, True)) / 1e6, 1) == 8.5
    assert round(stream_limit(request(32_768, 2048, False)) / 1e6, 1) == 2.8
    assert round(stream_limit(request(131_072, 8192, True)) / 1e6, 1) == 33.9


# --- the streamed request, through the real class ---

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _choice(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict:
    return {
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]
    }


def _tokens(text: str, yes: float = 0.9) -> list[dict[str, Any]]:
    """``text`` as log-probability entries of a few characters, the decision's first token
    offering "yes" with probability ``yes`` and "no" with the rest."""
    at = text.index('"answerable": "') + len('"answerable": "')
    top = [
        {"token": ' "y', "logprob": math.log(yes)},
        {"token": ' "n', "logprob": math.log(1 - yes)},
    ]

    def plain(part: str) -> list[dict[str, Any]]:
        pieces = [part[i : i + 5] for i in range(0, len(part), 5)]
        return [{"token": piece, "logprob": -0.01, "top_logprobs": []} for piece in pieces]

    decision = {"token": text[at - 2 : at + 1], "logprob": math.log(yes), "top_logprobs": top}
    return [*plain(text[: at - 2]), decision, *plain(text[at + 1 :])]


def openai_events(
    text: str = LEDGER,
    *,
    logprobs: bool = False,
    usage: dict[str, Any] | None = USAGE,
    finish: str = "stop",
    extra: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> list[bytes]:
    """OpenAI's chunks of ``text``: a role chunk, a chunk per token, the finish reason, then
    the usage chunk (``choices`` empty) when asked, and ``[DONE]``; every other chunk has
    ``"usage": null`` (API reference, chat streaming)."""
    entries = (
        _tokens(text)
        if logprobs
        else [{"token": text[at : at + 5]} for at in range(0, len(text), 5)]
    )
    chunks = [{**BASE, **_choice({"role": "assistant", "content": ""}), "usage": None}]
    for entry in entries:
        lp = {"content": [entry], "refusal": None} if logprobs else None
        chunks.append({**BASE, **_choice({"content": entry["token"]}, logprobs=lp), "usage": None})
    chunks += extra
    chunks.append({**BASE, **_choice({}, finish), "usage": None})
    if usage is not None:
        chunks.append({**BASE, "choices": [], "usage": usage})
    return [_event(chunk) for chunk in chunks] + [b"data: [DONE]\n\n"]


def llama_cpp_stream(text: str = LEDGER, *, usage: bool = True) -> list[bytes]:
    """llama.cpp's stream of ``text`` as its server writes it: HTTP/1.1 chunked encoding, one
    HTTP chunk per token, a role chunk with ``"content": null``, a chunk per token with its
    log-probabilities, the finish reason with an empty delta, the usage chunk (with its
    timings) only when asked, ``[DONE]`` (tools/server/server-task.cpp)."""
    base = {**BASE, "model": "/root/.cache/evidence-first/gemma-3-270m-q4_k_m.gguf"}
    entries = _tokens(text)
    parts = [_event({**base, **_choice({"role": "assistant", "content": None})})]
    parts[0] += _event(
        {**base, **_choice({"content": entries[0]["token"]}, logprobs={"content": entries[:1]})}
    )
    for entry in entries[1:]:
        parts.append(
            _event({**base, **_choice({"content": entry["token"]}, logprobs={"content": [entry]})})
        )
    last = _event({**base, **_choice({}, "stop")})
    if usage:
        last += _event({**base, "choices": [], "usage": USAGE, "timings": {"prompt_n": 661}})
    parts += [last, b"data: [DONE]\n\n"]
    return _chunked(parts)


def _chunked(parts: list[bytes]) -> list[bytes]:
    """``parts`` as llama.cpp writes a stream: HTTP/1.1, one HTTP chunk each, the last chunk
    ending the body (so a stream without ``[DONE]`` ends, as a server that stopped)."""
    head = (
        b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    return [head, *(b"%x\r\n%s\r\n" % (len(part), part) for part in parts), b"0\r\n\r\n"]


SSE_HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"


@pytest.fixture
def serve() -> Iterator[Callable[[list[bytes]], RawServer]]:
    servers: list[RawServer] = []

    def start(parts: list[bytes], pause: float = 0.0) -> RawServer:
        def respond() -> Iterator[bytes]:
            for part in parts:
                time.sleep(pause)
                yield part

        servers.append(RawServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _completion(text: str = LEDGER, logprobs: bool = False) -> list[bytes]:
    """The same reply whole, as ``generate`` reads it."""
    choice = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs:
        choice["logprobs"] = {"content": _tokens(text)}
    body = json.dumps({"choices": [choice], "usage": USAGE}).encode()
    head = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    return [head % len(body), body]


def _stream(model: Any, **options: Any) -> tuple[list[Any], EvidenceAnswer]:
    items = list(stream_answer_from_evidence(QUESTION, [SOURCE], model, **options))
    assert isinstance(items[-1], EvidenceAnswer)
    return items[:-1], items[-1]


@pytest.mark.parametrize("shape", ["openai", "llama.cpp"])
def test_the_streamed_answer_is_the_answer_to_the_same_reply_in_one_request(shape, serve):
    # One request, whatever the chunking; per-chunk log-probabilities joined, the usage read
    # from the chunk carrying it: the result is answer_from_evidence's on the same reply.
    parts = [SSE_HEAD, *openai_events(logprobs=True)] if shape == "openai" else llama_cpp_stream()
    streamed, whole = serve(parts), serve(_completion(logprobs=True))
    events, final = _stream(ChatCompletionsModel(streamed.url, logprobs=True))
    expected = answer_from_evidence(
        QUESTION, [SOURCE], ChatCompletionsModel(whole.url, logprobs=True)
    )
    assert len(streamed.bodies) == 1
    assert final.as_dict() == expected.as_dict()
    assert final.status == "answered"
    assert final.reader_confidence == pytest.approx(0.9)
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.cached_input_tokens) == (661, 7)
    (decision,) = [event for event in events if isinstance(event, DecisionEvent)]
    assert decision.reader_confidence == pytest.approx(0.9)
    posted, sent = json.loads(whole.bodies[0]), json.loads(streamed.bodies[0])
    assert sent == {**posted, "stream": True}  # a loopback host: no stream_options


def test_without_a_usage_chunk_the_usage_counts_nothing_as_a_whole_reply_without_usage(serve):
    server = serve([SSE_HEAD, *openai_events(usage=None)])
    _, final = _stream(ChatCompletionsModel(server.url))
    assert final.status == "answered"
    assert final.usage == TokenUsage()  # each count unknown, as a whole reply reads


def test_a_tool_call_delta_makes_the_reply_invalid(serve):
    call = {"index": 0, "id": "call_1", "function": {"name": "x", "arguments": ""}}
    extra = [{**BASE, **_choice({"tool_calls": [call]}), "usage": None}]
    server = serve([SSE_HEAD, *openai_events(extra=extra)])
    _, final = _stream(ChatCompletionsModel(server.url))
    assert final.reason_codes == ("tool_call_not_allowed",)


def test_a_finish_reason_of_length_is_output_truncated(serve):
    server = serve([SSE_HEAD, *openai_events(finish="length")])
    _, final = _stream(ChatCompletionsModel(server.url))
    assert final.reason_codes == ("output_truncated",)


@pytest.mark.parametrize(
    ("chunk", "says"),
    [
        ({"error": {"message": SECRET, "type": "server_error"}}, "reported an error"),
        ({**BASE, "choices": SECRET}, "not of chat completion chunks"),
        ({**BASE, **_choice({"content": ["x", SECRET]})}, "not of chat completion chunks"),
    ],
    ids=["error", "choices", "content"],
)
def test_an_error_mid_stream_is_a_model_call_error_naming_nothing(chunk, says, serve):
    parts = openai_events()
    server = serve([SSE_HEAD, *parts[:3], _event(chunk), *parts[3:]])
    items: list[Any] = []
    with pytest.raises(ModelCallError, match=says) as raised:
        items.extend(
            stream_answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(server.url))
        )
    assert SECRET not in str(raised.value)
    assert isinstance(items[0], SourcesEvent)  # the events before stay; no result is made up
    assert not any(isinstance(item, EvidenceAnswer) for item in items)
    assert len(server.bodies) == 1


def test_an_error_status_before_the_stream_is_a_model_call_error(serve):
    body = json.dumps({"error": {"message": SECRET}}).encode()
    head = b"HTTP/1.0 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = serve([head, body])
    with pytest.raises(ModelCallError, match="HTTP 500") as raised:
        _stream(ChatCompletionsModel(server.url))
    assert SECRET not in str(raised.value)
    assert len(server.bodies) == 1


def test_a_redirect_is_still_refused_and_nothing_reaches_its_origin(serve):
    elsewhere = serve([SSE_HEAD, *openai_events()])
    location = f"{elsewhere.origin}/v1/chat/completions".encode()
    server = serve([b"HTTP/1.0 307 Temporary Redirect\r\nLocation: " + location + b"\r\n\r\n"])
    with pytest.raises(
        ModelCallError, match=re.escape(f"HTTP 307, a redirect to {elsewhere.origin}")
    ):
        _stream(ChatCompletionsModel(server.url, api_key="sk-bearer"))
    assert len(server.bodies) == 1
    assert elsewhere.bodies == []


def _reading_threads() -> set[threading.Thread]:
    names = {"evidence-first-model-stream", "evidence-first-reply-watch"}
    return {thread for thread in threading.enumerate() if thread.name in names}


def _stalling(serve: Callable[..., RawServer]) -> RawServer:
    """A server that streams the ledger's first half, then stalls."""
    parts = openai_events()
    return serve([SSE_HEAD, *parts[: len(parts) // 2]])


def _no_thread_left(before: set[threading.Thread]) -> bool:
    deadline = time.monotonic() + 1
    while _reading_threads() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _reading_threads() - before


def test_closing_the_stream_closes_the_connection_within_a_second(serve):
    before = _reading_threads()
    server = _stalling(serve)
    stream = stream_answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(server.url))
    while not isinstance(next(stream), DecisionEvent):  # the first event of the reply
        pass
    closed_at = time.monotonic()
    stream.close()
    assert server.closed.wait(1), "the connection was left open"
    assert time.monotonic() - closed_at < 1
    assert _no_thread_left(before), "a thread was left reading"


def test_cancelling_raises_from_the_iterator_and_closes_the_connection(serve):
    before = _reading_threads()
    server = _stalling(serve)
    cancel = threading.Event()
    model = ChatCompletionsModel(server.url)
    stream = stream_answer_from_evidence(QUESTION, [SOURCE], model, cancel=cancel)
    while not isinstance(next(stream), DecisionEvent):
        pass
    cancel.set()
    with pytest.raises(AnswerCancelledError):
        next(stream)
    assert server.closed.wait(1)
    assert _no_thread_left(before)


def test_the_timeout_bounds_the_whole_stream_and_closes_the_connection(serve):
    before = _reading_threads()
    server = _stalling(serve)
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        _stream(ChatCompletionsModel(server.url), timeout=0.5)
    assert time.monotonic() - started < 1.5
    assert server.closed.wait(1)
    assert _no_thread_left(before)


async def test_the_async_stream_runs_the_same_request_off_the_loop(serve):
    server = serve([SSE_HEAD, *openai_events()])
    model = ChatCompletionsModel(server.url)
    items = [item async for item in astream_answer_from_evidence(QUESTION, [SOURCE], model)]
    assert items[-1].status == "answered"
    assert len(server.bodies) == 1


async def test_cancelling_the_async_stream_closes_the_connection(serve):
    server = _stalling(serve)
    model = ChatCompletionsModel(server.url)

    async def consume() -> None:
        async for _ in astream_answer_from_evidence(QUESTION, [SOURCE], model):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.closed.wait, 1)


def test_a_stream_past_its_limit_fails_closed_as_response_too_large(serve):
    # max_output_tokens=16 with log-probabilities: a 1 MB event passes stream_limit.
    huge = b"data: " + b"x" * (1 << 20) + b"\n\n"
    server = serve([SSE_HEAD, *openai_events()[:3], huge])
    _, final = _stream(ChatCompletionsModel(server.url), max_output_tokens=16)
    assert final.reason_codes == ("response_too_large",)
    assert final.raw_response == ""
    assert server.closed.wait(1)


def test_more_log_probability_entries_than_asked_for_fail_closed(serve):
    server = serve([SSE_HEAD, *openai_events(logprobs=True)])  # more tokens than 16
    _, final = _stream(ChatCompletionsModel(server.url, logprobs=True), max_output_tokens=16)
    assert final.reason_codes == ("response_too_large",)


def test_a_stream_cut_off_before_done_is_a_model_call_error(serve):
    server = serve(_chunked(openai_events()[:-1]))
    with pytest.raises(ModelCallError, match="ended before it was done"):
        _stream(ChatCompletionsModel(server.url))


def test_the_local_model_streams_through_its_server_the_same_way(serve, monkeypatch):
    streamed, whole = serve(llama_cpp_stream()), serve(_completion(logprobs=True))
    local = LocalModel(TINY_MODEL)

    def reader_at(server: RawServer) -> ChatCompletionsModel:
        # The client a running LocalModel builds for its server, at the loopback stand-in.
        return ChatCompletionsModel(
            server.url, model=local.model_name, seed=local.seed, profile=local.profile
        )

    monkeypatch.setattr(LocalModel, "reader", property(lambda self: reader_at(streamed)))
    _, final = _stream(local)
    monkeypatch.setattr(LocalModel, "reader", property(lambda self: reader_at(whole)))
    expected = answer_from_evidence(QUESTION, [SOURCE], local)
    assert final.as_dict() == expected.as_dict()
    assert final.usage is not None  # asked for: llama.cpp sends it only then
    posted, sent = json.loads(whole.bodies[0]), json.loads(streamed.bodies[0])
    assert sent == {**posted, "stream": True, "stream_options": {"include_usage": True}}


# --- the streamed body: generate's, with stream set ---


def _bodies(model: ChatCompletionsModel, posts: Callable[[], list[Any]]) -> tuple[Any, Any]:
    """What ``model`` posts for the same question, whole and streamed."""
    with contextlib.suppress(ModelCallError):
        answer_from_evidence(QUESTION, [SOURCE], model, max_output_tokens=300)
    with contextlib.suppress(ModelCallError):
        _stream(model, max_output_tokens=300)
    posted, sent = posts()
    return posted, sent


def _streamed(posted: dict[str, Any], usage: bool) -> dict[str, Any]:
    return {
        **posted,
        "stream": True,
        **({"stream_options": {"include_usage": True}} if usage else {}),
    }


@pytest.mark.parametrize("dialect", get_args(DialectName))
def test_the_streamed_body_is_the_posted_one_with_stream_set_in_every_dialect(dialect, loopback):
    loopback.reply = {"choices": [{"message": {"content": "{}"}}]}
    model = ChatCompletionsModel(f"{loopback.url}/v1", model="m", seed=0, dialect=dialect)
    posted, sent = _bodies(model, lambda: loopback.bodies)
    assert posted["stream"] is False
    assert sent == _streamed(posted, usage=False)


@pytest.mark.parametrize("rule", [*PROFILE_RULES, *CAUTIOUS.values()], ids=lambda rule: rule.name)
def test_the_streamed_body_is_the_posted_one_with_stream_set_for_every_rule(rule, loopback):
    # At a loopback host, only the embedded models' rules (llama.cpp) ask for the usage.
    loopback.reply = {"choices": [{"message": {"content": "{}"}}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelProfileWarning)
        model = ChatCompletionsModel(f"{loopback.url}/v1", model=rule.example, seed=0)
    posted, sent = _bodies(model, lambda: loopback.bodies)
    assert sent == _streamed(posted, usage=rule.vendor == "embedded")


class Wire:
    """The transport's opener replaced (as ``test_profiles.py``'s): each request recorded and
    answered with a stream, so OpenAI's and Azure's real hosts are reached offline."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def opener(self, sockets: Any) -> Any:
        return self

    def open(self, request: Any, timeout: float | None = None) -> Any:
        self.requests.append(request)
        reply = io.BufferedReader(io.BytesIO(b"".join(openai_events())))  # type: ignore[arg-type]
        reply.headers = {}  # type: ignore[attr-defined]
        return reply

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.data) for request in self.requests]


@pytest.mark.parametrize(
    ("base_url", "name", "usage"),
    [
        ("https://api.openai.com/v1", "gpt-4.1-mini", True),
        ("https://api.openai.com/v1", "gpt-5-2025-08-07", True),
        ("https://api.openai.com/v1", "o9-next", True),  # the cautious profile: every model
        ("https://contoso.openai.azure.com/openai/v1", "gpt-4.1", False),
        ("https://openrouter.ai/api/v1", "openai/gpt-4.1", False),
    ],
)
def test_the_usage_is_asked_for_where_the_profile_says(base_url, name, usage, monkeypatch):
    wire = Wire()
    monkeypatch.setattr(reading, "_opener", wire.opener)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelProfileWarning)
        model = ChatCompletionsModel(
            base_url, model=name, profile="gpt-4.1" if "azure" in base_url else None
        )
    assert model.profile.stream_usage is usage
    posted, sent = _bodies(model, lambda: wire.bodies)
    assert sent == _streamed(posted, usage=usage)
    _, final = _stream(model)
    assert final.usage is not None  # OpenAI's shape, its usage chunk read


def test_a_refusal_in_the_stream_is_no_content_as_in_a_whole_reply(serve):
    # A refusal carries no ledger: the reply is judged on its content alone, whole or streamed.
    refusal = {**BASE, **_choice({"refusal": SECRET})}
    server = serve([SSE_HEAD, _event(refusal), *openai_events("")])
    _, final = _stream(ChatCompletionsModel(server.url))
    assert (final.status, final.reason_codes) == ("invalid_response", ("invalid_json",))
    assert SECRET not in json.dumps(final.as_dict())
