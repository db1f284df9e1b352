"""Canaries: the LlamaIndex OpenAI internals that ``_openai`` touches still behave as it expects.

They fail loudly on an upgrade that renames or changes them, and they assert the behaviour
that matters (one HTTP request on a 500), not only names: a renamed attribute must never
silently bring retries back.
"""

from __future__ import annotations

from collections.abc import Collection

import httpx
import openai
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai.utils import O1_MODELS

from evidence_first import ModelRequest
from llama_index.response_synthesizers.evidence_first._openai import (
    is_openai,
    is_reasoning_model,
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
    strict, kwargs = strict_openai_call(REQUEST, llm, mode == "async")

    with pytest.raises(openai.InternalServerError):
        await _chat(strict, mode)

    assert kwargs == {}
    assert fake_openai.attempts == 1
    assert fake_openai.bodies[0]["max_tokens"] == 16
    assert cached.max_retries == 3  # the caller's client is untouched


def test_o1_models_still_names_the_reasoning_models_whose_temperature_openai_pins():
    assert isinstance(O1_MODELS, Collection)
    assert O1_MODELS
    assert all(isinstance(name, str) for name in O1_MODELS)
    assert "o3-mini" in O1_MODELS
    assert OpenAI(model="o3-mini", temperature=0.2, api_key="sk-test").temperature == 1.0
    assert is_reasoning_model("o3-mini")
    assert not is_reasoning_model("gpt-4.1-mini")


def test_a_reasoning_model_keeps_its_pinned_temperature():
    llm = OpenAI(model="o3-mini", api_key="sk-test")

    strict, _ = strict_openai_call(REQUEST, llm, False)

    assert strict.temperature == 1.0
    assert strict.max_retries == 0
