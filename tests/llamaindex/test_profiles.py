"""Model profiles through LlamaIndex's real LLM classes: the body each provider receives.

``OpenAI`` and ``OpenAILike`` run against an ``httpx.MockTransport`` on their real hosts, or a
loopback server for the embedded reader's; the tests read the body that arrived. LlamaIndex's
``Anthropic.chat`` cannot chat with anthropic 2.x (its message conversion raises a TypeError
before sending), so its profile and its strict call are tested directly: the strict copy's
own client posts to a loopback server as ``chat`` would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from llama_index.core.schema import NodeWithScore
from llama_index.llms.anthropic import Anthropic
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

from evidence_first import Evidence, InvalidRequestError, ModelProfile, ModelRequest
from evidence_first._engine.plan import plan_answer
from evidence_first.adapters import DIALECTS, AnswerOptions, ModelProfileWarning, profile_for_name
from evidence_first.local import LocalModel
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer, profile_for
from llama_index.response_synthesizers.evidence_first._anthropic import (
    THINKING_ALLOWANCE,
    strict_anthropic_call,
)
from llama_index.response_synthesizers.evidence_first._strict_call import reader_for

QUESTION = "When is the Apollo launch?"
LIMIT = 300
AZURE_REFUSES = {"minItems", "maxItems", "minLength", "maxLength", "pattern"}
AZURE_BASE = "https://x.openai.azure.com/openai/v1"
READER = "qwen2.5-coder-1.5b"
READER_PROFILE = profile_for_name(READER)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, fresh_warnings: None) -> None:
    # The OpenAI LLMs read their API root from the environment; one-time warnings start over.
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield record


def openai_llm(fake_openai: Any, cls: type[OpenAI], **settings: Any) -> OpenAI:
    """A real ``OpenAI`` or ``OpenAILike``, its HTTP served by the fake endpoint."""
    transport = httpx.MockTransport(fake_openai.handle)
    return cls(
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **settings,
    )


def synthesize(llm: Any, nodes: list[NodeWithScore], **options: Any) -> Any:
    response = EvidenceSynthesizer(llm=llm, max_output_tokens=LIMIT, **options).synthesize(
        QUESTION, nodes
    )
    return response.metadata["evidence_answer"]


# 2. OpenAI's reasoning models: max_completion_tokens with room to reason, no temperature, no
# log-probabilities; through OpenAI and OpenAILike.

REASONING = ["o3", "o4-mini", "gpt-5", "gpt-5-2025-08-07", "gpt-6-sol", "ft:o4-mini:acme::x1"]


@pytest.mark.parametrize("model", REASONING)
def test_openai_sends_reasoning_models_their_limit_field_and_no_temperature_or_logprobs(
    model, fake_openai, launch_nodes, reasoning_request
):
    llm = openai_llm(fake_openai, OpenAI, model=model, temperature=0.7)
    assert synthesize(llm, launch_nodes).status == "answered"
    assert str(fake_openai.requests[0].url) == "https://api.openai.com/v1/chat/completions"
    (body,) = fake_openai.bodies
    reasoning_request(body, LIMIT)
    assert body["response_format"]["json_schema"]["strict"] is True


@pytest.mark.parametrize(
    ("settings", "profile"),
    [
        ({"model": "openai/o4-mini", "api_base": "http://gateway.example/v1"}, None),
        ({"model": "reasoner", "api_base": "http://gateway.example/v1"}, "o3"),
        ({"model": "contoso-prod", "api_base": AZURE_BASE}, "gpt-5"),
    ],
    ids=["gateway-name", "gateway-profile", "azure-profile"],
)
def test_openai_like_sends_a_reasoning_model_its_limit_field_and_no_temperature_or_logprobs(
    settings, profile, fake_openai, launch_nodes, reasoning_request
):
    llm = openai_llm(fake_openai, OpenAILike, is_chat_model=True, **settings)
    with recorded() as record:
        answer = synthesize(llm, launch_nodes, profile=profile)
    assert record == []
    assert answer.status == "answered"
    (body,) = fake_openai.bodies
    assert body["model"] == settings["model"]
    reasoning_request(body, LIMIT)


def test_openai_keeps_temperature_0_and_logprobs_for_a_chat_model(fake_openai, launch_nodes):
    llm = openai_llm(fake_openai, OpenAI, model="gpt-4.1")
    synthesize(llm, launch_nodes)
    (body,) = fake_openai.bodies
    assert (body["temperature"], body["max_tokens"]) == (0.0, LIMIT)
    assert "max_completion_tokens" not in body
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)


# 1. Claude Opus 4.7 and later, and extended thinking: no temperature (LlamaIndex's Anthropic,
# by its profile and its strict call).

ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [{"type": "text", "text": "{}"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
SOURCE = Evidence(id="notes", text="Standup: the Apollo launch moved to June 15.")


def anthropic_llm(base_url: str, model: str, **settings: Any) -> Anthropic:
    return Anthropic(
        model=model, base_url=base_url, api_key="sk-ant-test", max_tokens=4096, **settings
    )


def planned(llm: Anthropic) -> tuple[ModelRequest, ModelProfile]:
    """The request the engine plans for ``llm`` and the profile it plans it by."""
    reader = reader_for(llm)
    plan = plan_answer(AnswerOptions(max_output_tokens=LIMIT), QUESTION, [SOURCE], reader)
    assert plan.request is not None
    return plan.request, reader.profile


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5-5",
        "anthropic.claude-opus-4-7-v1:0",  # Bedrock
        "claude-opus-4-7@20260416",  # Vertex AI
    ],
)
def test_no_temperature_reaches_claude_opus_4_7_or_later_through_the_strict_call(
    model, loopback, anthropic_chat_call
):
    loopback.reply = ANTHROPIC_REPLY
    llm = anthropic_llm(loopback.url, model)
    request, profile = planned(llm)
    assert profile.temperature is False
    assert request.temperature is None
    # Structured outputs, though the package's own list lacks Claude Opus 4.7 and 4.8.
    assert profile.structured_output
    strict, _ = strict_anthropic_call(request, llm, False, profile)

    strict._client.messages.create(**anthropic_chat_call(strict, request))

    (received,) = loopback.posts
    assert received.path == "/v1/messages"
    assert "temperature" not in received.body
    assert received.body["max_tokens"] == LIMIT
    assert received.body["output_config"]["format"]["type"] == "json_schema"


def test_claude_before_opus_4_7_is_still_planned_with_temperature_0(loopback):
    llm = anthropic_llm(loopback.url, "claude-haiku-4-5")
    request, profile = planned(llm)
    assert profile.temperature is True
    strict, _ = strict_anthropic_call(request, llm, False, profile)
    assert request.temperature == strict.temperature == 0.0


@pytest.mark.parametrize(
    ("thinking", "allowance"),
    [
        ({"type": "enabled", "budget_tokens": 4000}, 4000),
        ({"type": "adaptive"}, THINKING_ALLOWANCE),
    ],
    ids=["budget", "adaptive"],
)
def test_claude_with_extended_thinking_is_planned_without_temperature_and_with_room_to_think(
    thinking, allowance, loopback
):
    llm = anthropic_llm(loopback.url, "claude-haiku-4-5", thinking_dict=thinking)
    request, profile = planned(llm)
    assert profile_for(llm) == profile
    assert (profile.temperature, profile.output_allowance) == (False, allowance)
    assert request.temperature is None
    strict, _ = strict_anthropic_call(request, llm, False, profile)
    assert strict.max_tokens == LIMIT + allowance
    assert strict.max_tokens > thinking.get("budget_tokens", 0)
    assert strict._get_all_kwargs()["thinking"] == thinking


# 4. Azure OpenAI: its documented subset, its limits before any request, and the cautious
# profile for a deployment whose name says nothing.


@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_openai_like_at_azure_is_sent_its_documented_subset(
    mode, fake_openai, launch_nodes, schema_keywords
):
    llm = openai_llm(
        fake_openai, OpenAILike, model="gpt-4.1", api_base=AZURE_BASE, is_chat_model=True
    )
    synthesize(llm, launch_nodes, citation_mode=mode)
    assert fake_openai.requests[0].url.host == "x.openai.azure.com"
    schema = fake_openai.bodies[0]["response_format"]["json_schema"]["schema"]
    assert not schema_keywords(schema) & AZURE_REFUSES
    assert schema_keywords(schema) <= DIALECTS["azure-openai"].keywords


def test_a_schema_past_azures_limits_is_refused_before_any_request(
    fake_openai, launch_nodes, monkeypatch
):
    tight = dataclasses.replace(DIALECTS["azure-openai"], max_depth=2)
    monkeypatch.setitem(DIALECTS, "azure-openai", tight)
    llm = openai_llm(
        fake_openai, OpenAILike, model="gpt-4.1", api_base=AZURE_BASE, is_chat_model=True
    )
    with pytest.raises(InvalidRequestError, match="azure-openai dialect's max_depth of 2"):
        synthesize(llm, launch_nodes)
    assert fake_openai.attempts == 0


def test_an_unknown_azure_deployment_gets_the_cautious_profile_and_one_warning(
    fake_openai, launch_nodes, reasoning_request
):
    llm = openai_llm(
        fake_openai, OpenAILike, model="contoso-prod", api_base=AZURE_BASE, is_chat_model=True
    )
    with recorded() as record:
        synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=LIMIT)
        EvidenceSynthesizer(llm=llm)
    assert [w.category for w in record] == [ModelProfileWarning]
    assert "'contoso-prod'" in str(record[0].message)
    assert synthesizer.synthesize(QUESTION, launch_nodes).metadata["reader_confidence"] is None
    reasoning_request(fake_openai.bodies[0], LIMIT)


def test_a_given_profile_silences_the_warning_and_sets_what_azure_is_sent(
    fake_openai, launch_nodes
):
    llm = openai_llm(
        fake_openai, OpenAILike, model="contoso-prod", api_base=AZURE_BASE, is_chat_model=True
    )
    own = ModelProfile(dialect="azure-openai", temperature=True, logprobs=True)
    with recorded() as record:
        synthesize(llm, launch_nodes, profile=own)
    assert record == []
    (body,) = fake_openai.bodies
    assert (body["temperature"], body["max_tokens"]) == (0.0, LIMIT)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
    assert profile_for(llm, profile=own) == own


# 7. The embedded reader's profile through OpenAILike pointed at its server (recipe 3).


def _reader_reply(logprobs_of: Any, ledger_for: Any, yes: float) -> Any:
    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        ledger = json.loads(ledger_for(user))
        ledger["answer"] = "The launch is on June 15 [F1]."
        text = json.dumps({"answerable": "yes", **ledger})
        logprobs = logprobs_of(text, yes) if body.get("logprobs") else None
        message = {"role": "assistant", "content": text}
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": READER,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "stop", "logprobs": logprobs}
            ],
        }

    return reply


# Below and above the reader's floor in passage mode (0.61; the ledger carries no flag).
@pytest.mark.parametrize(("yes", "status"), [(0.5, "insufficient_evidence"), (0.9, "answered")])
def test_openai_like_at_the_embedded_readers_server_gets_the_readers_profile(
    yes, status, loopback, launch_nodes, logprobs_of, ledger_for
):
    loopback.reply = _reader_reply(logprobs_of, ledger_for, yes)
    llm = OpenAILike(
        api_base=f"{loopback.url}/v1", model=READER, api_key="none", is_chat_model=True
    )
    assert profile_for(llm) == LocalModel(READER).profile
    synthesizer = EvidenceSynthesizer(llm=llm)
    answer = synthesizer.synthesize(QUESTION, launch_nodes).metadata["evidence_answer"]
    (received,) = loopback.posts
    body = received.body
    schema = body["response_format"]["json_schema"]["schema"]
    assert "anyOf" in schema  # the full dialect: a root choice of shapes
    assert "type" not in schema
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    assert '"passages"' in user  # its citation mode
    assert answer.confidence_floor == READER_PROFILE.confidence_floors["passage"]
    assert answer.reader_confidence == pytest.approx(yes)
    assert answer.status == status
    if status == "insufficient_evidence":
        assert answer.abstention == "confidence_floor"
    # A copy keeps the floor it did not set.
    copy = synthesizer.model_copy(update={"timeout": 30})
    assert "min_reader_confidence" not in copy.options.model_fields_set
