"""Model profiles: what each model is sent, found by one rule table, through the real client.

``ChatCompletionsModel`` posts to a loopback server, or (for OpenAI's and Azure's own hosts)
through an opener replaced by a recorder (``_transport.reading._opener``), and the tests read
the body that arrived. The rule table itself is held to its documentation, and
``docs/providers.md`` to the table.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import math
import re
import socket
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evidence_first import (
    Evidence,
    InvalidRequestError,
    ModelCallError,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    TokenChoice,
    TokenLogprob,
    answer_from_evidence,
    cli,
    profile_for,
)
from evidence_first._models.profiles import model_key
from evidence_first._models.rules import CAUTIOUS, PROFILE_RULES
from evidence_first._sending.citing.modes import STYLES
from evidence_first._transport import reading
from evidence_first.adapters import (
    DIALECTS,
    ModelProfileWarning,
    family_for_url,
    profile_for_name,
    schema_in,
)
from evidence_first.chat_completions import ChatCompletionsModel

DOCS = Path(__file__).parents[2] / "docs"
SOURCE = Evidence(id="notes", text="Standup notes. The launch moved to June 15.")
QUESTION = "When is the launch?"
LIMIT = 300
CITATION = {"source_id": "notes", "quote": "The launch moved to June 15."}
FACT = {"subject": "launch", "relation": "moved to", "object": "June 15", "citations": [CITATION]}
LEDGER = {
    "answerable": "yes",
    "facts": [FACT],
    "answer": "June 15",
    "inference": None,
    "missing_evidence": [],
}
# What Azure OpenAI's structured outputs list as unsupported for strings and arrays.
AZURE_REFUSES = {"minItems", "maxItems", "minLength", "maxLength", "pattern"}


def completion(text: str = json.dumps(LEDGER), logprobs: Any = None) -> dict[str, Any]:
    choice = {"index": 0, "message": {"content": text}, "finish_reason": "stop"}
    return {"choices": [{**choice, "logprobs": logprobs}]}


def nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node of ``schema``, at any depth."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from nodes(value)


class _Reply(io.BufferedReader):
    headers: ClassVar[dict[str, str]] = {}


class Wire:
    """The transport's opener replaced: records each request and answers ``reply``.

    ``ChatCompletionsModel`` is then called on OpenAI's or Azure's real host, offline.
    """

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.requests: list[urllib.request.Request] = []

    def opener(self, sockets: Any) -> Any:
        return self

    def open(self, request: urllib.request.Request, timeout: float | None = None) -> Any:
        self.requests.append(request)
        return _Reply(io.BytesIO(json.dumps(self.reply).encode()))

    @property
    def body(self) -> Any:
        (request,) = self.requests
        assert isinstance(request.data, bytes)
        return json.loads(request.data)


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    recorder = Wire(completion())
    monkeypatch.setattr(reading, "_opener", recorder.opener)
    return recorder


def posted(loopback_server: Callable[..., Any], model: str, **settings: Any) -> Any:
    """The body ``ChatCompletionsModel(model=model)`` posts to a loopback server."""
    endpoint = loopback_server(reply=completion())
    chat = ChatCompletionsModel(f"{endpoint.url}/v1", model=model, **settings)
    answer = answer_from_evidence(QUESTION, [SOURCE], chat, max_output_tokens=LIMIT)
    assert answer.status == "answered"
    return endpoint.body


# 1. Claude Opus 4.7 and later take no temperature, however their name is written.

CLAUDE_NO_TEMPERATURE = [
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5-5",
    "us.anthropic.claude-opus-4-7-20260416-v1:0",  # Bedrock, cross-region
    "anthropic.claude-opus-4-8-v1:0",  # Bedrock
    "claude-opus-4-7@20260416",  # Vertex AI
    "anthropic/claude-opus-4.7",  # OpenRouter, LiteLLM
]


@pytest.mark.parametrize("name", CLAUDE_NO_TEMPERATURE)
def test_no_temperature_reaches_claude_opus_4_7_or_later_on_any_host(name, loopback_server):
    assert profile_for_name(name, "anthropic").temperature is False
    body = posted(loopback_server, name)
    assert "temperature" not in body
    assert body["max_tokens"] == LIMIT


@pytest.mark.parametrize(
    "name", ["claude-sonnet-4-5", "claude-haiku-4-5-20251001", "anthropic/claude-opus-4.6"]
)
def test_claude_models_before_opus_4_7_still_get_temperature_0(name, loopback_server):
    assert posted(loopback_server, name)["temperature"] == 0.0


# 2. OpenAI's reasoning models: max_completion_tokens with room to reason, their default
# temperature, no log-probabilities.

REASONING = ["o3", "o4-mini", "gpt-5", "gpt-5-2025-08-07", "gpt-6-sol", "ft:o4-mini:acme::x1"]


@pytest.mark.parametrize("name", REASONING)
def test_openai_reasoning_models_get_max_completion_tokens_and_no_temperature_or_logprobs(
    name, wire, reasoning_request
):
    chat = ChatCompletionsModel("https://api.openai.com/v1", model=name)
    answer = answer_from_evidence(QUESTION, [SOURCE], chat, max_output_tokens=LIMIT)
    assert answer.status == "answered"
    assert wire.requests[0].full_url == "https://api.openai.com/v1/chat/completions"
    reasoning_request(wire.body, LIMIT)
    assert answer.reader_confidence is None


@pytest.mark.parametrize("prefix", ["", "openai/"], ids=["own-name", "gateway-name"])
@pytest.mark.parametrize("name", REASONING)
def test_openai_reasoning_models_are_sent_the_same_on_any_host(
    name, prefix, loopback_server, reasoning_request
):
    reasoning_request(posted(loopback_server, f"{prefix}{name}"), LIMIT)


def test_a_chat_model_like_gpt_4_1_keeps_temperature_0_and_logprobs_on_openais_host(wire):
    chat = ChatCompletionsModel("https://api.openai.com/v1", model="gpt-4.1")
    answer_from_evidence(QUESTION, [SOURCE], chat, max_output_tokens=LIMIT)
    body = wire.body
    assert (body["temperature"], body["max_tokens"]) == (0.0, LIMIT)
    assert "max_completion_tokens" not in body
    assert (body["logprobs"], body["top_logprobs"]) == (True, 10)


def test_a_chat_model_elsewhere_keeps_temperature_0_and_is_not_asked_for_logprobs(
    loopback_server,
):
    body = posted(loopback_server, "gpt-4.1")
    assert (body["temperature"], body["max_tokens"]) == (0.0, LIMIT)
    assert "logprobs" not in body  # another server may refuse the field


def test_the_request_carries_no_temperature_for_a_model_that_takes_none():
    seen: list[ModelRequest] = []

    class Reasoner:
        profile = "o3"

        def generate(self, request: ModelRequest) -> str:
            seen.append(request)
            return json.dumps(LEDGER)

    assert answer_from_evidence(QUESTION, [SOURCE], Reasoner()).status == "answered"
    assert seen[0].temperature is None


# 4. Azure OpenAI: its documented subset, its limits checked before any request, and the
# cautious profile for a deployment whose name says nothing.

AZURE = "https://x.openai.azure.com/openai/v1"


@pytest.mark.parametrize(
    "root", [AZURE, "https://proj-resource.cognitiveservices.azure.com/openai/v1"]
)
def test_azure_openai_is_sent_its_documented_subset(root, wire, schema_keywords):
    chat = ChatCompletionsModel(root, model="gpt-4.1")
    assert chat.dialect == "azure-openai"
    for mode in ("quote", "passage"):
        wire.requests.clear()
        answer_from_evidence(QUESTION, [SOURCE], chat, citation_mode=mode)
        assert wire.requests[0].full_url == f"{root}/chat/completions"
        schema = wire.body["response_format"]["json_schema"]["schema"]
        assert not schema_keywords(schema) & AZURE_REFUSES
        assert schema_keywords(schema) <= DIALECTS["azure-openai"].keywords


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = _object({"inner": schema})
    return schema


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (_object({f"p{n}": {"type": "string"} for n in range(101)}), "max_properties of 100"),
        (_nested(6), "max_depth of 5"),
    ],
    ids=["101-properties", "6-levels"],
)
def test_a_schema_past_azures_limits_is_refused_and_one_at_them_is_not(schema, words):
    with pytest.raises(InvalidRequestError, match=words):
        schema_in(schema, "azure-openai")
    schema_in(_object({f"p{n}": {"type": "string"} for n in range(100)}), "azure-openai")
    schema_in(_nested(5), "azure-openai")


@pytest.mark.parametrize(
    ("limit", "value", "words"),
    [("max_properties", 10, "object properties"), ("max_depth", 2, "levels of nested objects")],
)
def test_a_request_past_azures_limits_is_refused_at_plan_time_before_any_request(
    limit, value, words, wire, monkeypatch
):
    tight = dataclasses.replace(DIALECTS["azure-openai"], **{limit: value})
    monkeypatch.setitem(DIALECTS, "azure-openai", tight)
    chat = ChatCompletionsModel(AZURE, model="gpt-4.1")
    with pytest.raises(InvalidRequestError, match=f"{words}, past the azure-openai") as raised:
        answer_from_evidence(QUESTION, [SOURCE], chat)
    assert raised.value.field == "json_schema"
    assert wire.requests == []


def test_an_unknown_azure_deployment_gets_the_cautious_profile_and_one_warning(
    fresh_warnings, wire, reasoning_request
):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        chat = ChatCompletionsModel(AZURE, model="contoso-prod")
        ChatCompletionsModel(AZURE, model="contoso-prod")
    assert [w.category for w in record] == [ModelProfileWarning]
    message = str(record[0].message)
    assert "'contoso-prod'" in message
    assert "an Azure deployment's name says nothing of its model" in message
    assert "no log-probabilities (so no reader confidence)" in message
    assert "profile=" in message
    assert chat.profile.cautious
    answer_from_evidence(QUESTION, [SOURCE], chat, max_output_tokens=LIMIT)
    reasoning_request(wire.body, LIMIT)


def test_a_given_profile_silences_the_warning_and_sets_what_azure_is_sent(fresh_warnings, wire):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        chat = ChatCompletionsModel(AZURE, model="contoso-prod", profile="gpt-4.1")
    assert record == []
    assert not chat.profile.cautious
    assert chat.profile.dialect == "azure-openai"
    answer_from_evidence(QUESTION, [SOURCE], chat, max_output_tokens=LIMIT)
    body = wire.body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("contoso-prod", 0.0, LIMIT)
    assert body["logprobs"] is True
    own = ModelProfile(dialect="azure-openai", temperature=False, output_limit="max_tokens")
    assert ChatCompletionsModel(AZURE, model="contoso-prod", profile=own).profile == own


# 5. A full-dialect string never carries both a pattern and a length bound.


def test_a_full_dialect_string_never_carries_both_a_pattern_and_a_length_bound(loopback_server):
    endpoint = loopback_server(reply=completion())
    chat = ChatCompletionsModel(f"{endpoint.url}/v1", model="m", dialect="full")
    answer_from_evidence(
        QUESTION, [SOURCE], chat, citation_mode="quote", min_reader_confidence=None
    )
    schema = endpoint.body["response_format"]["json_schema"]["schema"]
    strings = [node for node in nodes(schema) if node.get("type") == "string"]
    patterned = [node for node in strings if "pattern" in node]
    bounded = [node for node in strings if {"minLength", "maxLength"} & set(node)]
    assert patterned  # the quotes and the answer are patterned in quote mode
    assert bounded  # other strings keep their bounds
    assert not [node for node in patterned if {"minLength", "maxLength"} & set(node)]


# 6. A caller's own model declares its profile, the shorthand included; explicit options win.


def _reply(yes: float) -> ModelResponse:
    """The ledger, its decision's first token offering "yes" with probability ``yes``."""
    text = json.dumps(LEDGER)
    at = text.index('"answerable": ') + len('"answerable":')
    decision = TokenLogprob(
        token=' "y',
        logprob=math.log(yes),
        top=(TokenChoice(' "y', math.log(yes)), TokenChoice(' "n', math.log(1 - yes))),
    )
    tokens = (
        TokenLogprob(token=text[:at], logprob=0.0),
        decision,
        TokenLogprob(token=text[at + 3 :], logprob=0.0),
    )
    return ModelResponse(text=text, logprobs=tokens)


