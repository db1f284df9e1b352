"""Each allow-listed LLM class, real and unpatched, sends a request its provider accepts.

``EvidenceSynthesizer(llm=...)`` runs against a loopback server or an ``httpx.MockTransport``
and the exact request body is checked: the ledger schema in the provider's native field,
written with its dialect's keywords only (``DIALECTS[name].keywords``), the output limit,
temperature 0, no tools. A provider 500 or 429 costs exactly one HTTP request, counted where
the requests arrive, so every attempt a client makes (retries included) is seen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import pytest
from llama_index.core.base.response.schema import AsyncStreamingResponse
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

from evidence_first import InvalidRequestError, ModelCallError, ModelProfile, ModelRequest
from evidence_first.adapters import DIALECTS, DialectName, outcome_text, schema_in
from llama_index.response_synthesizers.evidence_first import (
    EvidenceSynthesizer,
    UnenforcedSettingsWarning,
)
from llama_index.response_synthesizers.evidence_first._anthropic import strict_anthropic_call
from llama_index.response_synthesizers.evidence_first._openai import family_for
from llama_index.response_synthesizers.evidence_first._strict_call import reader_for

QUESTION = "When is the Apollo launch?"
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
FAILURES = pytest.mark.parametrize("status", [500, 429])


async def synthesize(synthesizer: EvidenceSynthesizer, nodes, mode: str):
    if mode == "sync":
        return synthesizer.synthesize(QUESTION, nodes)
    return await synthesizer.asynthesize(QUESTION, nodes)


def keywords_in(schema: dict[str, Any]) -> set[str]:
    """Every keyword a schema uses, at any depth (property names are not keywords)."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        found.update(node)
        stack.extend(node.get("properties", {}).values())
        stack.extend(node.get("anyOf", ()))
        if "items" in node:
            stack.append(node["items"])
    return found


def assert_in_dialect(schema: dict[str, Any], request: ModelRequest, dialect: DialectName) -> None:
    assert schema == schema_in(request.json_schema, dialect)
    assert keywords_in(schema) <= DIALECTS[dialect].keywords


# OpenAI and OpenAI-compatible servers: `response_format`.


def openai_llm(fake_openai, cls: type[OpenAI], **settings: Any) -> OpenAI:
    transport = httpx.MockTransport(fake_openai.handle)
    return cls(
        model="gpt-4.1-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **settings,
    )


@pytest.mark.parametrize(
    ("cls", "settings", "dialect"),
    [
        (OpenAI, {}, "openai"),
        (OpenAI, {"api_base": "https://api.openai.com/v1"}, "openai"),
        (
            OpenAILike,
            {"api_base": "https://my-resource.openai.azure.com/openai/v1", "is_chat_model": True},
            "azure-openai",
        ),
        (
            OpenAILike,
            {"api_base": "http://vllm.internal:8000/v1", "is_chat_model": True},
            "json-schema",
        ),
    ],
    ids=["openai-default", "openai-host", "azure-host", "other-host"],
)
@MODES
async def test_openai_llms_send_the_schema_in_the_dialect_of_their_host(
    cls, settings, dialect, mode, fake_openai, launch_nodes, sent, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    synthesizer = EvidenceSynthesizer(
        llm=openai_llm(fake_openai, cls, **settings), max_output_tokens=300
    )

    response = await synthesize(synthesizer, launch_nodes, mode)

    assert response.metadata["evidence_answer"].status == "answered"
    (body,) = fake_openai.bodies
    (request,) = sent
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    assert_in_dialect(response_format["json_schema"]["schema"], request, dialect)
    assert body["max_tokens"] == 300
    assert body["temperature"] == 0.0
    assert not {"tools", "tool_choice", "functions"} & set(body)
    assert len(fake_openai.requests) == 1


def test_llama_index_azure_openai_is_sent_the_azure_dialect_whatever_its_endpoint(monkeypatch):
    # llama-index-llms-azure-openai is not installed here: a subclass stands in for its class.
    module = types.ModuleType("llama_index.llms.azure_openai")

    class AzureOpenAI(OpenAI):
        pass

    module.AzureOpenAI = AzureOpenAI  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    llm = AzureOpenAI(model="gpt-4.1-mini", api_key="sk-test")

    assert family_for(llm, "https://gateway.example.com/openai") == "azure-openai"
    assert family_for(OpenAI(model="gpt-4.1-mini", api_key="sk-test"), "http://x/v1") == (
        "openai-compatible"
    )


@MODES
async def test_openai_strict_mode_gets_no_string_lengths(mode, fake_openai, launch_nodes, sent):
    synthesizer = EvidenceSynthesizer(
        llm=openai_llm(fake_openai, OpenAI, api_base="https://api.openai.com/v1")
    )

    await synthesize(synthesizer, launch_nodes, mode)

    schema = fake_openai.bodies[0]["response_format"]["json_schema"]["schema"]
    assert {"minLength", "maxLength"} & keywords_in(sent[0].json_schema)  # the request has them
    assert not {"minLength", "maxLength"} & keywords_in(schema)


@MODES
async def test_a_loopback_openai_like_is_sent_the_request_schema_unchanged(
    mode, loopback, launch_nodes, sent, ledger_for
):
    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        message = {"role": "assistant", "content": ledger_for(user)}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }

    loopback.reply = reply
    llm = OpenAILike(
        model="local", api_base=f"{loopback.url}/v1", api_key="sk-test", is_chat_model=True
    )
    synthesizer = EvidenceSynthesizer(llm=llm)

    response = await synthesize(synthesizer, launch_nodes, mode)

    assert response.metadata["evidence_answer"].status == "answered"
    (received,) = loopback.posts
    assert received.path == "/v1/chat/completions"
    schema = received.body["response_format"]["json_schema"]["schema"]
    # The body the cassettes were recorded with: the request's schema written in standard JSON
    # Schema, byte for byte.
    assert json.dumps(schema) == json.dumps(schema_in(sent[0].json_schema, "json-schema"))


