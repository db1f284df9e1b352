"""Each allow-listed provider's request, as its real client class sends it over HTTP.

``EvidenceAnswerer`` calls the framework's own chat model class, pointed at a loopback server
(or, for OpenAI's and Azure's own hosts, an ``httpx.MockTransport``); the tests read the body
that arrived: the schema in the provider's native structured-output field, written in its
dialect only (``DIALECTS[name].keywords``), the output limit, temperature 0, no tools. A
provider 500 or 429 must cost exactly one HTTP request, counted as the requests the client
attempted. (The client-side timeout is a canary: ``test_provider_canaries.py``.)
"""

from __future__ import annotations

import dataclasses
import gc
import json
import warnings
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_mistralai import ChatMistralAI
from langchain_ollama import ChatOllama
from langchain_openai import AzureChatOpenAI, ChatOpenAI

from evidence_first import Evidence, InvalidRequestError, ModelCallError
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.passages import SentSources
from evidence_first._sending.schema import ledger_schema
from evidence_first.adapters import DIALECTS, AnswerOptions, schema_in
from langchain_evidence_first import EvidenceAnswerer, UnenforcedSettingsWarning

SOURCE = Evidence(id="a", text="The launch moved to June 15.")
QUESTION = {"question": "When is the launch?", "sources": [SOURCE]}
LIMIT = 300
CITATION = {"source_id": "a", "quote": "The launch moved to June 15."}
FACT = {"subject": "launch", "relation": "moved to", "object": "June 15", "citations": [CITATION]}
LEDGER = json.dumps(
    {"facts": [FACT], "answer": "June 15", "inference": None, "missing_evidence": []}
)
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
ERRORS = pytest.mark.parametrize("status", [500, 429])
# google-genai's async client subclasses aiohttp's ClientSession, which aiohttp 3.14 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
)


def _built(dialect: str) -> dict[str, Any]:
    """The request's schema as the engine builds it for a model of ``dialect``.

    That is ``ModelRequest.json_schema``: with anchored-quote patterns where the dialect
    reads them.
    """
    patterns = DIALECTS[dialect].reads_patterns  # type: ignore[index]
    return ledger_schema(
        QuoteStyle().shape(SentSources((SOURCE,)), patterns=patterns),
        AnswerOptions(knowledge="evidence-only", max_output_tokens=LIMIT),
    )


def _keywords(node: dict[str, Any]) -> set[str]:
    """The schema keywords used anywhere in ``node`` (property names are not keywords)."""
    found = set(node)
    for sub in [*node.get("properties", {}).values(), *node.get("anyOf", ())]:
        found |= _keywords(sub)
    if isinstance(node.get("items"), dict):
        found |= _keywords(node["items"])
    return found


def _assert_in_dialect(schema: dict[str, Any], dialect: str) -> None:
    assert schema == schema_in(_built(dialect), dialect)  # type: ignore[arg-type]
    assert _keywords(schema) <= DIALECTS[dialect].keywords  # type: ignore[index]


async def _answer(llm: Any, mode: str) -> Any:
    answerer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT)
    return answerer.invoke(QUESTION) if mode == "sync" else await answerer.ainvoke(QUESTION)


# Each provider's reply carrying the same ledger, in its wire format.

OPENAI_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": LEDGER}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": LEDGER}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
OLLAMA_REPLY = {
    "model": "llama3.2",
    "created_at": "2026-01-01T00:00:00Z",
    "message": {"role": "assistant", "content": LEDGER},
    "done": True,
    "done_reason": "stop",
}
GEMINI_REPLY = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": LEDGER}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}

# Each provider's real class against a loopback server, and the error body it sends.
LOOPBACK = {
    "openai-elsewhere": (
        lambda url: ChatOpenAI(model="m", api_key="sk-test", base_url=f"{url}/v1"),
        {"error": {"message": "crafted", "type": "server_error"}},
    ),
    "anthropic": (
        lambda url: ChatAnthropic(model="claude-haiku-4-5", api_key="sk-ant-test", base_url=url),
        {"type": "error", "error": {"type": "api_error", "message": "crafted"}},
    ),
    "ollama": (lambda url: ChatOllama(model="llama3.2", base_url=url), {"error": "crafted"}),
    "google": (
        lambda url: ChatGoogleGenerativeAI(model="gemini-2.5-flash", api_key="k", base_url=url),
        {"error": {"code": 500, "message": "crafted", "status": "INTERNAL"}},
    ),
    "mistral": (
        lambda url: ChatMistralAI(model="mistral-small-latest", api_key="k", base_url=url),
        {"object": "error", "message": "crafted"},
    ),
}


def _on(provider: str, url: str) -> Any:
    return LOOPBACK[provider][0](url)