class _Scripted:
    def __init__(self, yes: float) -> None:
        self.reply = _reply(yes)

    def generate(self, request: ModelRequest) -> ModelResponse:
        assert request.logprobs  # asked for, since the model says it returns them
        return self.reply


class Shorthand(_Scripted):
    """A caller's model declaring the documented shorthand attributes."""

    returns_logprobs = True
    confidence_floors: ClassVar[dict[str, float]] = {"quote": 0.8, "passage": 0.9}


class Declared(_Scripted):
    """A caller's model declaring one profile instead."""

    profile = ModelProfile(
        name="caller's own",
        logprobs=True,
        confidence_floors={"quote": 0.8},
        policies={"uncovered_question": "abstain"},
    )


@pytest.mark.parametrize("model", [Shorthand, Declared])
def test_a_scripted_models_declared_floor_is_applied(model):
    low = answer_from_evidence(QUESTION, [SOURCE], model(0.75))
    assert (low.status, low.abstention) == ("insufficient_evidence", "confidence_floor")
    assert low.confidence_floor == 0.8
    assert low.reader_confidence == pytest.approx(0.75)
    high = answer_from_evidence(QUESTION, [SOURCE], model(0.9))
    assert (high.status, high.confidence_floor) == ("answered", 0.8)
    assert profile_for(model(0.9)).confidence_floors["quote"] == 0.8