@FAILURES
@MODES
async def test_the_openai_api_is_sent_one_request_on_a_provider_error(
    status, mode, fake_openai, launch_nodes
):
    fake_openai.status = status
    llm = openai_llm(fake_openai, OpenAI, api_base="https://api.openai.com/v1")
    assert llm.max_retries == 3

    with pytest.raises(ModelCallError):
        await synthesize(EvidenceSynthesizer(llm=llm), launch_nodes, mode)

    assert fake_openai.attempts == 1
    assert fake_openai.requests[0].url.host == "api.openai.com"


# Gemini (GoogleGenAI): `generationConfig.responseJsonSchema`.

GEMINI_MODEL = "gemini-2.5-flash"
# google-genai's async transport subclasses aiohttp.ClientSession, which aiohttp 3.14 warns
# about when the first session is made; it is not ours to fix.
AIOHTTP_SUBCLASS = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)
GEMINI_META = {
    "name": f"models/{GEMINI_MODEL}",
    "inputTokenLimit": 1_048_576,
    "outputTokenLimit": 65_536,
}


def gemini_answer(ledger_for, body: dict[str, Any]) -> dict[str, Any]:
    user = body["contents"][-1]["parts"][0]["text"]
    candidate = {
        "content": {"role": "model", "parts": [{"text": ledger_for(user)}]},
        "finishReason": "STOP",
    }
    usage = {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18}
    return {"candidates": [candidate], "usageMetadata": usage}


@pytest.fixture
def gemini(loopback, ledger_for):
    """A loopback Gemini API: model metadata on GET, a ledger on generateContent."""
    loopback.reply = lambda path, body: (
        GEMINI_META if body is None else gemini_answer(ledger_for, body)
    )
    return loopback


def mock_gemini_llm(handle: Callable[[httpx.Request], httpx.Response]):
    """A GoogleGenAI whose clients, sync and async, are answered by ``handle``."""
    from llama_index.llms.google_genai import GoogleGenAI

    transport = httpx.MockTransport(handle)
    return GoogleGenAI(
        model=GEMINI_MODEL,
        api_key="test-key",
        http_options={
            "httpx_client": httpx.Client(transport=transport),
            "httpx_async_client": httpx.AsyncClient(transport=transport),
        },
    )


def gemini_llm(base_url: str, **settings: Any):
    from llama_index.llms.google_genai import GoogleGenAI

    return GoogleGenAI(
        model=GEMINI_MODEL, api_key="test-key", http_options={"base_url": base_url}, **settings
    )


@AIOHTTP_SUBCLASS
@MODES
async def test_gemini_gets_the_schema_as_response_json_schema(mode, gemini, launch_nodes, sent):
    llm = gemini_llm(gemini.url, temperature=0.7)
    gemini.requests.clear()  # the model metadata GoogleGenAI fetched when built
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=300)

    response = await synthesize(synthesizer, launch_nodes, mode)

    answer = response.metadata["evidence_answer"]
    assert answer.status == "answered"
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (11, 7)
    (received,) = gemini.requests
    assert received.path == f"/v1beta/models/{GEMINI_MODEL}:generateContent"
    config = received.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert_in_dialect(config["responseJsonSchema"], sent[0], "gemini-json")
    assert "responseSchema" not in config
    assert config["maxOutputTokens"] == 300
    assert config["temperature"] == 0.0
    assert not {"tools", "toolConfig"} & set(received.body)
    assert received.body["systemInstruction"]["parts"][0]["text"] == sent[0].system


