"""The strict call: one call, no tools, no retries, and provider settings via an allow-list."""

from __future__ import annotations

import asyncio
import json
import warnings

import httpx
import openai
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

from evidence_first import Evidence, InvalidRequestError, ModelRequest
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.passages import SentSources
from evidence_first._sending.schema import ledger_schema
from evidence_first.adapters import AnswerOptions, schema_in
from evidence_first.chat_completions import SCHEMA_NAME
from langchain_evidence_first import EvidenceAnswerer, UnenforcedSettingsWarning
from langchain_evidence_first._chat_model import strict_chat_model

SOURCE = Evidence(id="a", text="The launch moved to June 15.")
GOOD = {
    "facts": [
        {
            "subject": "launch",
            "relation": "moved to",
            "object": "June 15",
            "citations": [{"source_id": "a", "quote": "The launch moved to June 15."}],
        }
    ],
    "answer": "June 15",
    "inference": None,
    "missing_evidence": [],
}


@tool
def search(query: str) -> str:
    """Search the web."""
    return query


def _openai(**kwargs) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4.1-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1", **kwargs
    )


LEDGER = ledger_schema(
    QuoteStyle().shape(SentSources((SOURCE,))),
    AnswerOptions(knowledge="evidence-only", max_output_tokens=321),
)


def _request(**overrides) -> ModelRequest:
    fields = {
        "system": "system",
        "user": "user",
        "max_tokens": 321,
        "json_schema": LEDGER,
        "timeout": 7.5,
        "prompt_version": "test",
    }
    return ModelRequest(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("wrap", "hint"),
    [
        (lambda llm: llm.bind_tools([search]), "bind_tools"),
        (lambda llm: llm.with_retry(), "with_retry"),
        (lambda llm: llm.with_fallbacks([_openai()]), "fallbacks"),
    ],
    ids=["bound-tools", "retry", "fallbacks"],
)
def test_wrapped_models_are_refused_before_any_request(wrap, hint):
    with pytest.raises(InvalidRequestError, match=hint) as info:
        EvidenceAnswerer(llm=wrap(_openai()))
    assert info.value.field == "llm"


def test_something_that_is_not_a_chat_model_is_refused():
    with pytest.raises(InvalidRequestError, match="chat model"):
        EvidenceAnswerer(llm=lambda messages: "text")


def test_openai_compatible_models_get_json_schema_output_and_no_retries():
    llm = _openai(extra_body={"top_k": 1})
    strict = strict_chat_model(llm, timeout=7.5, max_tokens=321)
    assert strict.provider == "openai-compatible"
    model = strict.model
    assert model.max_retries == 0
    assert model.root_client.max_retries == 0
    assert model.root_async_client.max_retries == 0
    assert model.root_client.timeout == 7.5
    # The caller's model keeps its own settings.
    assert llm.root_client.max_retries == 2
    request = _request()
    kwargs = strict.request_kwargs(request)
    payload = model._get_request_payload([SystemMessage("s"), HumanMessage("u")], **kwargs)
    # In the request body as-is (extra_body), not through ChatOpenAI's `.parse()` route.
    assert payload["extra_body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "schema": schema_in(request.json_schema, "json-schema"),
            "strict": True,
        },
    }
    assert "response_format" not in payload
    assert payload["extra_body"]["top_k"] == 1  # the caller's extra body is kept
    assert payload.get("max_tokens", payload.get("max_completion_tokens")) == 321
    assert payload["temperature"] == 0.0
    assert "tools" not in payload


def test_reasoning_models_are_not_sent_a_temperature():
    strict = strict_chat_model(
        ChatOpenAI(model="o3-mini", api_key="sk-test"), timeout=5, max_tokens=9
    )
    assert "temperature" not in strict.request_kwargs(_request())


def test_anthropic_gets_structured_output_limits_and_no_retries():
    llm = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-ant-test")
    _ = llm._client  # built and cached with the default retries
    strict = strict_chat_model(llm, timeout=7.5, max_tokens=321)
    assert strict.provider == "anthropic"
    assert strict.model._client.max_retries == 0
    assert strict.model._client.timeout == 7.5
    assert llm._client.max_retries == 2
    payload = strict.model._get_request_payload(
        [SystemMessage("s"), HumanMessage("u")], **strict.request_kwargs(_request())
    )
    assert payload["max_tokens"] == 321
    # This langchain-anthropic release sends the temperature through extra_body.
    assert {**payload.get("extra_body", {}), **payload}["temperature"] == 0.0
    assert "tools" not in payload
    assert payload["output_config"]["format"] == {
        "type": "json_schema",
        "schema": schema_in(LEDGER, "anthropic"),
    }