@pytest.mark.parametrize("model", [Shorthand, Declared])
def test_an_explicit_floor_none_wins_over_the_models(model):
    answer = answer_from_evidence(QUESTION, [SOURCE], model(0.75), min_reader_confidence=None)
    assert (answer.status, answer.confidence_floor) == ("answered", None)


UNCOVERED = "Which vendor did the finance committee pick for the launch catering?"


def test_a_profiles_policy_applies_unless_the_caller_sets_the_option():
    held = answer_from_evidence(UNCOVERED, [SOURCE], Declared(0.95))
    assert (held.status, held.abstention) == ("insufficient_evidence", "uncovered_question")
    flagged = answer_from_evidence(UNCOVERED, [SOURCE], Declared(0.95), uncovered_question="flag")
    assert flagged.status == "answered"
    assert "uncovered_question" in flagged.flags


def test_a_profiles_citation_mode_applies_unless_the_caller_sets_one(scripted):
    model = scripted(json.dumps(LEDGER))
    model.profile = ModelProfile(citation_mode="passage")
    answer_from_evidence(QUESTION, [SOURCE], model)
    assert "passages" in model.requests[-1].user
    answer_from_evidence(QUESTION, [SOURCE], model, citation_mode="quote")
    assert "passages" not in model.requests[-1].user