def test_gemini_3_is_sent_no_temperature_as_googlegenai_leaves_it_unset(gemini, launch_nodes):
    from llama_index.llms.google_genai import GoogleGenAI

    llm = GoogleGenAI(
        model="gemini-3-flash-preview", api_key="test-key", http_options={"base_url": gemini.url}
    )
    assert llm.temperature is None
    gemini.requests.clear()

    EvidenceSynthesizer(llm=llm).synthesize(QUESTION, launch_nodes)

    config = gemini.posts[0].body["generationConfig"]
    assert "temperature" not in config
    assert config["responseMimeType"] == "application/json"


@MODES
async def test_gemini_is_sent_the_timeout_in_the_request(mode, launch_nodes, ledger_for):
    # google-genai's own hook for an httpx client: the timeout of each request is visible.
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content) if request.content else None
        return httpx.Response(
            200, json=GEMINI_META if body is None else gemini_answer(ledger_for, body)
        )

    llm = mock_gemini_llm(handle)
    synthesizer = EvidenceSynthesizer(llm=llm, timeout=12.5)

    await synthesize(synthesizer, launch_nodes, mode)

    assert seen[-1].url.host == "generativelanguage.googleapis.com"
    assert seen[-1].extensions["timeout"]["read"] == 12.5


@AIOHTTP_SUBCLASS
@FAILURES
@MODES
async def test_gemini_is_sent_one_request_on_a_provider_error(status, mode, gemini, launch_nodes):
    # Retries configured on the client too (google-genai's HttpRetryOptions): still one.
    from llama_index.llms.google_genai import GoogleGenAI

    llm = GoogleGenAI(
        model=GEMINI_MODEL,
        api_key="test-key",
        http_options={
            "base_url": gemini.url,
            "retry_options": {"attempts": 5, "initial_delay": 0.01},
        },
    )
    assert llm.max_retries == 3
    gemini.requests.clear()
    gemini.status = status

    with pytest.raises(ModelCallError) as raised:
        await synthesize(EvidenceSynthesizer(llm=llm), launch_nodes, mode)

    assert len(gemini.requests) == 1
    assert raised.value.cause_type.startswith("google.genai.errors.")
    assert "crafted failure" not in str(raised.value)


# Ollama: `format` (a grammar) and `options`.


def ollama_answer(ledger_for, body: dict[str, Any]) -> dict[str, Any]:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return {
        "model": body["model"],
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": ledger_for(user)},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 11,
        "eval_count": 7,
    }


def ollama_llm(base_url: str, **settings: Any):
    from llama_index.llms.ollama import Ollama

    # A known context window: otherwise Ollama asks the server for it (/api/show) first.
    return Ollama(model="qwen3:4b", base_url=base_url, context_window=8192, **settings)


@MODES
async def test_ollama_gets_the_schema_as_format_and_the_limit_as_num_predict(
    mode, loopback, launch_nodes, sent, ledger_for
):
    loopback.reply = lambda path, body: ollama_answer(ledger_for, body)
    llm = ollama_llm(
        loopback.url,
        temperature=0.8,
        additional_kwargs={"num_predict": 4000, "top_k": 20, "temperature": 1.2},
    )
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=300)

    response = await synthesize(synthesizer, launch_nodes, mode)

    answer = response.metadata["evidence_answer"]
    assert answer.status == "answered"
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (11, 7)
    (received,) = loopback.requests
    assert received.path == "/api/chat"
    body = received.body
    assert_in_dialect(body["format"], sent[0], "full")
    assert "anyOf" in body["format"]  # the ledger's answered and abstained shapes
    assert body["options"]["num_predict"] == 300
    assert body["options"]["temperature"] == 0.0
    assert body["options"]["top_k"] == 20  # options this call does not set are kept
    assert body["options"]["num_ctx"] == 8192
    assert body["stream"] is False
    assert not body.get("tools")
    assert llm.additional_kwargs["num_predict"] == 4000  # the caller's LLM is unchanged


def test_ollama_num_predict_smaller_than_ours_is_the_limit_sent(loopback, launch_nodes, ledger_for):
    loopback.reply = lambda path, body: ollama_answer(ledger_for, body)
    llm = ollama_llm(loopback.url, additional_kwargs={"num_predict": 200})

    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=2048)
    synthesizer.synthesize(QUESTION, launch_nodes)

    assert synthesizer.options.max_output_tokens == 200
    assert loopback.posts[0].body["options"]["num_predict"] == 200


@FAILURES
@MODES
async def test_ollama_is_sent_one_request_on_a_provider_error(status, mode, loopback, launch_nodes):
    loopback.status = status

    with pytest.raises(ModelCallError) as raised:
        await synthesize(EvidenceSynthesizer(llm=ollama_llm(loopback.url)), launch_nodes, mode)

    assert len(loopback.requests) == 1
    assert raised.value.cause_type == "ollama._types.ResponseError"
    assert "crafted failure" not in str(raised.value)


# Anthropic: `output_config.format` (structured outputs).

