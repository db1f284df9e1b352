"""``llm=`` takes the runnable chat models users build, resolved per call, then made strict.

``configurable_alternatives``, ``configurable_fields``, ``with_config`` and ``bind`` wrap a chat
model in a runnable; LangChain resolves the model each call under the call's config. The
answerer does the same, then applies the strict settings (no retries, no tools, the output
limit, the schema in the provider's field) to the chat model it resolved to, and refuses what
resolves to no chat model, or to one with tools, retries or fallbacks, naming the problem.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import ConfigurableField, RunnableLambda, RunnablePassthrough
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from evidence_first import Evidence, InvalidRequestError, ModelCallError
from langchain_evidence_first import EvidenceAnswerer

SOURCE = Evidence(id="a", text="The launch moved to June 15.")
INPUT = {"question": "When is the launch?", "sources": [SOURCE]}
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


def _openai(bodies: list[dict[str, Any]], status: int = 200, **kwargs: Any) -> ChatOpenAI:
    """A real ChatOpenAI whose HTTP requests land in ``bodies``; it answers ``GOOD``."""

    def reply(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "down"}})
        message = {"role": "assistant", "content": json.dumps(GOOD)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        completion = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx.Response(200, json={**completion, "choices": [choice]})

    transport = httpx.MockTransport(reply)
    return ChatOpenAI(
        **{
            "model": "gpt-4.1-mini",
            "api_key": "sk-test",
            "base_url": "http://127.0.0.1:9/v1",
            "http_client": httpx.Client(transport=transport),
            "http_async_client": httpx.AsyncClient(transport=transport),
            **kwargs,
        }
    )


def _limit(body: dict[str, Any]) -> int:
    return body.get("max_completion_tokens", body.get("max_tokens"))


def _is_strict(body: dict[str, Any]) -> None:
    assert body["response_format"]["type"] == "json_schema"
    assert "tools" not in body
    assert body.get("n", 1) == 1
    assert not body.get("stream")


def _configured(model: str) -> dict[str, Any]:
    return {"configurable": {"llm": model}}


def _alternatives(quoting_model, bodies, **others: Any) -> Any:
    return quoting_model.configurable_alternatives(
        ConfigurableField(id="llm"),
        default_key="quoting",
        openai=_openai(bodies, max_tokens=200),
        **others,
    )


def test_configurable_alternatives_resolve_per_call_and_are_made_strict(quoting_model):
    bodies: list[dict[str, Any]] = []
    answerer = EvidenceAnswerer(llm=_alternatives(quoting_model, bodies))
    assert answerer.invoke(INPUT).status == "answered"
    assert (len(quoting_model.calls), bodies) == (1, [])

    answer = answerer.invoke(INPUT, _configured("openai"))
    assert answer.status == "answered"
    (body,) = bodies
    _is_strict(body)
    assert body["temperature"] == 0.0
    # The resolved model's own smaller limit is sent, and the answer's budget follows it.
    assert _limit(body) == 200
    assert answer.budget.max_output_tokens == 200
    assert len(quoting_model.calls) == 1


async def test_configurable_alternatives_resolve_per_call_on_async_paths(quoting_model):
    bodies: list[dict[str, Any]] = []
    answerer = EvidenceAnswerer(llm=_alternatives(quoting_model, bodies))
    answers = [
        await answerer.ainvoke(INPUT, _configured("openai")),
        *await answerer.abatch([INPUT], _configured("openai")),
        await answerer.ainvoke(INPUT),
    ]
    assert [a.status for a in answers] == ["answered"] * 3
    assert len(bodies) == 2
    assert len(quoting_model.calls) == 1


def test_the_resolved_model_gets_no_retries(quoting_model):
    bodies: list[dict[str, Any]] = []
    llm = quoting_model.configurable_alternatives(
        ConfigurableField(id="llm"), default_key="quoting", failing=_openai(bodies, status=500)
    )
    with pytest.raises(ModelCallError):
        EvidenceAnswerer(llm=llm).invoke(INPUT, _configured("failing"))
    assert len(bodies) == 1  # ChatOpenAI's own default would have sent 3


def test_configurable_fields_are_applied_then_the_strict_settings():
    bodies: list[dict[str, Any]] = []
    llm = _openai(bodies).configurable_fields(
        model_name=ConfigurableField(id="model"),
        temperature=ConfigurableField(id="temperature"),
    )
    answerer = EvidenceAnswerer(llm=llm)
    answerer.invoke(INPUT, {"configurable": {"model": "gpt-4o", "temperature": 1.5}})
    answerer.invoke(INPUT, {"configurable": {"model": "o3-mini"}})
    first, second = bodies
    assert (first["model"], first["temperature"]) == ("gpt-4o", 0.0)
    _is_strict(first)
    # The profile is the resolved model's: a reasoning model is sent no temperature.
    assert second["model"] == "o3-mini"
    assert "temperature" not in second


def test_with_config_is_merged_into_the_call_as_langchain_merges_it():
    bodies: list[dict[str, Any]] = []
    configurable = _openai(bodies).configurable_fields(model_name=ConfigurableField(id="model"))
    seen: list[list[str]] = []

    class Tags(BaseCallbackHandler):
        def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs):
            seen.append(list(kwargs.get("tags") or []))

    llm = configurable.with_config(configurable={"model": "gpt-4o"}, tags=["mine"])
    answerer = EvidenceAnswerer(llm=llm)
    answerer.invoke(INPUT, {"callbacks": [Tags()]})
    answerer.invoke(INPUT, {"configurable": {"model": "gpt-4.1"}})  # the call's wins
    assert [body["model"] for body in bodies] == ["gpt-4o", "gpt-4.1"]
    (tags,) = seen
    assert {"mine", "nostream"} <= set(tags)


def test_bind_over_a_configurable_model_keeps_its_arguments():
    bodies: list[dict[str, Any]] = []
    llm = (
        _openai(bodies)
        .configurable_fields(model_name=ConfigurableField(id="model"))
        .bind(stop=["END"], temperature=1.9)
    )
    EvidenceAnswerer(llm=llm).invoke(INPUT, {"configurable": {"model": "gpt-4o"}})
    (body,) = bodies
    assert (body["model"], body["stop"]) == ("gpt-4o", ["END"])
    assert body["temperature"] == 0.0  # a bound strict setting is the answerer's


@pytest.mark.parametrize(
    ("alternative", "hint"),
    [
        (lambda: _openai([]).bind_tools([search]), "bind_tools"),
        (lambda: _openai([]).with_retry(), "with_retry"),
        (lambda: _openai([]).with_fallbacks([_openai([])]), "fallbacks"),
        (lambda: RunnableLambda(lambda messages: "text"), "RunnableLambda"),
        (lambda: RunnablePassthrough() | _openai([]), "RunnableSequence"),
    ],
    ids=["bound-tools", "retry", "fallbacks", "lambda", "sequence"],
)
def test_an_alternative_that_is_no_strict_chat_model_is_refused_when_chosen(
    alternative, hint, quoting_model
):
    llm = quoting_model.configurable_alternatives(
        ConfigurableField(id="llm"), default_key="quoting", other=alternative()
    )
    answerer = EvidenceAnswerer(llm=llm)
    with pytest.raises(InvalidRequestError, match=hint) as info:
        answerer.invoke(INPUT, _configured("other"))
    assert info.value.field == "llm"
    assert str(info.value).startswith("llm (resolved through configurable_alternatives) ")
    assert quoting_model.calls == []
    assert answerer.invoke(INPUT).status == "answered"  # the default still answers


def test_a_default_that_resolves_to_no_chat_model_is_refused_at_construction(quoting_model):
    llm = StrOutputParser().configurable_alternatives(
        ConfigurableField(id="llm"), default_key="parser", quoting=quoting_model
    )
    with pytest.raises(InvalidRequestError, match="StrOutputParser") as info:
        EvidenceAnswerer(llm=llm)
    assert info.value.field == "llm"


def test_the_callers_model_is_left_as_it_was(quoting_model):
    bodies: list[dict[str, Any]] = []
    openai = _openai(bodies)
    llm = quoting_model.configurable_alternatives(
        ConfigurableField(id="llm"), default_key="quoting", openai=openai
    )
    EvidenceAnswerer(llm=llm).invoke(INPUT, _configured("openai"))
    assert openai.root_client.max_retries == 2
    assert openai.temperature is None


def test_the_models_configurable_keys_are_the_answerers_config_specs(quoting_model):
    answerer = EvidenceAnswerer(llm=_alternatives(quoting_model, []))
    assert [spec.id for spec in answerer.config_specs] == ["llm"]
    retrieve = RunnableLambda(lambda question: [SOURCE])
    chain = {"question": RunnablePassthrough(), "sources": retrieve} | answerer
    assert "llm" in chain.config_schema().model_json_schema()["$defs"]["Configurable"]["properties"]


def test_a_configurable_answerer_and_a_configurable_model_compose(
    quoting_model, scripted_chat_model
):
    other = scripted_chat_model(message=AIMessage(content=json.dumps(GOOD)))
    llm = quoting_model.configurable_alternatives(
        ConfigurableField(id="llm"), default_key="quoting", scripted=other
    )
    answerer = EvidenceAnswerer(llm=llm).configurable_fields(
        max_output_tokens=ConfigurableField(id="limit")
    )
    answer = answerer.invoke(INPUT, {"configurable": {"llm": "scripted", "limit": 300}})
    assert answer.budget.max_output_tokens == 300
    assert (other.calls, quoting_model.calls) == (1, [])