# 8. The rule table: names as users write them, the family by host, the cautious profiles,
# and every rule's documentation.


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("gpt-5-2025-08-07", "gpt-5-2025-08-07"),  # dated: kept, matched by its start
        ("openai/gpt-5", "gpt-5"),  # OpenRouter, LiteLLM
        ("  GPT-4.1  ", "gpt-4.1"),
        ("ft:gpt-4.1-mini-2025-04-14:acme::B1a2c3", "ft:gpt-4.1-mini-2025-04-14:acme::b1a2c3"),
        ("anthropic/claude-opus-4.7", "claude-opus-4-7"),
        ("us.anthropic.claude-opus-4-7-20260416-v1:0", "claude-opus-4-7-20260416"),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku-20241022"),
        ("claude-opus-4-7@20260416", "claude-opus-4-7"),
        (
            "projects/p/locations/global/publishers/anthropic/models/claude-opus-4-7@20260416",
            "claude-opus-4-7",
        ),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b"),  # dots stay where they are not Claude's
        (None, ""),
    ],
)
def test_model_names_are_read_as_users_write_them(name, key):
    assert model_key(name) == key


@pytest.mark.parametrize(
    ("name", "rules"),
    [
        ("us.anthropic.claude-opus-4-7-20260416-v1:0", "claude-no-sampling"),
        ("claude-sonnet-4-5@20250929", "claude-sampling"),
        ("anthropic/claude-3.5-haiku", "claude-prompt-only-json + claude-sampling"),
        ("openai/o4-mini", "openai-reasoning"),
        ("gpt-5-2025-08-07", "openai-reasoning"),
        ("gpt-4o-2024-08-06", "openai-chat"),
        ("models/gemini-3-pro-preview", "gemini-3"),
        ("mistral-small-latest", "mistral"),
    ],
)
def test_a_wrapped_or_dated_name_finds_the_models_own_rules(name, rules):
    assert profile_for_name(name, "openai-compatible").name == rules


