"""Model profiles through LangChain's real chat model classes: the body each provider receives.

``ChatAnthropic`` and ``ChatOpenAI`` (as a gateway or the embedded reader's server) post to a
loopback server; ``ChatOpenAI`` and ``AzureChatOpenAI`` on OpenAI's and Azure's own hosts go
through ``httpx.MockTransport``. Each test reads what arrived.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import AzureChatOpenAI, ChatOpenAI

from evidence_first import Evidence, InvalidRequestError, ModelCallError
from evidence_first._engine.plan import plan_answer
from evidence_first.adapters import DIALECTS, ModelProfileWarning, profile_for_name
from evidence_first.local import LocalModel
from langchain_evidence_first import EvidenceAnswerer, profile_for

SOURCE = Evidence(id="a", text="The launch moved to June 15.")
QUESTION = {"question": "When is the launch?", "sources": [SOURCE]}
LIMIT = 300
# One-time warnings start over: each test sees the first warning for its names.
pytestmark = pytest.mark.usefixtures("fresh_warnings")
# What a Claude model with adaptive thinking (no budget of its own) is allowed on top.
ADAPTIVE_THINKING_ALLOWANCE = 16_000
CITATION = {"source_id": "a", "quote": "The launch moved to June 15."}
FACT = {"subject": "launch", "relation": "moved to", "object": "June 15", "citations": [CITATION]}
LEDGER = json.dumps(
    {"facts": [FACT], "answer": "June 15", "inference": None, "missing_evidence": []}
)
AZURE_REFUSES = {"minItems", "maxItems", "minLength", "maxLength", "pattern"}

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
RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "m",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": LEDGER, "annotations": []}],
        }
    ],
    "parallel_tool_calls": False,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [{"type": "text", "text": LEDGER}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


@contextlib.contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning issued inside, recorded (this folder ignores the allow-list's warning)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield record


class Host:
    """An OpenAI or Azure OpenAI host served by ``httpx.MockTransport``: records each request."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def reply(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("/responses"):
            return httpx.Response(200, json=RESPONSES_REPLY)
        return httpx.Response(200, json=OPENAI_REPLY)

    def llm(self, cls: type, **kwargs: Any) -> Any:
        transport = httpx.MockTransport(self.reply)
        return cls(
            api_key="sk-test",
            http_client=httpx.Client(transport=transport),
            http_async_client=httpx.AsyncClient(transport=transport),
            **kwargs,
        )

    @property
    def body(self) -> Any:
        (request,) = self.requests
        return json.loads(request.content)


@pytest.fixture
def host() -> Host:
    return Host()


AZURE = {
    "azure_endpoint": "https://x.openai.azure.com",
    "azure_deployment": "contoso-prod",
    "api_version": "2024-10-21",
}


# 1. Claude Opus 4.7 and later, and extended thinking: no temperature.


@pytest.mark.parametrize(
    "model", ["claude-opus-4-7", "claude-opus-4-8", "claude-opus-5-5", "claude-opus-4-7-20260416"]
)
def test_chat_anthropic_sends_no_temperature_to_claude_opus_4_7_or_later(model, loopback):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    llm = ChatAnthropic(model=model, api_key="k", base_url=endpoint.url, temperature=0.7)
    answer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION)
    assert answer.status == "answered"
    assert endpoint.requests[0].path == "/v1/messages"
    assert "temperature" not in endpoint.body  # not ours, and not the caller's 0.7 either
    assert endpoint.body["max_tokens"] == LIMIT
    assert "output_config" in endpoint.body


def test_chat_anthropic_still_sends_temperature_0_to_claude_before_opus_4_7(loopback):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    llm = ChatAnthropic(model="claude-haiku-4-5", api_key="k", base_url=endpoint.url)
    EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION)
    assert endpoint.body["temperature"] == 0.0


