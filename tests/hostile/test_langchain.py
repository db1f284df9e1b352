"""The LangChain answerer, attacked: its unset options, the message it stores, its model's config.

An option the caller leaves unset means the model's own (the embedded reader's confidence
floor). ``configurable_fields`` once rebuilt the answerer with every field given, so an unset
``min_reader_confidence`` came back as an explicit ``None`` and the model's floor was dropped.
And ``dumpd`` of an ``output="message"`` message wrote the live ``EvidenceAnswer`` as a
``not_implemented`` stub holding its ``repr``: the answer's text and quotes, in a form no
loader checks. A configurable ``llm`` is resolved under each call's config, which can choose an
alternative or set a field that brings tools or retries back.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import _support
import httpx
import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage
from langchain_core.runnables import ConfigurableField, Runnable
from langchain_openai import ChatOpenAI

from evidence_first import EvidenceAnswer, InvalidRequestError, ModelCallError, ModelProfile
from langchain_evidence_first import EvidenceAnswerer, answer_of

# The scripted chat model is on no provider allow-list; that warning is tested elsewhere.
pytestmark = pytest.mark.filterwarnings("ignore::evidence_first.adapters.UnenforcedSettingsWarning")

SOURCE = {
    "id": "notes",
    "text": "Standup, June 11. The launch moved to June 15. Ana owns the checklist.",
}
LAUNCH = "The launch moved to June 15."
FORGED = "The launch is cancelled."
INPUT = {"question": "When did the launch move?", "sources": [SOURCE]}
FLOOR = 0.9
# A model whose own floor holds back every answer without a readable confidence: the
# scripted model returns no log-probabilities, so the answer abstains exactly when the
# floor applies.
FLOORED = ModelProfile(name="floored", logprobs=True, confidence_floors={"quote": FLOOR})


def _llm() -> GenericFakeChatModel:
    launch = _support.fact(
        ("notes", LAUNCH), subject="the launch", relation="moved to", obj="June 15"
    )
    reply = AIMessage(content=_support.ledger([launch], answer="June 15 [F1]."))
    return GenericFakeChatModel(messages=itertools.cycle([reply]))


def _answerer(**options: Any) -> EvidenceAnswerer:
    return EvidenceAnswerer(llm=_llm(), profile=FLOORED, **options)


TIMEOUT = ConfigurableField(id="timeout")
BUDGET = ConfigurableField(id="budget")
CONFIGURED = {"configurable": {"timeout": 5, "budget": 1000}}


def _configurable(answerer: EvidenceAnswerer) -> Runnable[Any, Any]:
    return answerer.configurable_fields(timeout=TIMEOUT, max_context_tokens=BUDGET)


def _alternatives(
    answerer: EvidenceAnswerer, default: Runnable[Any, Any] | None = None
) -> Runnable[Any, Any]:
    """``default`` (the answerer), or the answerer copied with a smaller budget."""
    chosen = ConfigurableField(id="answerer")
    other = answerer.model_copy(update={"max_context_tokens": 1000})
    return (default or answerer).configurable_alternatives(  # type: ignore[attr-defined]
        chosen, default_key="default", other=other
    )


# Each path: how the runnable is built from the answerer, the config it is invoked with, and
# the context budget the answer must then report (the configured value reaches the answer).
PATHS: dict[str, tuple[Callable[[EvidenceAnswerer], Runnable[Any, Any]], Any, int]] = {
    "configurable_fields, configured": (_configurable, CONFIGURED, 1000),
    "configurable_fields, not configured": (_configurable, None, 2048),
    "configurable_fields, configured by with_config": (
        lambda answerer: _configurable(answerer).with_config(CONFIGURED),
        None,
        1000,
    ),
    "configurable_alternatives, the default": (_alternatives, None, 2048),
    "configurable_alternatives, the other": (
        _alternatives,
        {"configurable": {"answerer": "other"}},
        1000,
    ),
    "configurable_alternatives of configurable_fields": (
        lambda answerer: _alternatives(answerer, _configurable(answerer)),
        CONFIGURED,
        1000,
    ),
    "configurable_fields of configurable_alternatives": (
        lambda answerer: _alternatives(answerer).configurable_fields(  # type: ignore[attr-defined]
            timeout=TIMEOUT, max_context_tokens=BUDGET
        ),
        CONFIGURED,
        1000,
    ),
    "with_config": (lambda answerer: answerer.with_config(tags=["t"]), None, 2048),
    "model_copy": (
        lambda answerer: answerer.model_copy(update={"max_context_tokens": 1000}),
        None,
        1000,
    ),
}

# "`min_reader_confidence`: left unset, the model's own floor (the embedded reader's); `None`:
# no floor" (docs/concepts.md, the options table); "An option you leave unset stays unset in
# every answerer built from this one, so the model's own defaults [...] still apply: through
# `model_copy`, `configurable_fields` [...], `configurable_alternatives` and `with_config`"
# (docs/langchain.md, "Options").


@pytest.mark.parametrize("path", PATHS)
def test_an_unset_option_stays_unset_through_every_rebuild(path):
    build, config, budget = PATHS[path]
    answer = build(_answerer()).invoke(INPUT, config)
    assert answer.budget.max_context_tokens == budget
    assert answer.confidence_floor == FLOOR
    assert answer.status == "insufficient_evidence"
    assert answer.abstention == "confidence_floor"


@pytest.mark.parametrize("path", PATHS)
def test_an_explicit_none_stays_the_callers_through_every_rebuild(path):
    build, config, _ = PATHS[path]
    answer = build(_answerer(min_reader_confidence=None)).invoke(INPUT, config)
    assert answer.confidence_floor is None
    assert answer.status == "answered"


def test_a_configured_none_is_the_callers_too():
    floor = ConfigurableField(id="floor")
    answerer = _answerer().configurable_fields(min_reader_confidence=floor)
    assert answerer.invoke(INPUT).confidence_floor == FLOOR
    answer = answerer.invoke(INPUT, {"configurable": {"floor": None}})
    assert answer.confidence_floor is None
    assert answer.status == "answered"


# "A LangChain message (`answer_of`; the message holds the answer's `as_dict()`, JSON values
# only, and `dumpd` writes no `repr` of it)" (docs/security.md, "What is promised").


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _nodes(value: object) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _nodes(item)


def _message() -> AIMessage:
    message = _answerer(min_reader_confidence=None, output="message").invoke(INPUT)
    assert isinstance(message, AIMessage)
    answer = answer_of(message)
    assert isinstance(answer, EvidenceAnswer)
    assert answer.status == "answered"
    return message


def test_dumpd_of_a_message_holds_no_repr_of_the_answer():
    message = _message()
    stored = json.loads(json.dumps(dumpd(message)))
    assert not [node for node in _nodes(stored) if node.get("type") == "not_implemented"]
    assert not [text for text in _strings(stored) if "EvidenceAnswer(" in text]
    metadata = stored["kwargs"]["response_metadata"]
    assert metadata["evidence_answer"] == answer_of(message).as_dict()
    # The answer's text and quotes are only where the stored form puts them: the content
    # blocks, and the answer's own fields, which are checked when they are loaded.
    rest = copy.deepcopy(stored)
    del rest["kwargs"]["content"], rest["kwargs"]["response_metadata"]["evidence_answer"]
    assert not [text for text in _strings(rest) if "June 15" in text or "launch" in text]


# "`answer_of(message)` rebuilds the `EvidenceAnswer`, checked on load as any stored answer
# is: an edited one raises `InvalidRequestError` (`field="message.response_metadata"`), as does
# a message that holds no answer" (docs/langchain.md, "Output: an answer or a message").


@pytest.mark.filterwarnings("ignore:The function `load` is in beta")
@pytest.mark.parametrize("edit", ["quote", "offsets", "source text", "status"])
def test_an_edited_answer_in_a_dumped_message_fails_answer_of(edit):
    stored = json.loads(json.dumps(dumpd(_message())))
    answer = stored["kwargs"]["response_metadata"]["evidence_answer"]
    citation = answer["facts"][0]["citations"][0]
    if edit == "quote":
        citation["quote"] = citation["evidence_spans"][0]["text"] = FORGED
    elif edit == "offsets":
        citation["char_start"] += 1
        citation["evidence_spans"][0]["char_start"] += 1
    elif edit == "source text":
        answer["evidence"][0]["text"] = answer["evidence"][0]["text"].replace("June", "May")
    else:
        answer.update(status="answered", facts=[], citations_verified=False, segments=[])
    back = load(stored, allowed_objects="messages")
    with pytest.raises(InvalidRequestError) as raised:
        answer_of(back)
    assert raised.value.field == "message.response_metadata"
    # The error and its chain name the place, never the text.
    error: BaseException | None = raised.value
    while error is not None:
        assert FORGED not in str(error)
        assert "launch" not in str(error)
        error = error.__cause__ or error.__context__


@pytest.mark.parametrize(
    "metadata",
    [{}, {"evidence_answer": None}, {"evidence_answer": "June 15"}, {"evidence_answer": [1]}],
)
def test_a_message_without_an_answer_is_an_invalid_request(metadata):
    with pytest.raises(InvalidRequestError) as raised:
        answer_of(AIMessage(content="June 15.", response_metadata=metadata))
    assert raised.value.field == "message.response_metadata"
    assert isinstance(raised.value, ValueError)


# "One strict call. The model is called at most once, without tools (refused at construction,
# wherever the framework would let them in [...]), without retries, with the output limit and
# temperature set by us whatever the model's own settings say" (docs/security.md, "What is
# promised"). A configurable `llm` is resolved per call: a call's config is a way in.

TOOL = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}


def _openai(requests: list[httpx.Request], status: int = 500) -> ChatOpenAI:
    def reply(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(status, json={"error": {"message": "down"}})

    return ChatOpenAI(
        model="gpt-4.1-mini",
        api_key="sk-test",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(reply)),
    )


SMUGGLED: dict[str, Callable[[ChatOpenAI], tuple[Runnable[Any, Any], dict[str, Any]]]] = {
    "an alternative with bound tools": lambda llm: (
        _llm().configurable_alternatives(
            ConfigurableField(id="llm"), default_key="fake", other=llm.bind(tools=[TOOL])
        ),
        {"llm": "other"},
    ),
    "an alternative with retries": lambda llm: (
        _llm().configurable_alternatives(
            ConfigurableField(id="llm"), default_key="fake", other=llm.with_retry()
        ),
        {"llm": "other"},
    ),
    "tools in a configured model_kwargs": lambda llm: (
        llm.configurable_fields(model_kwargs=ConfigurableField(id="kwargs")),
        {"kwargs": {"tools": [TOOL], "tool_choice": "required"}},
    ),
    "tools in a configured extra_body": lambda llm: (
        llm.configurable_fields(extra_body=ConfigurableField(id="body")),
        {"body": {"tools": [TOOL]}},
    ),
    "tools bound over a configured model": lambda llm: (
        llm.configurable_fields(model_name=ConfigurableField(id="model")).bind(tools=[TOOL]),
        {"model": "gpt-4o"},
    ),
}


@pytest.mark.parametrize("smuggle", list(SMUGGLED))
def test_tools_and_retries_behind_a_configurable_llm_are_refused_before_any_request(smuggle):
    requests: list[httpx.Request] = []
    llm, configured = SMUGGLED[smuggle](_openai(requests))
    # Refused at construction when the defaults already resolve to it, else when a call does.
    with pytest.raises(InvalidRequestError) as raised:
        EvidenceAnswerer(llm=llm).invoke(INPUT, {"configurable": configured})
    assert raised.value.field == "llm"
    assert requests == []


def test_retries_configured_into_an_allow_listed_model_still_cost_one_request():
    requests: list[httpx.Request] = []
    llm = _openai(requests).configurable_fields(max_retries=ConfigurableField(id="retries"))
    with pytest.raises(ModelCallError):
        EvidenceAnswerer(llm=llm).invoke(INPUT, {"configurable": {"retries": 5}})
    assert len(requests) == 1