@pytest.mark.parametrize(
    ("base_url", "family"),
    [
        (None, "openai"),
        ("", "openai"),
        ("https://api.openai.com/v1", "openai"),
        ("https://API.OPENAI.COM/v1/", "openai"),
        ("https://x.openai.azure.com/openai/v1", "azure-openai"),
        ("https://my-resource.openai.azure.com", "azure-openai"),
        # An Azure AI Foundry resource serves Azure OpenAI under /openai, other APIs elsewhere.
        ("https://proj-resource.cognitiveservices.azure.com/openai/v1", "azure-openai"),
        ("https://proj-resource.cognitiveservices.azure.com/openai/deployments/d", "azure-openai"),
        ("https://proj-resource.cognitiveservices.azure.com/language", "openai-compatible"),
        ("https://proj-resource.cognitiveservices.azure.com/openaix", "openai-compatible"),
        ("http://127.0.0.1:8080/v1", "openai-compatible"),
        ("https://openrouter.ai/api/v1", "openai-compatible"),
        ("https://api.openai.com.attacker.example/v1", "openai-compatible"),
        ("https://openai.azure.com.attacker.example/v1", "openai-compatible"),
    ],
)
def test_the_family_of_an_openai_compatible_root_is_told_by_its_host(base_url, family):
    assert family_for_url(base_url) == family


@pytest.mark.parametrize(
    ("vendor", "name", "family"),
    [
        ("openai", "codex-mini-latest", "openai"),
        ("openai", "contoso-prod", "azure-openai"),
        ("anthropic", "claude-nova-1", "anthropic"),
        ("google", "gemini-ultra-next", "google"),
    ],
)
def test_an_unknown_name_of_a_known_vendor_gets_its_cautious_profile_with_one_warning(
    vendor, name, family, fresh_warnings
):
    cautious = CAUTIOUS[vendor]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        profiles = [profile_for_name(name, family) for _ in range(3)]
    assert [w.category for w in record] == [ModelProfileWarning]
    assert cautious.left_out in str(record[0].message)
    profile = profiles[0]
    assert profile.cautious
    assert profile.name == cautious.name
    assert profile.sources == (cautious.source,)
    for field, value in cautious.settings.items():
        assert getattr(profile, field) == value
    # Nothing a current model of that vendor is documented to refuse.
    assert profile.temperature is False
    assert profile.logprobs is False


def test_a_known_name_is_never_warned_about(fresh_warnings):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for name in ("o3", "gpt-4.1", "claude-opus-4-7", "gemini-2.5-flash", "mistral-large"):
            assert not profile_for_name(name, "openai-compatible").cautious
    assert record == []


# A documentation page named by its host and path: platform.openai.com/docs/..., or a
# repository file on its host: github.com/<owner>/<repo>/blob/...
DOCUMENTATION_PAGE = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}/\S+")


@pytest.mark.parametrize("rule", [*PROFILE_RULES, *CAUTIOUS.values()], ids=lambda rule: rule.name)
def test_every_rule_names_its_documentation(rule):
    assert rule.source.strip()
    assert DOCUMENTATION_PAGE.match(rule.source), rule.source
    if rule in CAUTIOUS.values():
        assert rule.left_out.strip()  # its warning says what it leaves out