ANTHROPIC_MODEL = "claude-sonnet-4-5"
# llama-index-llms-anthropic 0.12.3 builds each message as `MessageParam(...)`, which anthropic
# 2.x turned into a Union of TypedDicts that cannot be called; it also passes `temperature`,
# which anthropic 2.x's messages.create no longer takes. So Anthropic.chat raises TypeError
# before sending anything. Strict: this fails loudly once a release fixes it.
BROKEN_UPSTREAM = pytest.mark.xfail(
    reason="llama-index-llms-anthropic 0.12.3 cannot chat with anthropic 2.x (TypeError)",
    strict=True,
)


def anthropic_answer(ledger_for, body: dict[str, Any]) -> dict[str, Any]:
    user = body["messages"][-1]["content"]
    text = user if isinstance(user, str) else user[0]["text"]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": ledger_for(text)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }


def anthropic_llm(base_url: str, **settings: Any):
    from llama_index.llms.anthropic import Anthropic

    settings = {"model": ANTHROPIC_MODEL, **settings}
    return Anthropic(base_url=base_url, api_key="sk-ant-test", max_tokens=4096, **settings)


def assert_anthropic_body(body: dict[str, Any], request: ModelRequest, max_tokens: int) -> None:
    output_format = body["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    assert_in_dialect(output_format["schema"], request, "anthropic")
    assert body["max_tokens"] == max_tokens
    assert body["stream"] is False
    assert not {"tools", "tool_choice", "mcp_servers"} & set(body)


@BROKEN_UPSTREAM
@MODES
async def test_anthropic_gets_the_schema_as_output_config(
    mode, loopback, launch_nodes, sent, ledger_for
):
    loopback.reply = lambda path, body: anthropic_answer(ledger_for, body)
    synthesizer = EvidenceSynthesizer(llm=anthropic_llm(loopback.url), max_output_tokens=300)

    response = await synthesize(synthesizer, launch_nodes, mode)

    assert response.metadata["evidence_answer"].status == "answered"
    (received,) = loopback.requests
    assert received.path == "/v1/messages"
    assert_anthropic_body(received.body, sent[0], 300)
    assert received.headers["x-stainless-retry-count"] == "0"


@BROKEN_UPSTREAM
@FAILURES
@MODES
async def test_anthropic_is_sent_one_request_on_a_provider_error(
    status, mode, loopback, launch_nodes
):
    loopback.status = status

    with pytest.raises(ModelCallError) as raised:
        await synthesize(EvidenceSynthesizer(llm=anthropic_llm(loopback.url)), launch_nodes, mode)

    assert len(loopback.requests) == 1
    assert raised.value.cause_type.startswith("anthropic.")


def test_anthropic_chat_fails_before_sending_with_the_installed_packages(loopback, launch_nodes):
    synthesizer = EvidenceSynthesizer(llm=anthropic_llm(loopback.url))

    with pytest.raises(ModelCallError) as raised:
        synthesizer.synthesize(QUESTION, launch_nodes)

    assert raised.value.cause_type == "builtins.TypeError"
    assert loopback.requests == []


# What the strict call prepares for the real Anthropic LLM, read where Anthropic.chat takes it
# (the copy's fields and clients, and `_get_all_kwargs()`, the arguments it passes to
# `messages.create` beside the messages): these pass whatever breaks the chat call above it.


@pytest.mark.parametrize(
    ("model", "temperature"),
    [("claude-sonnet-4-5", 0.0), ("claude-opus-4-7", None)],
    ids=["takes-temperature", "no-temperature"],
)
@pytest.mark.parametrize("citation_mode", ["quote", "passage"])
def test_the_strict_anthropic_call_prepares_the_planned_request(
    model, temperature, citation_mode, loopback, launch_nodes, sent
):
    llm = anthropic_llm(
        loopback.url, model=model, additional_kwargs={"output_config": {"effort": "low"}}
    )
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=300, citation_mode=citation_mode)
    with pytest.raises(ModelCallError):  # Anthropic.chat itself (BROKEN_UPSTREAM)
        synthesizer.synthesize(QUESTION, launch_nodes)
    (request,) = sent  # what the synthesizer planned for this LLM, by its profile
    assert request.temperature == temperature

    strict, kwargs = strict_anthropic_call(request, llm, False, reader_for(llm).profile)

    assert kwargs == {}  # everything travels on the copy
    arguments = strict._get_all_kwargs()
    expected = {"model", "max_tokens", "output_config"} | (
        {"temperature"} if temperature is not None else set()
    )
    assert set(arguments) == expected  # no tools, tool_choice or mcp_servers
    assert arguments["max_tokens"] == 300
    assert arguments.get("temperature") == temperature
    # The schema in the anthropic dialect as output_config.format; the caller's effort kept.
    output_format = arguments["output_config"]["format"]
    assert arguments["output_config"]["effort"] == "low"
    assert output_format["type"] == "json_schema"
    assert_in_dialect(output_format["schema"], request, "anthropic")
    assert (strict.max_retries, strict.timeout) == (0, request.timeout)
    for client in (strict._client, strict._aclient):
        assert (client.max_retries, client.timeout) == (0, request.timeout)
        assert str(client.base_url).startswith(loopback.url)
    # The caller's LLM is not changed.
    assert llm.max_retries == 10
    assert llm.additional_kwargs == {"output_config": {"effort": "low"}}
    assert loopback.requests == []


