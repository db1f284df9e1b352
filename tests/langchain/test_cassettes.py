"""Real HTTP exchanges through ChatOpenAI, replayed from cassettes (record_mode="none").

Recorded from the embedded local model server and from a loopback stub that answers with
provider errors; re-record with ``uv run python tests/record.py``. A request replays
only if its body is the recorded one, the system prompt named by its version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
import yaml
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI
from vcr import VCR
from vcr.errors import CannotOverwriteExistingCassetteException

from evidence_first import ModelCallError
from langchain_evidence_first import EvidenceAnswerer

SECRET = "sk-live-METADATA-SECRET-4242"
API_KEY = "sk-test-key-never-recorded"
DOCUMENTS = [
    Document(
        id="standup-04-28",
        page_content="Standup, April 28. The launch moved to June 15. Ravi owns the schema change.",
        metadata={"speaker": "Ravi", "status": "current", "api_token": SECRET},
    ),
    Document(
        id="email-budget",
        page_content="From Priya: the budget review is on Friday.",
        metadata={"speaker": "Priya", "api_token": SECRET},
    ),
]


@pytest.fixture
def attempts() -> list[httpx.Request]:
    """Every HTTP request the client attempts, retries included."""
    return []


@pytest.fixture
def http_client(attempts):
    with httpx.Client(event_hooks={"request": [attempts.append]}) as client:
        yield client


def _chat_openai(base_url: str, http_client: httpx.Client) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=base_url, api_key=API_KEY, model="gemma-3-270m", http_client=http_client
    )


@pytest.mark.vcr
def test_local_model_exchange_carries_the_json_schema_and_is_judged_from_its_text(
    model_base_url, vcr, recording, attempts, http_client
):
    answerer = EvidenceAnswerer(
        llm=_chat_openai(model_base_url, http_client), max_output_tokens=384
    )
    answer = answerer.invoke({"question": "When is the launch?", "sources": DOCUMENTS})

    assert len(attempts) == 1
    body = json.loads(attempts[0].content)
    # The embedded model's name gives it the embedded reader's profile, wherever it is reached:
    # the llguidance dialect's answered and abstained shapes as a grammar, each citation a
    # choice per source.
    assert "response_format" not in body
    assert body["grammar"].startswith("%llguidance {}\nstart: ledger0 | ")
    assert '{"type": "string", "enum": ["standup-04-28"]}' in body["grammar"]
    assert '{"type": "string", "enum": ["email-budget"]}' in body["grammar"]
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 384
    assert body["temperature"] == 0.0
    assert "tools" not in body
    # Metadata, including the secret, never leaves this process.
    assert SECRET not in attempts[0].content.decode()
    assert "api_token" not in attempts[0].content.decode()

    # The verdict is computed from the real response text.
    recorded = json.loads(vcr.responses[0]["body"]["string"])
    assert answer.raw_response == recorded["choices"][0]["message"]["content"]
    assert answer.model_called
    assert answer.status in {"answered", "insufficient_evidence", "invalid_response"}
    if answer.status == "invalid_response":
        assert answer.reason_codes
    for fact in answer.facts:
        for c in fact.citations:
            assert answer.source(c.source_id).text[c.char_start : c.char_end] == c.quote
    assert recording or vcr.play_count == 1


# The exchange the edits below start from, and where its replay is sent: nothing listens there.
EXCHANGE = "test_local_model_exchange_carries_the_json_schema_and_is_judged_from_its_text.yaml"
NOWHERE = "http://127.0.0.1:9/v1"
PROMPT_MARKER = re.compile(r"@system-prompt (\S+?)@")


def _another_prompt_version(body: str) -> str:
    (version,) = PROMPT_MARKER.findall(body)
    return body.replace(version, f"{version.rsplit('/', 1)[0]}/0")


# Each edit of the recorded body, and what the replay's refusal says of it.
EDITS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "another temperature": (
        lambda body: body.replace('"temperature":0.0', '"temperature":0.7'),
        lambda version: '"temperature": 0.7',
    ),
    "another question": (
        lambda body: body.replace("When is the launch?", "When is the review?"),
        lambda version: '"content": "Sources (a JSON array',
    ),
    "another prompt version": (
        _another_prompt_version,
        lambda version: (
            f"the cassette was recorded under {version.rsplit('/', 1)[0]}/0, and {version} is "
            "sent now: record the cassettes again with `uv run python tests/record.py`"
        ),
    ),
}


@pytest.fixture
def replay_vcr(pytestconfig):
    """A VCR as the ``vcr`` fixture builds one, with the project's matchers registered."""
    replay = VCR()
    pytestconfig.hook.pytest_recording_configure(config=pytestconfig, vcr=replay)
    return replay