def test_every_rule_sets_only_profile_fields():
    fields = {field.name for field in dataclasses.fields(ModelProfile)}
    for rule in [*PROFILE_RULES, *CAUTIOUS.values()]:
        assert set(rule.settings) <= fields, rule.name
        ModelProfile(**rule.settings)  # and values a profile takes


# 9. A failed connection says what the CLI says, with no payload.


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _cli_error(base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text(SOURCE.text, encoding="utf-8")
    status = cli.main(["ask", QUESTION, "notes.txt", "--base-url", base_url], out=io.StringIO())
    assert status == cli.EXIT_ERROR
    return capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        (lambda: f"http://127.0.0.1:{_closed_port()}/v1", "the endpoint refused the connection"),
        (lambda: "http://no-such-host.invalid/v1", "host name could not be resolved"),
    ],
    ids=["refused", "unresolved-host"],
)
def test_a_failed_connection_says_what_the_cli_says(base_url, says, tmp_path, monkeypatch, capsys):
    url = base_url()
    with pytest.raises(ModelCallError) as raised:
        answer_from_evidence(QUESTION, [SOURCE], ChatCompletionsModel(url, model="m"))
    message = str(raised.value)
    assert says in message
    assert (
        _cli_error(url, tmp_path, monkeypatch, capsys)
        == f"evidence-first: ModelCallError: {message}"
    )
    # No payload: neither the request nor the socket's own words.
    for payload in (QUESTION, SOURCE.text, "Errno", "urlopen"):
        assert payload not in message


def test_a_bad_scheme_is_refused_when_the_client_is_built(tmp_path, monkeypatch, capsys):
    with pytest.raises(InvalidRequestError) as raised:
        ChatCompletionsModel("ftp://files.example/v1", model="m")
    assert raised.value.field == "base_url"
    assert "must start with http:// or https://" in str(raised.value)
    cli_says = _cli_error("ftp://files.example/v1", tmp_path, monkeypatch, capsys)
    assert cli_says == f"evidence-first: InvalidRequestError: {raised.value}"


# 10. docs/providers.md shows the rule table the script prints from the rules.


def test_the_docs_profile_rules_table_is_the_rule_table():
    text = (DOCS / "providers.md").read_text(encoding="utf-8")
    table = re.search(r"<!-- profile-rules -->\n(.*?)<!-- /profile-rules -->", text, re.DOTALL)
    assert table is not None
    spec = importlib.util.spec_from_file_location(
        "providers_table", DOCS / "scripts/providers_table.py"
    )
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert table.group(1).strip().splitlines() == script.table()
    # Every rule has its row.
    assert len(script.table()) == 2 + len(PROFILE_RULES) + len(CAUTIOUS)


def test_the_readers_floors_were_chosen_under_todays_prompts():
    # A floor is a measurement of one prompt: once a prompt version moves, every rule setting
    # floors for that mode must be chosen again (or confirmed) on the tune runs, and say so.
    rules_with_floors = [
        rule
        for rule in PROFILE_RULES
        if rule.settings.get("confidence_floors") or rule.settings.get("flagged_floors")
    ]
    assert rules_with_floors  # the embedded reader's
    for rule in rules_with_floors:
        # The versions the rule's model reads: a model not asked for a stance reads the
        # prompts of before the key.
        stance = rule.settings.get("writes_stance", True)
        today = {
            mode: (style.prompt_version if stance else style.prompt_version_without_stance)
            for mode, style in STYLES.items()
        }
        modes = {
            mode
            for name in ("confidence_floors", "flagged_floors")
            for mode, floor in rule.settings.get(name, {}).items()
            if floor is not None
        }
        chosen = {mode: rule.floors_chosen_under.get(mode) for mode in modes}
        assert chosen == {mode: today[mode] for mode in modes}, (
            f"{rule.name}'s floors were chosen under {chosen}, and today's prompts are {today}: "
            "choose them again on the tune runs (benchmarks/reader_policies.py --choose), or "
            "confirm them there, and record the version in floors_chosen_under"
        )