@pytest.fixture
def ledger_request(ledger_llm, launch_nodes, sent) -> ModelRequest:
    """A real request for the launch nodes (what every reader is handed), from a prompt-only LLM."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnenforcedSettingsWarning)
        synthesizer = EvidenceSynthesizer(llm=ledger_llm, max_output_tokens=300)
        synthesizer.synthesize(QUESTION, launch_nodes)
    return sent[-1]


async def send_as_anthropic_chat(strict: Any, call: dict[str, Any], mode: str) -> None:
    if mode == "sync":
        strict._client.messages.create(**call)
    else:
        await strict._aclient.messages.create(**call)


# A model the class sends no temperature for: anthropic 2.x's messages.create takes none.
NO_TEMPERATURE_MODEL = "claude-sonnet-5"
PROFILE = ModelProfile(dialect="anthropic", temperature=False, api="anthropic-messages")


@MODES
async def test_the_strict_anthropic_call_sends_output_config_without_retries(
    mode, loopback, ledger_request, ledger_for, anthropic_chat_call
):
    loopback.reply = lambda path, body: anthropic_answer(ledger_for, body)
    llm = anthropic_llm(
        loopback.url, model=NO_TEMPERATURE_MODEL, additional_kwargs={"stop_sequences": ["END"]}
    )
    strict, kwargs = strict_anthropic_call(ledger_request, llm, mode == "async", PROFILE)

    await send_as_anthropic_chat(strict, anthropic_chat_call(strict, ledger_request), mode)

    assert kwargs == {}
    (received,) = loopback.requests
    assert received.path == "/v1/messages"
    assert_anthropic_body(received.body, ledger_request, 300)
    assert received.body["stop_sequences"] == ["END"]  # settings this call does not set are kept
    assert received.headers["x-stainless-retry-count"] == "0"


@FAILURES
@MODES
async def test_the_strict_anthropic_call_makes_one_request_on_a_provider_error(
    status, mode, loopback, ledger_request, anthropic_chat_call
):
    loopback.status = status
    llm = anthropic_llm(loopback.url, model=NO_TEMPERATURE_MODEL)
    assert llm.max_retries == 10
    strict, _ = strict_anthropic_call(ledger_request, llm, mode == "async", PROFILE)

    with pytest.raises(anthropic.APIStatusError):
        await send_as_anthropic_chat(strict, anthropic_chat_call(strict, ledger_request), mode)

    assert len(loopback.requests) == 1


# Fine-tuned models, passage mode on OpenAI, and the limits checked before the call.

FINE_TUNED_REFUSES = {"minItems", "maxItems", "minLength", "maxLength", "pattern", "format"}


@pytest.mark.parametrize(
    "settings",
    [{}, {"api_base": "https://my-resource.openai.azure.com/openai/v1"}],
    ids=["openai", "azure-host"],
)
def test_a_fine_tuned_openai_model_is_sent_no_array_or_string_bounds(
    settings, fake_openai, launch_nodes, sent, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    llm = openai_llm(fake_openai, OpenAI, **settings)
    llm = llm.model_copy(update={"model": "ft:gpt-4.1-mini-2025-04-14:acme::B1a2c3"})
    response = EvidenceSynthesizer(llm=llm).synthesize(QUESTION, launch_nodes)
    assert response.metadata["evidence_answer"].status == "answered"
    (body,) = fake_openai.bodies
    schema = body["response_format"]["json_schema"]["schema"]
    assert not keywords_in(schema) & FINE_TUNED_REFUSES
    assert_in_dialect(schema, sent[0], "openai-fine-tuned")


def test_passage_mode_on_openai_sends_one_citation_object(fake_openai, launch_nodes, monkeypatch):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    llm = openai_llm(fake_openai, OpenAI)
    EvidenceSynthesizer(llm=llm, citation_mode="passage").synthesize(QUESTION, launch_nodes)
    (body,) = fake_openai.bodies
    schema = body["response_format"]["json_schema"]["schema"]
    citation = schema["properties"]["facts"]["items"]["properties"]["citations"]["items"]
    assert "anyOf" not in citation
    assert citation["properties"]["source_id"]["enum"] == [n.node.node_id for n in launch_nodes]


def test_a_schema_past_the_dialects_limits_is_refused_before_any_request(
    fake_openai, launch_nodes, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(
        DIALECTS, "openai", dataclasses.replace(DIALECTS["openai"], max_properties=3)
    )
    synthesizer = EvidenceSynthesizer(llm=openai_llm(fake_openai, OpenAI))
    with pytest.raises(InvalidRequestError, match="max_properties"):
        synthesizer.synthesize(QUESTION, launch_nodes)
    assert fake_openai.attempts == 0


# The reader's confidence: OpenAI and OpenAILike are asked for log-probabilities where read.


def _decided_reply(logprobs_of: Any, ledger_for: Any) -> Any:
    """Answer the launch question with a decision, and log-probabilities when asked."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        content = json.dumps({"answerable": "yes", **json.loads(ledger_for(user))})
        choice: dict[str, Any] = {"message": {"role": "assistant", "content": content}}
        if body.get("logprobs"):
            choice["logprobs"] = logprobs_of(content, 0.75)
        return choice

    return reply


