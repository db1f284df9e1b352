"""Canaries: what each provider module relies on in its framework still holds.

Each allow-list module (``_openai``, ``_anthropic``, ``_ollama``, ``_google``, ``_mistral``)
names in its docstring the framework behaviour or internals it depends on. These tests fail
loudly when an upgrade changes them, and they assert the behaviour that matters (one HTTP
request on a 500, a client that gives up at the timeout), not only names: a renamed attribute
must never silently bring retries back.
"""

from __future__ import annotations

import functools
import inspect
import time

import anthropic
import ollama
import openai
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_mistralai import ChatMistralAI
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

from evidence_first import Evidence, ModelRequest
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.passages import SentSources
from evidence_first._sending.schema import ledger_schema
from evidence_first.adapters import AnswerOptions, schema_in
from langchain_evidence_first._anthropic import CACHED_CLIENTS
from langchain_evidence_first._chat_model import StrictChatModel, strict_chat_model

MODES = pytest.mark.parametrize("mode", ["sync", "async"])
REQUEST = ModelRequest(
    system="system",
    user="user",
    max_tokens=16,
    json_schema=ledger_schema(
        QuoteStyle().shape(SentSources((Evidence(id="a", text="A."),))),
        AnswerOptions(knowledge="evidence-only", max_output_tokens=16),
    ),
    timeout=5.0,
    prompt_version="test",
)


async def _call(strict: StrictChatModel, mode: str) -> None:
    messages = [SystemMessage("system"), HumanMessage("user")]
    kwargs = strict.call_kwargs(REQUEST)  # the same per-call arguments as the answerer's
    if mode == "sync":
        strict.model.invoke(messages, **kwargs)
        return
    async with strict.async_model() as model:
        await model.ainvoke(messages, **kwargs)


# _openai: no private attribute; ChatOpenAI builds retrying clients at construction.


def test_chat_openai_builds_its_retrying_clients_at_construction():
    llm = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    assert llm.root_client.max_retries == 2
    assert llm.client is not None
    assert llm.async_client is not None
    # Why a copy with max_retries=0 is not enough: it keeps the clients built with retries.
    copy = llm.model_copy(update={"max_retries": 0})
    assert copy.root_client is llm.root_client
    assert copy.root_client.max_retries == 2


@MODES
async def test_a_strict_chat_openai_sends_one_request_on_a_500(mode, loopback):
    endpoint = loopback.answering(500, {"error": {"message": "crafted", "type": "server_error"}})
    llm = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test", base_url=f"{endpoint.url}/v1")
    strict = strict_chat_model(llm, timeout=5.0, max_tokens=16)

    with pytest.raises(openai.InternalServerError):
        await _call(strict, mode)

    bodies = endpoint.bodies
    assert len(bodies) == 1
    # A loopback server is not OpenAI: the schema goes in standard JSON Schema, every bound
    # included (quote mode's patterns, which it lacks, leave one object per citation).
    sent = bodies[0]["response_format"]["json_schema"]["schema"]
    assert sent == schema_in(REQUEST.json_schema, "json-schema")


# _anthropic: ChatAnthropic's clients are cached properties in the instance __dict__.


def test_chat_anthropic_still_caches_its_clients_as_cached_properties():
    for name in CACHED_CLIENTS:
        assert isinstance(inspect.getattr_static(ChatAnthropic, name), functools.cached_property)
    llm = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-ant-test")
    client = llm._client
    assert llm.__dict__["_client"] is client
    assert client.max_retries == 2
    # Why the strict copy drops them: model_copy copies the cache, retrying client and all.
    assert llm.model_copy(update={"max_retries": 0})._client is client


@MODES
async def test_a_strict_chat_anthropic_sends_one_request_on_a_500(mode, loopback):
    endpoint = loopback.answering(500, {"type": "error", "error": {"type": "api_error"}})
    llm = ChatAnthropic(model="claude-haiku-4-5", api_key="sk-ant-test", base_url=endpoint.url)
    # Ordinary use first: the clients are built and cached with the default two retries.
    assert llm._client.max_retries == 2
    assert llm._async_client.max_retries == 2
    strict = strict_chat_model(llm, timeout=5.0, max_tokens=16)

    with pytest.raises(anthropic.InternalServerError):
        await _call(strict, mode)

    bodies = endpoint.bodies
    assert len(bodies) == 1
    assert bodies[0]["max_tokens"] == 16
    # ChatAnthropic passes a call's output_config through to the Messages API.
    assert bodies[0]["output_config"]["format"] == {
        "type": "json_schema",
        "schema": schema_in(REQUEST.json_schema, "anthropic"),
    }


# _ollama: no private attribute; the ollama client does not retry.


@MODES
async def test_a_strict_chat_ollama_sends_one_request_on_a_500(mode, loopback):
    assert not any("retr" in name for name in ChatOllama.model_fields)
    endpoint = loopback.answering(500, {"error": "crafted"})
    strict = strict_chat_model(
        ChatOllama(model="llama3.2", base_url=endpoint.url), timeout=5.0, max_tokens=16
    )

    with pytest.raises(ollama.ResponseError):
        await _call(strict, mode)

    bodies = endpoint.bodies
    assert len(bodies) == 1
    assert bodies[0]["options"]["num_predict"] == 16
    assert bodies[0]["options"]["temperature"] == 0.0
    assert bodies[0]["format"] == schema_in(REQUEST.json_schema, "full")


# _openai, _anthropic, _google, _mistral: the strict copy's own client gives up at the timeout
# (the engine's deadline aside). ChatMistralAI fixes its httpx clients' timeout at
# construction, so _mistral relies on their public per-request `timeout`.

TIMED = pytest.mark.parametrize(
    "build",
    [
        lambda url: ChatOpenAI(model="m", api_key="sk-test", base_url=f"{url}/v1"),
        lambda url: ChatAnthropic(model="claude-haiku-4-5", api_key="sk-ant-test", base_url=url),
        lambda url: ChatGoogleGenerativeAI(model="gemini-2.5-flash", api_key="k", base_url=url),
        lambda url: ChatMistralAI(model="mistral-small-latest", api_key="k", base_url=url),
    ],
    ids=["openai", "anthropic", "google", "mistral"],
)


@TIMED
@MODES
# google-genai's async client subclasses aiohttp's ClientSession, which aiohttp 3.14 deprecates.
@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
async def test_the_strict_client_gives_up_at_the_timeout_after_one_request(mode, build, loopback):
    endpoint = loopback.answering(200, {}, delay=3.0)
    strict = strict_chat_model(build(endpoint.url), timeout=0.5, max_tokens=16)
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # noqa: PT011 - each SDK has its own timeout error
        await _call(strict, mode)
    assert time.monotonic() - started < 2.5
    assert any("timeout" in cls.__name__.lower() for cls in type(info.value).__mro__)
    assert len(endpoint.requests) == 1
