"""A streamed answer's request, as the real ``ChatOpenAI`` and ``ChatAnthropic`` send it.

``EvidenceAnswerer.stream``/``astream`` stream the strict copy's one call: the loopback server
answers it with server-sent events, as OpenAI's and Anthropic's APIs do. The body that arrived
is the invoked call's plus ``stream`` (and ``stream_options`` where usage is asked for); the
chunks add up to the invoked message; closing the iterator closes the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import json
import operator
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI

from evidence_first import Evidence, ModelCallError, ModelProfile
from langchain_evidence_first import EvidenceAnswerer, profile_for

SOURCE = Evidence(id="a", text="The launch moved to June 15.")
QUESTION = {"question": "When is the launch?", "sources": [SOURCE]}
CITATION = {"source_id": "a", "quote": "The launch moved to June 15."}
FACT = {"subject": "launch", "relation": "moved to", "object": "June 15", "citations": [CITATION]}
LEDGER = json.dumps(
    {"facts": [FACT], "answer": "June 15 [F1].", "inference": None, "missing_evidence": []}
)
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
PROVIDERS = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _sse(data: object, event: str | None = None) -> str:
    line = f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
    return f"event: {event}\n{line}" if event else line


# OpenAI's chat completions stream: content deltas, the finish, usage when asked, [DONE].

OPENAI_USAGE = {"prompt_tokens": 31, "completion_tokens": 17, "total_tokens": 48}


def _openai_chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return _sse({**chunk, "choices": [choice], **more})


def _openai_events(body: Any, pieces: list[str] | None = None) -> list[str]:
    """The stream OpenAI sends for ``body``: its usage only when ``include_usage`` asks."""
    events = [_openai_chunk({"content": piece}) for piece in pieces or _pieces(LEDGER)]
    events.append(_openai_chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        events.append(_sse({**chunk, "choices": [], "usage": OPENAI_USAGE}))
    return [*events, _sse("[DONE]")]


OPENAI_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": LEDGER}, "finish_reason": "stop"}
    ],
    "usage": OPENAI_USAGE,
}


# Anthropic's Messages stream: the message, its one text block's deltas, the usage, the stop.

ANTHROPIC_USAGE = {"input_tokens": 31, "output_tokens": 17}


def _text_delta(piece: str) -> str:
    delta = {"type": "text_delta", "text": piece}
    return _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")


def _anthropic_events(body: Any, pieces: list[str] | None = None) -> list[str]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 31, "output_tokens": 1},
    }
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    return [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(block, "content_block_start"),
        *[_text_delta(piece) for piece in pieces or _pieces(LEDGER)],
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse({"type": "message_delta", "delta": delta, "usage": ANTHROPIC_USAGE}, "message_delta"),
        _sse({"type": "message_stop"}, "message_stop"),
    ]


ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": LEDGER}],
    "stop_reason": "end_turn",
    "usage": ANTHROPIC_USAGE,
}

# Each class on a loopback server, its stream, and its reply to an invoked call.
CLASSES: dict[str, tuple[Callable[..., Any], Callable[..., list[str]], dict[str, Any]]] = {
    "openai": (
        lambda url, **kwargs: ChatOpenAI(
            model="m", api_key="sk-test", base_url=f"{url}/v1", **kwargs
        ),
        _openai_events,
        OPENAI_REPLY,
    ),
    "anthropic": (
        lambda url, **kwargs: ChatAnthropic(
            model="claude-haiku-4-5", api_key="sk-ant-test", base_url=url, **kwargs
        ),
        _anthropic_events,
        ANTHROPIC_REPLY,
    ),
}


async def _streamed(answerer: EvidenceAnswerer, mode: str) -> list[Any]:
    if mode == "sync":
        return list(answerer.stream(QUESTION))
    return [chunk async for chunk in answerer.astream(QUESTION)]


def _merged(chunks: list[Any]) -> Any:
    return functools.reduce(operator.add, chunks)


def _annotations(message: AIMessage) -> list[dict[str, Any]]:
    """The text block's annotations, without the IDs each build draws anew."""
    (block,) = message.content
    assert isinstance(block, dict)
    return [{k: v for k, v in note.items() if k != "id"} for note in block.get("annotations", [])]


@PROVIDERS
@MODES
async def test_a_streamed_answer_is_one_strict_request_and_adds_up_to_the_invoked_message(
    mode, provider, loopback_server
):
    build, events, reply = CLASSES[provider]
    invoked_at = loopback_server(keep_alive=False).answering(200, reply)
    invoked = EvidenceAnswerer(llm=build(invoked_at.url, stream_usage=True), output="message")
    message = invoked.invoke(QUESTION)
    streamed_at = loopback_server(keep_alive=False)
    streamed_at.streaming(events)
    answerer = EvidenceAnswerer(llm=build(streamed_at.url, stream_usage=True), output="message")

    merged = _merged(await _streamed(answerer, mode))

    # One request: the invoked call's body, streamed, usage asked for where the class asks.
    assert len(streamed_at.requests) == 1
    asked = {"stream_options": {"include_usage": True}} if provider == "openai" else {}
    assert streamed_at.body == {**invoked_at.body, "stream": True, **asked}
    assert merged.text == message.text == "June 15."
    assert _annotations(merged) == _annotations(message) != []
    assert merged.response_metadata == message.response_metadata
    assert merged.usage_metadata == message.usage_metadata
    assert merged.usage_metadata["total_tokens"] == 48