@pytest.mark.parametrize(
    ("cls", "settings", "asked"),
    [
        (OpenAI, {}, True),
        (OpenAI, {"model": "o3-mini"}, False),  # a reasoning model refuses them
        (OpenAILike, {"api_base": "http://vllm.internal:8000/v1", "is_chat_model": True}, False),
        (
            OpenAILike,
            {"api_base": "http://vllm.internal:8000/v1", "is_chat_model": True, "logprobs": True},
            True,
        ),
    ],
    ids=["openai", "reasoning-model", "openai-like", "openai-like-said-yes"],
)
@MODES
async def test_openai_llms_are_asked_for_logprobs_where_they_are_read(
    cls, settings, asked, mode, fake_openai, launch_nodes, logprobs_of, ledger_for, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    fake_openai.reply = _decided_reply(logprobs_of, ledger_for)
    llm = openai_llm(fake_openai, cls).model_copy(update=settings)
    response = await synthesize(EvidenceSynthesizer(llm=llm), launch_nodes, mode)
    (body,) = fake_openai.bodies
    answer = response.metadata["evidence_answer"]
    assert answer.status == "answered"
    if asked:
        assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
        assert answer.reader_confidence == pytest.approx(0.75)
    else:
        assert not body.get("logprobs")
        assert answer.reader_confidence is None
    assert response.metadata["reader_confidence"] == answer.reader_confidence


def test_the_floor_holds_for_an_openai_llm(
    fake_openai, launch_nodes, logprobs_of, ledger_for, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    fake_openai.reply = _decided_reply(logprobs_of, ledger_for)
    llm = openai_llm(fake_openai, OpenAI)
    response = EvidenceSynthesizer(llm=llm, min_reader_confidence=0.8).synthesize(
        QUESTION, launch_nodes
    )
    answer = response.metadata["evidence_answer"]
    assert (answer.status, answer.abstention) == ("insufficient_evidence", "confidence_floor")
    assert response.response == outcome_text(answer)
    assert response.response.startswith(
        "No answer (insufficient_evidence). Missing evidence: the reader's confidence"
    )
    assert answer.facts  # the verified facts are kept


# Streaming (`EvidenceSynthesizer(streaming=True)`): the same strict request through
# `stream_chat`/`astream_chat`, answered with server-sent events by the loopback server.

STREAMING_CLASSES = pytest.mark.parametrize("cls", [OpenAI, OpenAILike])
TWO_SENTENCES = "The launch moved to June 15 [F1]. Ravi owns it [F1]."


def loopback_openai(cls: type[OpenAI], loopback: Any) -> OpenAI:
    """The real class, unpatched, pointed at the loopback server."""
    settings: dict[str, Any] = {"is_chat_model": True} if cls is OpenAILike else {}
    return cls(model="gpt-4.1-mini", api_base=f"{loopback.url}/v1", api_key="sk-test", **settings)


def ledger_content(ledger_for: Any, body: dict[str, Any], answer: str = TWO_SENTENCES) -> str:
    """The ledger answering from the sources a request's user message holds."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return json.dumps({"answerable": "yes", **json.loads(ledger_for(user, answer=answer))})


def completion(content: str) -> dict[str, Any]:
    """A chat completion holding ``content``, with its usage."""
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return {
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "id": "c",
        "choices": [choice],
        "usage": usage,
    }


async def streamed(response: Any) -> list[str]:
    """Every piece a streaming response yields."""
    if isinstance(response, AsyncStreamingResponse):
        return [text async for text in response.async_response_gen()]
    return list(response.response_gen)


@STREAMING_CLASSES
@MODES
async def test_a_streamed_answer_is_one_request_with_the_strict_settings(
    cls, mode, loopback, launch_nodes, ledger_for, openai_chunks, openai_events
):
    loopback.reply = lambda path, body: completion(ledger_content(ledger_for, body))
    plain = await synthesize(
        EvidenceSynthesizer(llm=loopback_openai(cls, loopback)), launch_nodes, mode
    )
    chat_body = loopback.body
    loopback.requests.clear()
    loopback.streaming(
        lambda body: openai_events(openai_chunks(ledger_content(ledger_for, body), 9))
    )

    response = await synthesize(
        EvidenceSynthesizer(llm=loopback_openai(cls, loopback), streaming=True), launch_nodes, mode
    )
    assert loopback.posts == []  # returned once planned
    pieces = await streamed(response)

    (received,) = loopback.posts  # one HTTP request, whatever the chunking
    assert received.path == "/v1/chat/completions"
    # chat's body, strict settings and all (schema, limit, temperature, no tools), streamed.
    assert received.body == {**chat_body, "stream": True}
    assert not {"tools", "tool_choice", "functions"} & set(received.body)
    assert received.headers.get("x-stainless-retry-count") == "0"
    assert len(pieces) >= 2
    assert "".join(pieces) == plain.response == "The launch moved to June 15. Ravi owns it."
    final = response.get_response() if mode == "sync" else await response.get_response()
    assert (
        final.metadata["evidence_answer"].as_dict() == plain.metadata["evidence_answer"].as_dict()
    )


@FAILURES
@STREAMING_CLASSES
@MODES
async def test_a_streamed_answer_is_one_request_on_a_provider_error(
    status, cls, mode, loopback, launch_nodes
):
    loopback.answering(status, None)
    llm = loopback_openai(cls, loopback)
    assert llm.max_retries == 3

    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)
    with pytest.raises(ModelCallError) as raised:
        await streamed(response)

    assert len(loopback.posts) == 1
    assert "crafted failure" not in str(raised.value)


@MODES
async def test_an_error_event_mid_stream_raises_without_its_payload(
    mode, loopback, launch_nodes, ledger_for, openai_chunks, openai_events
):
    secret = "payload-TOPSECRET-1138"

    def events(body: dict[str, Any]) -> list[str]:
        first = openai_chunks(ledger_content(ledger_for, body), 40)[:3]
        return openai_events([*first, {"error": {"message": secret, "type": "server_error"}}])

    loopback.streaming(events)
    llm = loopback_openai(OpenAILike, loopback)
    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)

    with pytest.raises(ModelCallError) as raised:
        await streamed(response)

    assert len(loopback.posts) == 1
    assert secret not in str(raised.value)
    assert raised.value.cause_type == "openai.APIError"


@MODES
async def test_a_redirect_answering_a_streamed_request_is_not_followed(
    mode, loopback_server, launch_nodes
):
    elsewhere = loopback_server(keep_alive=False)
    endpoint = loopback_server(keep_alive=False).answering(302, None)
    endpoint.headers = {"Location": f"{elsewhere.url}/collect?key=sk-test"}
    llm = loopback_openai(OpenAILike, endpoint)

    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)
    with pytest.raises(ModelCallError) as raised:
        await streamed(response)

    assert "302" in str(raised.value)
    assert elsewhere.url.removeprefix("http://") in str(raised.value)
    assert "collect" not in str(raised.value)
    # Nothing chained: the SDK's error, holding the redirect's body, is not kept.
    assert {raised.value.__cause__, raised.value.__context__} <= {None, raised.value}
    assert len(endpoint.posts) == 1
    assert elsewhere.requests == []


@MODES
async def test_closing_the_stream_closes_the_connection_within_a_second(
    mode, loopback, launch_nodes, ledger_for, openai_chunks, openai_events
):
    def events(body: dict[str, Any]) -> list[str]:
        # The facts at once, then the answer a character at a time: a long stream.
        answer = "June 15 [F1]." + " It moved [F1]." * 200
        content = ledger_content(ledger_for, body, answer)
        at = content.index('"answer"') + 30
        chunked = openai_chunks(content, 1)
        return openai_events(
            [chunked[0], *openai_chunks(content[:at], at)[1:2], *chunked[at + 1 :]]
        )

    stream = loopback.streaming(events, interval=0.02)
    llm = loopback_openai(OpenAILike, loopback)
    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)

    if mode == "sync":
        first = next(response.response_gen)
        response.response_gen.close()
    else:
        pieces = response.async_response_gen()
        first = await pieces.__anext__()
        await pieces.aclose()
    closed = time.monotonic()
    while stream.closed_at is None and time.monotonic() < closed + 5:
        await asyncio.sleep(0.01)

    assert first.startswith("June 15")
    assert stream.closed_at is not None, "the connection was still open 5 s later"
    assert stream.closed_at - closed < 1.0
    assert stream.written < 100  # of more than 2,800 events
    assert len(loopback.posts) == 1


@MODES
async def test_a_streamed_reply_gives_its_log_probabilities_as_chat_does(
    mode, loopback, launch_nodes, ledger_for, logprobs_of, openai_chunks, openai_events
):
    def events(body: dict[str, Any]) -> list[str]:
        content = ledger_content(ledger_for, body, "June 15")
        tokens = logprobs_of(content, 0.75)["content"]
        chunked = openai_chunks(content, len(content) + 1)[:1]
        for token in tokens:  # one chunk per token, each with its log-probabilities
            chunk = openai_chunks(token["token"], len(token["token"]) + 1)[1]
            chunk["choices"][0]["logprobs"] = {"content": [token]}
            chunked.append(chunk)
        return openai_events([*chunked, *openai_chunks("", 1)[-2:]])

    loopback.streaming(events)
    llm = OpenAI(
        model="gpt-4.1-mini", api_base=f"{loopback.url}/v1", api_key="sk-test", logprobs=True
    )
    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)

    await streamed(response)

    assert (loopback.body["logprobs"], loopback.body["top_logprobs"]) == (True, 10)
    answer = response.metadata["evidence_answer"]
    assert answer.status == "answered"
    assert answer.reader_confidence == pytest.approx(0.75)


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@MODES
async def test_ollama_streams_the_same_strict_request(mode, launch_nodes, ledger_for):
    # ollama's clients take an httpx transport: Ollama's own stream is NDJSON lines.
    import ollama

    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        answer = ollama_answer(ledger_for, body)
        if not body["stream"]:
            return httpx.Response(200, json=answer)
        content = answer["message"]["content"]
        lines = [
            {
                **answer,
                "message": {"role": "assistant", "content": content[at : at + 7]},
                "done": False,
                "done_reason": None,
                "prompt_eval_count": None,
                "eval_count": None,
            }
            for at in range(0, len(content), 7)
        ]
        last = {**answer, "message": {"role": "assistant", "content": ""}}
        return httpx.Response(200, content=ndjson(*lines, last))

    transport = httpx.MockTransport(handle)
    llm = ollama_llm(
        "http://ollama.test",
        client=ollama.Client(host="http://ollama.test", transport=transport),
        async_client=ollama.AsyncClient(host="http://ollama.test", transport=transport),
    )
    plain = await synthesize(EvidenceSynthesizer(llm=llm), launch_nodes, mode)

    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)
    pieces = await streamed(response)

    chat_body, stream_body = bodies  # one request each
    assert stream_body == {**chat_body, "stream": True}  # format, options: the same
    assert "".join(pieces) == plain.response == "June 15"
    answer = response.metadata["evidence_answer"]
    assert answer.as_dict() == plain.metadata["evidence_answer"].as_dict()
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (11, 7)  # the last line's


@AIOHTTP_SUBCLASS
@MODES
async def test_gemini_streams_the_same_strict_request(mode, launch_nodes, ledger_for):
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content) if request.content else None
        if body is None:
            return httpx.Response(200, json=GEMINI_META)
        answer = gemini_answer(ledger_for, body)
        if ":streamGenerateContent" not in request.url.path:
            return httpx.Response(200, json=answer)
        text = answer["candidates"][0]["content"]["parts"][0]["text"]
        events = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": text[at : at + 9]}]}}]}
            for at in range(0, len(text), 9)
        ]
        events[-1] = {**events[-1], "usageMetadata": answer["usageMetadata"]}
        events[-1]["candidates"][0]["finishReason"] = "STOP"
        sse = "".join(f"data: {json.dumps(event)}\r\n\r\n" for event in events)
        return httpx.Response(
            200, content=sse.encode(), headers={"content-type": "text/event-stream"}
        )

    llm = mock_gemini_llm(handle)
    plain = await synthesize(EvidenceSynthesizer(llm=llm), launch_nodes, mode)
    chat_body = json.loads(seen[-1].content)
    seen.clear()

    response = await synthesize(EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode)
    pieces = await streamed(response)

    (request,) = seen  # one request
    assert request.url.path == f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"
    assert json.loads(request.content) == chat_body  # the schema, limit, temperature: the same
    assert chat_body["generationConfig"]["responseMimeType"] == "application/json"
    assert "".join(pieces) == plain.response == "June 15"
    answer = response.metadata["evidence_answer"]
    assert answer.as_dict() == plain.metadata["evidence_answer"].as_dict()


@MODES
async def test_the_openai_api_and_servers_that_give_it_are_asked_for_a_streams_usage(
    mode, fake_openai, launch_nodes, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for llm, asked in (
        (openai_llm(fake_openai, OpenAI), True),  # api.openai.com
        (fake_openai.llm(), False),  # another server
        (
            fake_openai.llm(
                model="gpt-4.1-mini", api_base="https://my-resource.openai.azure.com/openai/v1"
            ),
            False,  # Azure OpenAI: API versions before 2024-08-01-preview refuse it
        ),
        # A server whose profile says it gives the usage when asked (the embedded models'
        # llama.cpp server: ModelProfile.stream_usage).
        (fake_openai.llm(model="qwen2.5-coder-1.5b"), True),
    ):
        fake_openai.requests.clear()
        response = await synthesize(
            EvidenceSynthesizer(llm=llm, streaming=True), launch_nodes, mode
        )
        await streamed(response)

        (body,) = fake_openai.bodies
        assert body["stream"] is True
        assert ("stream_options" in body) is asked
        if asked:
            assert body["stream_options"] == {"include_usage": True}
