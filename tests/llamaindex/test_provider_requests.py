"""Each allow-listed LLM class, real and unpatched, sends a request its provider accepts.

``EvidenceSynthesizer(llm=...)`` runs against a loopback server or an ``httpx.MockTransport``
and the exact request body is checked: the ledger schema in the provider's native field,
written with its dialect's keywords only (``DIALECTS[name].keywords``), the output limit,
temperature 0, no tools. A provider 500 or 429 costs exactly one HTTP request, counted where
the requests arrive, so every attempt a client makes (retries included) is seen.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import httpx
import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

from evidence_first import ModelCallError, ModelRequest
from evidence_first.adapters import DIALECTS, DialectName, schema_in
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer
from llama_index.response_synthesizers.evidence_first._openai import dialect_for
from llama_index.response_synthesizers.evidence_first._strict_call import AsyncLLMReader, LLMReader

QUESTION = "When is the Apollo launch?"
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
FAILURES = pytest.mark.parametrize("status", [500, 429])


@pytest.fixture
def launch_nodes(launch_quote) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(id_="notes", text=f"Standup: {launch_quote}. Ravi owns it."), score=2.0
        ),
        NodeWithScore(node=TextNode(id_="budget", text="Budget review is Friday."), score=1.0),
    ]


@pytest.fixture
def sent(monkeypatch) -> list[ModelRequest]:
    """The requests the synthesizer hands its reader, to compare with what went on the wire."""
    requests: list[ModelRequest] = []
    generate, agenerate = LLMReader.generate, AsyncLLMReader.agenerate

    def spy(self, request: ModelRequest):
        requests.append(request)
        return generate(self, request)

    async def aspy(self, request: ModelRequest):
        requests.append(request)
        return await agenerate(self, request)

    monkeypatch.setattr(LLMReader, "generate", spy)
    monkeypatch.setattr(AsyncLLMReader, "agenerate", aspy)
    return requests


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
            "openai",
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


def test_llama_index_azure_openai_is_sent_the_openai_dialect_whatever_its_endpoint(monkeypatch):
    # llama-index-llms-azure-openai is not installed here: a subclass stands in for its class.
    module = types.ModuleType("llama_index.llms.azure_openai")

    class AzureOpenAI(OpenAI):
        pass

    module.AzureOpenAI = AzureOpenAI  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    llm = AzureOpenAI(model="gpt-4.1-mini", api_key="sk-test")

    assert dialect_for(llm, "https://gateway.example.com/openai") == "openai"
    assert dialect_for(OpenAI(model="gpt-4.1-mini", api_key="sk-test"), "http://x/v1") == (
        "json-schema"
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
    mode, loopback, launch_nodes, sent, make_ledger
):
    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        message = {"role": "assistant", "content": make_ledger(user)}
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
    # The body the cassettes were recorded with: the request's schema, byte for byte.
    assert json.dumps(schema) == json.dumps(sent[0].json_schema)


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