@MODES
@ERRORS
@pytest.mark.parametrize("provider", sorted(LOOPBACK))
# langchain-core reads a failed call's body with `response.json()`: on google-genai's aiohttp
# response that is a coroutine nobody awaits. It is collected below, under this filter.
@pytest.mark.filterwarnings("ignore:coroutine 'ClientResponse.json' was never awaited")
async def test_a_provider_error_costs_exactly_one_request(mode, status, provider, loopback):
    endpoint = loopback.answering(status, LOOPBACK[provider][1])
    with pytest.raises(ModelCallError) as info:
        await _answer(_on(provider, endpoint.url), mode)
    assert len(endpoint.requests) == 1
    del info
    gc.collect()


# ChatOpenAI: OpenAI's strict subset on OpenAI and Azure, the schema as built elsewhere.


def _mock_openai(cls: type, recorded: list[httpx.Request], status: int, **kwargs: Any) -> Any:
    """A ChatOpenAI-family model on its real host, its HTTP served by ``httpx.MockTransport``."""

    def reply(request: httpx.Request) -> httpx.Response:
        recorded.append(request)
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "crafted"}})
        return httpx.Response(200, json=OPENAI_REPLY)

    transport = httpx.MockTransport(reply)
    return cls(
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
        **kwargs,
    )


AZURE = {
    "azure_endpoint": "https://example.openai.azure.com",
    "azure_deployment": "gpt-4.1-mini",
    "api_version": "2024-10-21",
}
OPENAI_HOSTS = pytest.mark.parametrize(
    ("cls", "kwargs", "host"),
    [
        (ChatOpenAI, {"model": "gpt-4.1-mini"}, "api.openai.com"),
        (AzureChatOpenAI, AZURE, "example.openai.azure.com"),
    ],
    ids=["openai", "azure"],
)


@OPENAI_HOSTS
@MODES
async def test_chat_openai_on_openai_hosts_sends_their_dialect(mode, cls, kwargs, host):
    recorded: list[httpx.Request] = []
    answer = await _answer(_mock_openai(cls, recorded, 200, **kwargs), mode)
    assert answer.status == "answered"
    (request,) = recorded
    assert request.url.host == host
    body = json.loads(request.content)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    # Azure OpenAI takes OpenAI's subset as first published: no minItems or maxItems.
    dialect = "azure-openai" if host.endswith(".openai.azure.com") else "openai"
    _assert_in_dialect(body["response_format"]["json_schema"]["schema"], dialect)
    assert body.get("max_completion_tokens", body.get("max_tokens")) == LIMIT
    assert body["temperature"] == 0.0
    assert "tools" not in body
    assert "tool_choice" not in body


@OPENAI_HOSTS
@MODES
@ERRORS
async def test_chat_openai_on_openai_hosts_makes_one_request_on_an_error(
    mode, status, cls, kwargs, host
):
    recorded: list[httpx.Request] = []
    with pytest.raises(ModelCallError):
        await _answer(_mock_openai(cls, recorded, status, **kwargs), mode)
    assert len(recorded) == 1


@MODES
async def test_chat_openai_elsewhere_sends_the_schema_as_built(mode, loopback):
    endpoint = loopback.answering(200, OPENAI_REPLY)
    answer = await _answer(_on("openai-elsewhere", endpoint.url), mode)
    assert answer.status == "answered"
    assert endpoint.requests[0].path == "/v1/chat/completions"
    schema = endpoint.body["response_format"]["json_schema"]["schema"]
    # vLLM, llama.cpp, LM Studio: standard JSON Schema, every bound, byte for byte as built
    # and written in that dialect (the cassettes were recorded with this body).
    assert json.dumps(schema) == json.dumps(schema_in(_built("json-schema"), "json-schema"))
    _assert_in_dialect(schema, "json-schema")
    assert endpoint.body["temperature"] == 0.0
    assert "tools" not in endpoint.body


# ChatAnthropic: structured outputs (output_config.format), the Anthropic dialect.


@MODES
async def test_chat_anthropic_sends_its_structured_output_format(mode, loopback):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    answer = await _answer(_on("anthropic", endpoint.url), mode)
    assert answer.status == "answered"
    body = endpoint.body
    assert endpoint.requests[0].path == "/v1/messages"
    assert body["output_config"]["format"]["type"] == "json_schema"
    _assert_in_dialect(body["output_config"]["format"]["schema"], "anthropic")
    assert body["max_tokens"] == LIMIT
    assert body["temperature"] == 0.0
    assert "tools" not in body
    assert "tool_choice" not in body
    # The generally available field: no beta header.
    assert "anthropic-beta" not in {name.lower() for name in endpoint.requests[0].headers}