@pytest.mark.parametrize(
    ("model", "thinking", "allowance"),
    [
        ("claude-haiku-4-5", {"type": "enabled", "budget_tokens": 4000}, 4000),
        ("claude-opus-4-6", {"type": "adaptive"}, ADAPTIVE_THINKING_ALLOWANCE),
    ],
    ids=["budget", "adaptive"],
)
def test_chat_anthropic_with_extended_thinking_gets_no_temperature_and_room_to_think(
    model, thinking, allowance, loopback
):
    endpoint = loopback.answering(200, ANTHROPIC_REPLY)
    llm = ChatAnthropic(model=model, api_key="k", base_url=endpoint.url, thinking=thinking)
    assert EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION).status == "answered"
    body = endpoint.body
    assert "temperature" not in body
    assert body["thinking"] == thinking
    assert body["max_tokens"] == LIMIT + allowance
    assert body["max_tokens"] > thinking.get("budget_tokens", 0)
    assert profile_for(llm).temperature is False


@pytest.mark.parametrize("model", ["anthropic/claude-opus-4.7", "anthropic/claude-opus-5-5"])
def test_a_gateway_is_sent_no_temperature_for_claude_opus_4_7_or_later(model, loopback):
    endpoint = loopback.answering(200, OPENAI_REPLY)
    llm = ChatOpenAI(model=model, api_key="k", base_url=f"{endpoint.url}/v1")
    assert EvidenceAnswerer(llm=llm).invoke(QUESTION).status == "answered"
    assert "temperature" not in endpoint.body


# 2. OpenAI's reasoning models: max_completion_tokens with room to reason, no temperature, no
# log-probabilities; on OpenAI's host and on Azure with a profile.

REASONING = ["o3", "o4-mini", "gpt-5", "gpt-5-2025-08-07", "gpt-6-sol", "ft:o4-mini:acme::x1"]


@pytest.mark.parametrize("model", REASONING)
def test_chat_openai_sends_reasoning_models_their_limit_field_and_no_temperature_or_logprobs(
    model, host, reasoning_request
):
    llm = host.llm(ChatOpenAI, model=model, temperature=0.5)
    answer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION)
    assert answer.status == "answered"
    assert str(host.requests[0].url) == "https://api.openai.com/v1/chat/completions"
    reasoning_request(host.body, LIMIT)


def test_azure_chat_openai_with_a_reasoning_profile_is_sent_as_one(host, reasoning_request):
    llm = host.llm(AzureChatOpenAI, **AZURE)
    with recorded() as record:
        answerer = EvidenceAnswerer(llm=llm, profile="o3", max_output_tokens=LIMIT)
    assert record == []  # the profile says what the deployment's name does not
    assert answerer.invoke(QUESTION).status == "answered"
    assert host.requests[0].url.host == "x.openai.azure.com"
    assert "/deployments/contoso-prod/" in host.requests[0].url.path
    reasoning_request(host.body, LIMIT)


def test_chat_openai_keeps_temperature_0_and_logprobs_for_a_chat_model(host):
    llm = host.llm(ChatOpenAI, model="gpt-4.1")
    EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION)
    body = host.body
    assert body["temperature"] == 0.0
    assert body.get("max_completion_tokens", body.get("max_tokens")) == LIMIT
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)


# 3. The Responses API: text.format, never response_format, no log-probabilities.


@pytest.mark.parametrize(
    ("settings", "limit"),
    [
        ({"model": "gpt-4.1", "use_responses_api": True}, LIMIT),
        ({"model": "o3", "reasoning": {"effort": "low"}}, LIMIT + 25_000),  # room to reason
        ({"model": "gpt-4.1", "output_version": "responses/v1"}, LIMIT),
    ],
    ids=["use_responses_api", "reasoning", "output_version"],
)
def test_chat_openai_on_the_responses_api_gets_text_format_and_no_response_format(
    settings, limit, host, schema_keywords
):
    llm = host.llm(ChatOpenAI, **settings)
    answer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT).invoke(QUESTION)
    assert answer.status == "answered"
    assert answer.answer == "June 15"
    assert str(host.requests[0].url) == "https://api.openai.com/v1/responses"
    body = host.body
    text_format = body["text"]["format"]
    assert (text_format["type"], text_format["strict"]) == ("json_schema", True)
    assert text_format["name"] == "evidence_ledger"
    assert schema_keywords(text_format["schema"]) <= DIALECTS["openai"].keywords
    assert "response_format" not in body
    assert "response_format" not in body.get("text", {})
    assert "logprobs" not in body
    assert "top_logprobs" not in body
    assert body["max_output_tokens"] == limit
    assert profile_for(llm).api == "responses"
    assert profile_for(llm).logprobs is False