def _cassette_with(
    tmp_path: Path, vcr_cassette_dir: str, edit: Callable[[str], str]
) -> tuple[Path, str]:
    """A copy of the recorded exchange with its request body edited, and the prompt version
    the exchange was recorded under."""
    cassette = yaml.safe_load((Path(vcr_cassette_dir) / EXCHANGE).read_text(encoding="utf-8"))
    (interaction,) = cassette["interactions"]
    (version,) = PROMPT_MARKER.findall(interaction["request"]["body"])
    interaction["request"]["body"] = edit(interaction["request"]["body"])
    path = tmp_path / EXCHANGE
    path.write_text(yaml.safe_dump(cassette), encoding="utf-8")
    return path, version


def _answer_launch(http_client: httpx.Client):
    answerer = EvidenceAnswerer(llm=_chat_openai(NOWHERE, http_client), max_output_tokens=384)
    return answerer.invoke({"question": "When is the launch?", "sources": DOCUMENTS})


@pytest.mark.parametrize("edit", EDITS)
def test_a_cassette_whose_body_is_not_what_is_sent_fails_to_replay_saying_what_differs(
    edit, replay_vcr, vcr_config, vcr_cassette_dir, tmp_path, http_client
):
    change, says = EDITS[edit]
    cassette, version = _cassette_with(tmp_path, vcr_cassette_dir, change)

    with (
        replay_vcr.use_cassette(str(cassette), record_mode="none", **vcr_config) as played,
        pytest.raises(ModelCallError) as info,
    ):
        _answer_launch(http_client)

    assert played.play_count == 0
    refused = info.value
    while refused.__cause__ is not None:
        refused = refused.__cause__
    assert isinstance(refused, CannotOverwriteExistingCassetteException)
    ((_, matched, failed),) = refused.similar_requests
    assert matched == ["method", "scheme", "path", "query"]
    ((matcher, message),) = failed
    assert matcher == "body_and_prompt_version"
    assert says(version) in message
    assert says(version) in str(refused)


def test_the_unedited_cassette_replays_through_the_same_setup(
    replay_vcr, vcr_config, vcr_cassette_dir, tmp_path, http_client
):
    cassette, _ = _cassette_with(tmp_path, vcr_cassette_dir, lambda body: body)

    with replay_vcr.use_cassette(str(cassette), record_mode="none", **vcr_config) as played:
        answer = _answer_launch(http_client)

    assert played.all_played
    assert answer.model_called


@pytest.mark.vcr(allow_playback_repeats=True)
@pytest.mark.parametrize("status", [500, 429])
def test_a_provider_error_costs_exactly_one_request(
    status, error_base_url, vcr, recording, attempts, http_client
):
    # With repeats allowed, a retry would be served the error again and counted.
    answerer = EvidenceAnswerer(llm=_chat_openai(error_base_url(status), http_client))
    with pytest.raises(ModelCallError) as info:
        answerer.invoke({"question": "When is the launch?", "sources": DOCUMENTS})
    assert len(attempts) == 1
    assert recording or vcr.play_count == 1
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    assert info.value.__cause__.status_code == status
    assert "crafted provider error" not in str(info.value)


def test_cassettes_hold_no_credentials(vcr_cassette_dir):
    cassettes = list(Path(vcr_cassette_dir).glob("*.yaml"))
    assert len(cassettes) == 3
    for cassette in cassettes:
        text = cassette.read_text()
        assert API_KEY not in text
        assert "authorization" not in text.lower()