@pytest.mark.parametrize("stream_usage", [None, True, False])
@MODES
async def test_chat_openai_is_asked_for_usage_as_the_profile_and_the_model_say(
    mode, stream_usage, loopback
):
    events = loopback.streaming(_openai_events)
    llm = CLASSES["openai"][0](loopback.url, stream_usage=stream_usage)
    merged = _merged(await _streamed(EvidenceAnswerer(llm=llm, output="message"), mode))

    # A model set not to is never asked; one set to, always; otherwise the profile says
    # (ChatOpenAI asks no server but OpenAI's own by default: many do not report usage).
    said = getattr(profile_for(llm), "stream_usage", False)
    expected = stream_usage if stream_usage is not None else said
    assert ("stream_options" in loopback.body) is expected
    if expected:
        assert loopback.body["stream_options"] == {"include_usage": True}
        assert merged.usage_metadata["total_tokens"] == 48
    else:
        assert merged.usage_metadata is None  # no usage came back: None, not zeros
    assert events.closed_at is None


@dataclasses.dataclass(frozen=True)
class _GivesStreamUsage(ModelProfile):
    """A profile saying the provider reports usage in a stream (``ModelProfile.stream_usage``)."""

    stream_usage: bool = True


@pytest.mark.parametrize(("stream_usage", "expected"), [(None, True), (False, False)])
def test_a_profile_that_says_usage_comes_back_asks_unless_the_model_is_set_not_to(
    stream_usage, expected, loopback
):
    loopback.streaming(_openai_events)
    llm = CLASSES["openai"][0](loopback.url, stream_usage=stream_usage)
    answerer = EvidenceAnswerer(llm=llm, output="message", profile=_GivesStreamUsage())
    merged = _merged(list(answerer.stream(QUESTION)))
    assert ("stream_options" in loopback.body) is expected
    assert (merged.usage_metadata is not None) is expected


def _slow_stream(provider: str) -> tuple[list[str], list[str]]:
    """The stream up to the whole ledger; then 100 blank deltas, one event each, and its end."""
    events = CLASSES[provider][1]
    whole = events({}, [LEDGER])
    at = next(index for index, event in enumerate(whole) if "missing_evidence" in event)
    (blank,) = [event for event in events({}, [" "]) if '": " "' in event]
    return whole[: at + 1], [*[blank] * 100, *whole[at + 1 :]]


def _wait_for_close(events: Any, seconds: float) -> float | None:
    deadline = time.monotonic() + seconds
    while events.closed_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return events.closed_at


@PROVIDERS
@MODES
def test_closing_the_stream_closes_the_connection_within_a_second(mode, provider, loopback):
    head, rest = _slow_stream(provider)
    events = loopback.streaming([*head, *rest], interval=0.05)  # 5 s to send it all
    answerer = EvidenceAnswerer(llm=CLASSES[provider][0](loopback.url), output="message")

    closed = _close_after_first_text(answerer, mode)

    assert _wait_for_close(events, 1.0) is not None
    assert events.closed_at - closed < 1.0
    assert events.written < len(head) + len(rest)
    assert len(loopback.requests) == 1


@PROVIDERS
def test_closing_an_async_stream_closes_a_stalled_connection_at_once(provider, loopback):
    head, rest = _slow_stream(provider)
    # The ledger at once, then nothing for 5 s.
    events = loopback.streaming(["".join(head), *rest[:3]], interval=5.0)
    answerer = EvidenceAnswerer(llm=CLASSES[provider][0](loopback.url), output="message")

    closed = _close_after_first_text(answerer, "async")

    assert _wait_for_close(events, 1.0) is not None
    assert events.closed_at - closed < 1.0
    assert events.written == 1


def _close_after_first_text(answerer: EvidenceAnswerer, mode: str) -> float:
    """Read the stream until its first text, close it; when it was closed."""
    if mode == "sync":
        chunks = answerer.stream(QUESTION)
        while not next(chunks).text:
            pass
        closed = time.monotonic()
        chunks.close()
        return closed

    async def read() -> float:
        chunks = answerer.astream(QUESTION)
        while not (await anext(chunks)).text:
            pass
        closed = time.monotonic()
        await chunks.aclose()  # type: ignore[attr-defined]
        return closed

    return asyncio.run(read())


ERRORS = {
    "openai": {"error": {"message": "crafted", "type": "server_error"}},
    "anthropic": {"type": "error", "error": {"type": "api_error", "message": "crafted"}},
}


@PROVIDERS
@MODES
async def test_a_provider_error_raises_from_the_stream_after_one_request(mode, provider, loopback):
    endpoint = loopback.answering(500, ERRORS[provider])
    answerer = EvidenceAnswerer(llm=CLASSES[provider][0](endpoint.url), output="message")
    with pytest.raises(ModelCallError) as streamed:
        await _streamed(answerer, mode)
    with pytest.raises(ModelCallError) as invoked:
        answerer.invoke(QUESTION)
    assert len(endpoint.requests) == 2  # one each
    assert str(streamed.value) == str(invoked.value)  # worded as an invoked call's
    assert "crafted" not in str(streamed.value)
    del streamed, invoked
    gc.collect()


@PROVIDERS
@MODES
async def test_a_redirected_stream_is_refused_after_one_request(mode, provider, loopback_server):
    elsewhere = loopback_server(keep_alive=False)
    elsewhere.streaming(CLASSES[provider][1])
    endpoint = loopback_server(keep_alive=False).answering(307, ERRORS[provider])
    endpoint.headers = {"Location": f"{elsewhere.url}/collect"}
    answerer = EvidenceAnswerer(llm=CLASSES[provider][0](endpoint.url), output="message")
    with pytest.raises(ModelCallError) as refused:
        await _streamed(answerer, mode)
    assert "HTTP 307" in str(refused.value)
    assert elsewhere.url in str(refused.value)  # the origin it pointed to, not its path
    assert "/collect" not in str(refused.value)
    assert len(endpoint.requests) == 1
    assert elsewhere.requests == []