# 4. Azure OpenAI: its documented subset, its limits before any request, and the cautious
# profile for a deployment whose name says nothing.


@pytest.mark.parametrize(
    ("cls", "settings"),
    [
        (AzureChatOpenAI, {**AZURE, "azure_deployment": "gpt-4.1"}),
        (ChatOpenAI, {"model": "gpt-4.1", "base_url": "https://x.openai.azure.com/openai/v1"}),
        (
            ChatOpenAI,
            {"model": "gpt-4.1", "base_url": "https://p.cognitiveservices.azure.com/openai/v1"},
        ),
    ],
    ids=["azure-chat-openai", "chat-openai-azure-host", "chat-openai-foundry-host"],
)
@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_azure_openai_is_sent_its_documented_subset(cls, settings, mode, host, schema_keywords):
    llm = host.llm(cls, **settings)
    answerer = EvidenceAnswerer(llm=llm, citation_mode=mode, min_reader_confidence=None)
    answerer.invoke(QUESTION)
    assert host.requests[0].url.host.endswith(".azure.com")
    schema = host.body["response_format"]["json_schema"]["schema"]
    assert not schema_keywords(schema) & AZURE_REFUSES
    assert schema_keywords(schema) <= DIALECTS["azure-openai"].keywords
    assert profile_for(llm).dialect == "azure-openai"


@pytest.mark.parametrize(
    ("limit", "value"), [("max_properties", 10), ("max_depth", 2)], ids=["properties", "depth"]
)
def test_a_schema_past_azures_limits_is_refused_at_plan_time_before_any_request(
    limit, value, host, monkeypatch
):
    tight = dataclasses.replace(DIALECTS["azure-openai"], **{limit: value})
    monkeypatch.setitem(DIALECTS, "azure-openai", tight)
    llm = host.llm(AzureChatOpenAI, **{**AZURE, "azure_deployment": "gpt-4.1"})
    with pytest.raises(InvalidRequestError, match=f"azure-openai dialect's {limit}") as raised:
        EvidenceAnswerer(llm=llm).invoke(QUESTION)
    assert raised.value.field == "json_schema"
    assert host.requests == []


def test_an_unknown_azure_deployment_gets_the_cautious_profile_and_one_warning(
    host, reasoning_request
):
    llm = host.llm(AzureChatOpenAI, **AZURE)
    with recorded() as record:
        answerer = EvidenceAnswerer(llm=llm, max_output_tokens=LIMIT)
        EvidenceAnswerer(llm=llm)
    assert [w.category for w in record] == [ModelProfileWarning]
    message = str(record[0].message)
    assert "'contoso-prod'" in message
    assert "an Azure deployment's name says nothing of its model" in message
    assert "no log-probabilities (so no reader confidence)" in message
    assert profile_for(llm).cautious
    answerer.invoke(QUESTION)
    reasoning_request(host.body, LIMIT)
    with pytest.raises(InvalidRequestError, match="log-probabilities"):
        EvidenceAnswerer(llm=llm, min_reader_confidence=0.5).invoke(QUESTION)


