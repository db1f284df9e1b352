"""Canaries: the LlamaIndex OpenAI internals that ``_openai`` touches still behave as it expects.

They fail loudly on an upgrade that renames or changes them, and they assert the behaviour
that matters (one HTTP request on a 500), not only names: a renamed attribute must never
silently bring retries back.
"""

from __future__ import annotations

import dataclasses
import gc

import httpx
import openai
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.openai import OpenAI

from evidence_first import ModelProfile, ModelRequest
from llama_index.response_synthesizers.evidence_first._openai import (
    PROVIDER,
    is_openai,
    strict_openai_call,
)

MODES = pytest.mark.parametrize("mode", ["sync", "async"])
REQUEST = ModelRequest(
    system="system",
    user="user",
    max_tokens=16,
    json_schema={"type": "object"},
    timeout=5.0,
    prompt_version="test",
)
MESSAGES = [ChatMessage(role="user", content="hi")]


async def _chat(llm, mode: str) -> None:
    if mode == "sync":
        llm.chat(MESSAGES)
    else:
        await llm.achat(MESSAGES)


def test_openai_llms_cache_their_client_in_private_attributes_that_copies_share(fake_openai):
    for name in ("_client", "_aclient"):
        assert name in OpenAI.__private_attributes__
    llm = fake_openai.llm()
    assert is_openai(llm)
    client, aclient = llm._get_client(), llm._get_aclient()
    assert (llm._client, llm._aclient) == (client, aclient)
    assert client.max_retries == aclient.max_retries == 3
    # Why the strict copy is given a client of its own: a copy shares the cached, retrying one.
    copy = llm.model_copy(update={"max_retries": 0})
    assert copy._get_client() is client


@MODES
async def test_the_llm_calls_through_the_client_in_its_private_attribute(mode, fake_openai):
    seen: list[httpx.Request] = []

    def fail(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, json={"error": {"message": "crafted", "type": "server_error"}})

    copy = fake_openai.llm().model_copy(update={"max_retries": 0})
    settings = {"base_url": "http://other.test/v1", "api_key": "sk-test", "max_retries": 0}
    if mode == "sync":
        copy._client = openai.OpenAI(
            **settings, http_client=httpx.Client(transport=httpx.MockTransport(fail))
        )
    else:
        copy._aclient = openai.AsyncOpenAI(
            **settings, http_client=httpx.AsyncClient(transport=httpx.MockTransport(fail))
        )

    with pytest.raises(openai.InternalServerError):
        await _chat(copy, mode)

    assert len(seen) == 1
    assert fake_openai.attempts == 0  # the LLM's own client was not used


@MODES
async def test_a_strict_copy_sends_one_request_on_a_500(mode, fake_openai):
    fake_openai.status = 500
    llm = fake_openai.llm()
    cached = llm._get_client() if mode == "sync" else llm._get_aclient()  # with 3 retries
    strict, kwargs = strict_openai_call(REQUEST, llm, mode == "async", ModelProfile())

    with pytest.raises(openai.InternalServerError):
        await _chat(strict, mode)

    assert kwargs == {}
    assert fake_openai.attempts == 1
    assert fake_openai.bodies[0]["max_tokens"] == 16
    assert cached.max_retries == 3  # the caller's client is untouched


def test_additional_kwargs_stand_over_the_class_own_temperature_and_output_limit():
    # What the strict call relies on to send a reasoning model (or one the rules do not know)
    # no temperature and max_completion_tokens: the class's own keyword arguments give way to
    # additional_kwargs, and max_tokens left unset is not sent.
    llm = OpenAI(model="my-deployment", api_key="sk-test")
    profile = PROVIDER.profile(OpenAI(model="o3-mini", api_key="sk-test"))

    request = dataclasses.replace(REQUEST, temperature=None)
    strict, _ = strict_openai_call(request, llm, False, profile)
    sent = strict._get_model_kwargs()

    assert sent["temperature"] is openai.NOT_GIVEN
    assert "max_tokens" not in sent
    assert sent["max_completion_tokens"] == 16 + profile.output_allowance
    assert strict.max_retries == 0


def test_stream_options_reach_a_streamed_request_alone(fake_openai):
    # A strict copy for OpenAI's API carries stream_options (include_usage); LlamaIndex's
    # _get_model_kwargs keeps them only beside `stream`, which stream_chat alone passes.
    llm = fake_openai.llm(api_base="https://api.openai.com/v1")
    strict, _ = strict_openai_call(REQUEST, llm, False, ModelProfile())

    strict.chat(MESSAGES)
    list(strict.stream_chat(MESSAGES))

    chat_body, stream_body = fake_openai.bodies
    assert "stream_options" not in chat_body
    assert chat_body.get("stream") in (None, False)
    assert stream_body["stream"] is True
    assert stream_body["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in stream_body.items() if not k.startswith("stream")} == {
        k: v for k, v in chat_body.items() if not k.startswith("stream")
    }


@MODES
async def test_a_stream_closed_early_leaves_its_response_open_until_the_strict_call_closes_it(
    mode, loopback, openai_chunks, openai_events
):
    # Why the copy's view notes each response opened to stream: closing LlamaIndex's
    # stream_chat generator early does not close openai's Stream (it holds itself in a
    # reference cycle), nor so its HTTP response. The view's httpx client is its `_client`,
    # and openai sends through its `send(..., stream=True)`.
    from llama_index.llms.openai_like import OpenAILike

    from llama_index.response_synthesizers.evidence_first._provider import opened_streams

    loopback.streaming(openai_events(openai_chunks("x" * 50, 1)), interval=0.01)
    llm = OpenAILike(model="m", api_base=f"{loopback.url}/v1", api_key="k", is_chat_model=True)
    opened: list[httpx.Response] = []
    strict, _ = strict_openai_call(REQUEST, llm, mode == "async", ModelProfile())
    gc.disable()  # the collector, which would close it, does not run here
    try:
        with opened_streams(opened):
            if mode == "sync":
                chunks = strict.stream_chat(MESSAGES)
                next(chunks)
            else:
                chunks = await strict.astream_chat(MESSAGES)
                await chunks.__anext__()
        if mode == "sync":
            chunks.close()
        else:
            await chunks.aclose()
        (response,) = opened
        assert isinstance(response, httpx.Response)
        assert not response.is_closed  # left to the garbage collector
    finally:
        gc.enable()
    if mode == "sync":
        response.close()
    else:
        await response.aclose()
    assert response.is_closed