def test_ollama_gets_the_schema_as_its_format_and_the_output_limit():
    llm = ChatOllama(model="llama3.2", num_ctx=8192)
    strict = strict_chat_model(llm, timeout=7.5, max_tokens=321)
    assert strict.provider == "ollama"
    params = strict.model._chat_params(
        [SystemMessage("s"), HumanMessage("u")], **strict.request_kwargs(_request())
    )
    assert params["format"] == schema_in(LEDGER, "full")
    assert params["options"]["num_predict"] == 321
    assert params["options"]["temperature"] == 0.0
    assert params["options"]["num_ctx"] == 8192  # the caller's options survive


def test_an_unknown_chat_model_works_with_the_prompt_alone_after_one_warning(scripted_chat_model):
    class HomegrownChatModel(scripted_chat_model):
        pass

    model = HomegrownChatModel(message=AIMessage(content=json.dumps(GOOD)))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = EvidenceAnswerer(llm=model)
        EvidenceAnswerer(llm=model)
    assert [w.category for w in record] == [UnenforcedSettingsWarning]
    assert "HomegrownChatModel" in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = first.invoke({"question": "q?", "sources": [SOURCE]})
    assert answer.status == "answered"
    assert model.calls == 1


def test_an_unknown_chat_model_that_retries_is_refused_before_any_request(scripted_chat_model):
    class RetryingChatModel(scripted_chat_model):
        max_retries: int = 3

    model = RetryingChatModel(message=AIMessage(content=json.dumps(GOOD)))
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=model)
    # The same rule, and the same words, as the LlamaIndex integration's.
    assert str(raised.value) == (
        "RetryingChatModel retries failed calls (max_retries=3) and evidence-first cannot turn "
        "that off for this class; construct it with max_retries=0"
    )
    assert raised.value.field == "llm"
    assert model.calls == 0


def test_a_response_with_tool_calls_is_invalid(scripted_chat_model):
    message = AIMessage(
        content=json.dumps(GOOD),
        tool_calls=[{"name": "search", "args": {"query": "launch"}, "id": "call-1"}],
    )
    model = scripted_chat_model(message=message)
    answer = EvidenceAnswerer(llm=model).invoke({"question": "q?", "sources": [SOURCE]})
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("tool_call_not_allowed",)
    assert model.calls == 1


def test_a_length_finish_reason_is_truncated_output(scripted_chat_model):
    message = AIMessage(content='{"facts": [', response_metadata={"finish_reason": "length"})
    answer = EvidenceAnswerer(llm=scripted_chat_model(message=message)).invoke(
        {"question": "q?", "sources": [SOURCE]}
    )
    assert answer.reason_codes == ("output_truncated",)


def test_reasoning_blocks_are_not_parsed(scripted_chat_model):
    message = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "The answer is obviously {not json"},
            {"type": "text", "text": json.dumps(GOOD)},
        ]
    )
    answer = EvidenceAnswerer(llm=scripted_chat_model(message=message)).invoke(
        {"question": "q?", "sources": [SOURCE]}
    )
    assert answer.status == "answered"


def test_an_openai_reply_cut_at_the_token_limit_is_truncated_output():
    completion = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": '{"facts": [{"subj'},
                }
            ],
        }
    )

    def cut_at_length(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=completion.model_dump())

    llm = _openai(http_client=httpx.Client(transport=httpx.MockTransport(cut_at_length)))
    answer = EvidenceAnswerer(llm=llm).invoke({"question": "q?", "sources": [SOURCE]})
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("output_truncated",)
    assert answer.raw_response == '{"facts": [{"subj'