def test_a_given_profile_silences_the_warning_and_sets_what_azure_is_sent(host):
    llm = host.llm(AzureChatOpenAI, **AZURE)
    with recorded() as record:
        answerer = EvidenceAnswerer(llm=llm, profile="gpt-4.1", max_output_tokens=LIMIT)
    assert record == []
    assert answerer.invoke(QUESTION).status == "answered"
    body = host.body
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == LIMIT
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
    assert profile_for(llm, profile="gpt-4.1").dialect == "azure-openai"


# 7. The embedded reader keeps its profile: through a copied answerer, and through ChatOpenAI
# pointed at its server (the README's recipe 2).

READER = "qwen2.5-coder-1.5b"
READER_PROFILE = profile_for_name(READER)


def test_a_copied_answerer_keeps_the_embedded_readers_floors():
    copy = EvidenceAnswerer().model_copy(update={"timeout": 30})
    options = copy._options
    assert options.timeout == 30
    assert "min_reader_confidence" not in options.model_fields_set
    assert "citation_mode" not in options.model_fields_set
    reader = LocalModel(READER)  # planned against, never started
    plan = plan_answer(options, QUESTION["question"], [SOURCE], reader)
    assert plan.options.citation_mode == "passage"
    assert plan.confidence_floor == reader.profile.confidence_floors["passage"]
    assert reader.profile == READER_PROFILE
    # An explicit None is the caller's, and a copy keeps that too.
    off = EvidenceAnswerer(min_reader_confidence=None).model_copy(update={"timeout": 30})
    assert plan_answer(off._options, "When?", [SOURCE], reader).confidence_floor is None


def _reader_reply(logprobs_of: Any, yes: float) -> Any:
    """The embedded reader's server: a passage-mode ledger citing the first passage sent."""

    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][-1]["content"]
        sources = json.JSONDecoder().raw_decode(user, user.index("\n[") + 1)[0]
        label = sources[0]["passages"][0]["label"]
        citation = {"source_id": sources[0]["id"], "passages": [label]}
        fact = {"subject": "launch", "relation": "moved to", "object": "June 15"}
        ledger = {
            "answerable": "yes",
            "facts": [{**fact, "citations": [citation]}],
            "answer": "The launch is on June 15 [F1].",
            "inference": None,
            "missing_evidence": [],
        }
        text = json.dumps(ledger)
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        logprobs = logprobs_of(text, yes) if body.get("logprobs") else None
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": READER,
            "choices": [{**choice, "finish_reason": "stop", "logprobs": logprobs}],
        }

    return reply


# Below and above the reader's floor in passage mode (0.61; the ledger carries no flag).
@pytest.mark.parametrize(("yes", "status"), [(0.5, "insufficient_evidence"), (0.9, "answered")])
def test_chat_openai_at_the_embedded_readers_server_gets_the_readers_profile(
    yes, status, loopback_server, logprobs_of
):
    endpoint = loopback_server(reply=_reader_reply(logprobs_of, yes))
    llm = ChatOpenAI(base_url=f"{endpoint.url}/v1", model=READER, api_key="none")
    assert profile_for(llm) == LocalModel(READER).profile
    answer = EvidenceAnswerer(llm=llm).invoke(QUESTION)
    body = endpoint.body
    schema = body["response_format"]["json_schema"]["schema"]
    assert "anyOf" in schema  # the full dialect: a root choice of shapes
    assert "type" not in schema
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
    assert '"passages"' in body["messages"][-1]["content"]  # its citation mode
    assert answer.confidence_floor == READER_PROFILE.confidence_floors["passage"]
    assert answer.reader_confidence == pytest.approx(yes)
    assert answer.status == status
    if status == "insufficient_evidence":
        assert answer.abstention == "confidence_floor"


# 9. A refused connection is named in the error.


def test_a_refused_connection_through_chat_openai_says_so():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = ChatOpenAI(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key="k")
    with pytest.raises(ModelCallError) as raised:
        EvidenceAnswerer(llm=llm).invoke(QUESTION)
    message = str(raised.value)
    assert "the endpoint refused the connection" in message
    assert SOURCE.text not in message