def test_a_claude_model_without_structured_outputs_gets_prompt_only_json_and_a_warning(loopback):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    llm = ChatAnthropic(model="claude-3-5-haiku-20241022", api_key="k", base_url=endpoint.url)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        answerer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT)
        EvidenceAnswerer(llm=llm)
    assert [w.category for w in record] == [UnenforcedSettingsWarning]
    assert "prompt only" in str(record[0].message)
    assert answerer.invoke(QUESTION).status == "answered"
    assert "output_config" not in endpoint.body
    assert endpoint.body["max_tokens"] == LIMIT


# ChatOllama: `format`, the full dialect (a root anyOf, which its llama.cpp grammar takes).


@MODES
async def test_chat_ollama_sends_the_full_schema_as_its_format(mode, loopback):
    endpoint = loopback.answering(200, OLLAMA_REPLY)
    answer = await _answer(_on("ollama", endpoint.url), mode)
    assert answer.status == "answered"
    body = endpoint.body
    assert endpoint.requests[0].path == "/api/chat"
    assert "anyOf" in body["format"]
    _assert_in_dialect(body["format"], "full")
    assert body["options"]["num_predict"] == LIMIT
    assert body["options"]["temperature"] == 0.0
    assert not body.get("tools")  # the ollama client always sends the key, empty


# ChatGoogleGenerativeAI: generationConfig.responseJsonSchema, the gemini-json dialect.


@MODES
async def test_chat_google_sends_its_json_schema_and_json_output(mode, loopback):
    endpoint = loopback.answering(200, GEMINI_REPLY)
    answer = await _answer(_on("google", endpoint.url), mode)
    assert answer.status == "answered"
    body = endpoint.body
    assert endpoint.requests[0].path.endswith("/models/gemini-2.5-flash:generateContent")
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    _assert_in_dialect(config["responseJsonSchema"], "gemini-json")
    assert "responseSchema" not in config
    assert config["maxOutputTokens"] == LIMIT
    assert config["temperature"] == 0.0
    assert config.get("candidateCount", 1) == 1
    assert "tools" not in body
    assert "toolConfig" not in body


def test_gemini_3_keeps_its_default_temperature(loopback):
    endpoint = loopback.answering(200, GEMINI_REPLY)
    llm = ChatGoogleGenerativeAI(model="gemini-3-flash-preview", api_key="k", base_url=endpoint.url)
    assert EvidenceAnswerer(llm=llm).invoke(QUESTION).status == "answered"
    assert "temperature" not in endpoint.body["generationConfig"]


# ChatMistralAI: response_format json_schema, strict, in OpenAI's strict subset.


@MODES
async def test_chat_mistral_sends_a_strict_json_schema_response_format(mode, loopback):
    endpoint = loopback.answering(200, OPENAI_REPLY)
    answer = await _answer(_on("mistral", endpoint.url), mode)
    assert answer.status == "answered"
    body = endpoint.body
    assert endpoint.requests[0].path == "/chat/completions"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    _assert_in_dialect(body["response_format"]["json_schema"]["schema"], "openai")
    assert body["max_tokens"] == LIMIT
    assert body["temperature"] == 0.0
    assert body["stream"] is False
    assert "tools" not in body


# Passage mode on OpenAI, fine-tuned models, and the limits checked before the call.

STRICT_SUBSET = {"type", "properties", "required", "additionalProperties", "items", "enum"} | {
    "anyOf",
    "minItems",
    "maxItems",
}
FINE_TUNED_REFUSES = {"minItems", "maxItems", "minLength", "maxLength", "pattern", "format"}


def _sent_schema(llm: Any, sources: list[Evidence], recorded: list[httpx.Request]) -> Any:
    answerer = EvidenceAnswerer(
        llm=llm, citation_mode="passage", max_output_tokens=LIMIT, max_context_tokens=8192
    )
    answerer.invoke({"question": "When is the launch?", "sources": sources})
    (request,) = recorded
    return json.loads(request.content)["response_format"]["json_schema"]["schema"]