def test_the_answerer_works_on_a_second_event_loop(json_endpoint):
    # ChatOpenAI's default async HTTP client is cached across event loops; without retries,
    # reusing it on a second loop fails at once with "Event loop is closed".
    message = {"role": "assistant", "content": json.dumps(GOOD)}
    base_url = json_endpoint(
        200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    )
    answerer = EvidenceAnswerer(llm=ChatOpenAI(model="m", base_url=base_url, api_key="sk-test"))
    question = {"question": "When is the launch?", "sources": [SOURCE]}
    for _ in range(3):  # each asyncio.run is a new event loop
        answer = asyncio.run(answerer.ainvoke(question))
        assert answer.status == "answered"


# Back doors into the strict call: tools and strict settings smuggled through the model's own
# configuration, and tool calls hidden in content blocks.

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    "configure",
    [
        lambda: _openai(model_kwargs={"tools": TOOLS, "tool_choice": "required"}),
        lambda: _openai(extra_body={"tools": TOOLS}),
        lambda: _openai(model_kwargs={"tool_choice": "auto"}),
        lambda: _openai().bind(extra_body={"tools": TOOLS}),
    ],
    ids=["model_kwargs", "extra_body", "model_kwargs tool_choice", "bound extra_body"],
)
def test_tools_in_the_models_own_settings_are_refused_at_construction(configure):
    with pytest.raises(InvalidRequestError, match="tools") as info:
        EvidenceAnswerer(llm=configure())
    assert info.value.field == "llm"


def _capturing_openai(bodies: list[dict], **kwargs) -> ChatOpenAI:
    def reply(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": json.dumps(GOOD)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
            },
        )

    return _openai(http_client=httpx.Client(transport=httpx.MockTransport(reply)), **kwargs)


def _sent_limit(body: dict) -> int:
    return body.get("max_completion_tokens", body.get("max_tokens"))


OVERRIDES = {"max_tokens": 99999, "temperature": 1.7, "n": 3, "stream": True, "top_k": 1}


@pytest.mark.parametrize(
    ("configure", "top_k"),
    [
        (lambda bodies: _capturing_openai(bodies, extra_body=OVERRIDES), 1),
        (lambda bodies: _capturing_openai(bodies).bind(extra_body=OVERRIDES), 1),
        (lambda bodies: _capturing_openai(bodies, n=3, temperature=1.7), None),
    ],
    ids=["extra_body", "bound extra_body", "fields"],
)
def test_strict_settings_cannot_be_overridden_by_the_models_settings(configure, top_k):
    bodies: list[dict] = []
    answerer = EvidenceAnswerer(llm=configure(bodies), max_output_tokens=321)
    answer = answerer.invoke({"question": "q?", "sources": [SOURCE]})
    assert answer.status == "answered"
    (body,) = bodies
    assert body.get("top_k") == top_k  # the caller's other settings are kept
    assert _sent_limit(body) == 321
    assert "max_tokens" not in body or "max_completion_tokens" not in body
    assert body["temperature"] == 0.0
    assert body.get("n", 1) == 1
    assert not body.get("stream")
    assert "tools" not in body
    assert "tool_choice" not in body


def test_the_smaller_output_limit_is_sent_and_the_schema_follows_it():
    bodies: list[dict] = []
    llm = _capturing_openai(bodies, max_tokens=200)
    answer = EvidenceAnswerer(llm=llm, max_output_tokens=2048).invoke(
        {"question": "q?", "sources": [SOURCE]}
    )
    assert answer.budget.max_output_tokens == 200
    (body,) = bodies
    assert _sent_limit(body) == 200
    schema = body["response_format"]["json_schema"]["schema"]
    expected = ledger_schema(
        QuoteStyle().shape(SentSources((SOURCE,))),
        AnswerOptions(knowledge="evidence-only", max_output_tokens=200),
    )
    assert schema["properties"]["facts"]["maxItems"] == expected["properties"]["facts"]["maxItems"]


@pytest.mark.parametrize("block_type", ["tool_use", "tool_call", "server_tool_call"])
def test_a_tool_call_hidden_in_content_blocks_is_not_allowed(scripted_chat_model, block_type):
    message = AIMessage(
        content=[
            {"type": "text", "text": json.dumps(GOOD)},
            {"type": block_type, "id": "t1", "name": "search", "input": {}, "args": {}},
        ]
    )
    assert message.tool_calls == []
    model = scripted_chat_model(message=message)
    answer = EvidenceAnswerer(llm=model).invoke({"question": "q?", "sources": [SOURCE]})
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("tool_call_not_allowed",)