def _object_choices(node: Any) -> list[list[str]]:
    """The first keys of the object branches of every anyOf in ``node``."""
    found = []
    if isinstance(node, dict):
        branches = [b for b in node.get("anyOf", ()) if isinstance(b, dict) and "properties" in b]
        if branches:
            found.append([next(iter(b["properties"])) for b in branches])
        for value in node.values():
            found.extend(_object_choices(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_object_choices(value))
    return found


@pytest.mark.parametrize("count", [2, 40])
def test_passage_mode_on_openai_sends_no_choice_of_objects_sharing_a_first_key(count):
    sources = [
        Evidence(id=f"notes-{n}", text="Standup notes. The launch moved to June 15.")
        for n in range(count)
    ]
    recorded: list[httpx.Request] = []
    schema = _sent_schema(
        _mock_openai(ChatOpenAI, recorded, 200, model="gpt-4.1-mini"), sources, recorded
    )
    assert all(len(firsts) == len(set(firsts)) for firsts in _object_choices(schema))
    assert _keywords(schema) <= STRICT_SUBSET
    citation = schema["properties"]["facts"]["items"]["properties"]["citations"]["items"]
    # Every source's labels are still named, in one enum; verification pairs them with IDs.
    assert citation["properties"]["source_id"]["enum"] == [s.id for s in sources]
    assert len(citation["properties"]["passages"]["items"]["enum"]) == 2 * count


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (ChatOpenAI, {"model": "ft:gpt-4.1-mini-2025-04-14:acme::B1a2c3"}),
        (AzureChatOpenAI, {**AZURE, "model": "ft:gpt-4.1-mini-2025-04-14:acme::B1a2c3"}),
    ],
    ids=["openai", "azure"],
)
def test_a_fine_tuned_model_is_sent_no_array_or_string_bounds(cls, kwargs):
    recorded: list[httpx.Request] = []
    answer = EvidenceAnswerer(llm=_mock_openai(cls, recorded, 200, **kwargs)).invoke(QUESTION)
    assert answer.status == "answered"
    (request,) = recorded
    schema = json.loads(request.content)["response_format"]["json_schema"]["schema"]
    assert not _keywords(schema) & FINE_TUNED_REFUSES
    assert schema == schema_in(_built("openai-fine-tuned"), "openai-fine-tuned")


def test_a_schema_past_the_dialects_limits_is_refused_before_any_request(monkeypatch):
    monkeypatch.setitem(DIALECTS, "openai", dataclasses.replace(DIALECTS["openai"], max_depth=2))
    recorded: list[httpx.Request] = []
    llm = _mock_openai(ChatOpenAI, recorded, 200, model="gpt-4.1-mini")
    with pytest.raises(InvalidRequestError, match="max_depth"):
        EvidenceAnswerer(llm=llm).invoke(QUESTION)
    assert recorded == []


# The reader's confidence: ChatOpenAI is asked for log-probabilities where they are read.

DECIDED = json.dumps({"answerable": "yes", **json.loads(LEDGER)})


def _openai_with_logprobs(logprobs_of: Any, recorded: list[Any], **kwargs: Any) -> Any:
    """ChatOpenAI on OpenAI's host; the reply carries log-probabilities when asked for them."""

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        recorded.append(body)
        choice = OPENAI_REPLY["choices"][0] | {"message": {"role": "assistant", "content": DECIDED}}
        if body.get("logprobs"):
            choice = choice | {"logprobs": logprobs_of(DECIDED, 0.75)}
        return httpx.Response(200, json=OPENAI_REPLY | {"choices": [choice]})

    transport = httpx.MockTransport(reply)
    return ChatOpenAI(
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        http_async_client=httpx.AsyncClient(transport=transport),
        **kwargs,
    )


@MODES
async def test_chat_openai_is_asked_for_logprobs_and_gives_the_readers_confidence(
    mode, logprobs_of
):
    recorded: list[Any] = []
    llm = _openai_with_logprobs(logprobs_of, recorded, model="gpt-4.1-mini")
    answer = await _answer(llm, mode)
    (body,) = recorded
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
    assert answer.status == "answered"
    assert answer.reader_confidence == pytest.approx(0.75)
    floored = EvidenceAnswerer(llm=llm, min_reader_confidence=0.8).invoke(QUESTION)
    assert (floored.status, floored.abstention) == ("insufficient_evidence", "confidence_floor")


@pytest.mark.parametrize(
    "kwargs",
    [{"model": "o4-mini"}, {"model": "gpt-4.1-mini", "logprobs": False}],
    ids=["reasoning-model", "caller-said-no"],
)
def test_chat_openai_is_not_asked_for_logprobs_where_it_refuses_them(kwargs, logprobs_of):
    recorded: list[Any] = []
    answer = EvidenceAnswerer(llm=_openai_with_logprobs(logprobs_of, recorded, **kwargs)).invoke(
        QUESTION
    )
    assert not recorded[0].get("logprobs")
    assert "top_logprobs" not in recorded[0]
    assert answer.reader_confidence is None
    with pytest.raises(InvalidRequestError, match="log-probabilities"):
        EvidenceAnswerer(
            llm=_openai_with_logprobs(logprobs_of, [], **kwargs), min_reader_confidence=0.5
        ).invoke(QUESTION)


def test_other_providers_are_never_asked_for_logprobs(loopback):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    EvidenceAnswerer(llm=_on("anthropic", endpoint.url)).invoke(QUESTION)
    assert "logprobs" not in endpoint.body
    assert "top_logprobs" not in endpoint.body
