"""Fixtures shared by every test folder: the embedded local models, the cassette setup, the
scripted model and ledger builders of ``_support.py``, and loopback provider endpoints.

Cassette tests replay HTTP exchanges recorded from the local model server (and from a loopback
stub that answers with provider errors). They replay with ``record_mode="none"`` by default,
matching each request's body, whose system prompt a cassette holds as a marker naming its
prompt version; ``tests/record.py`` re-records them against the local model.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import _support
import pytest
from vcr import VCR
from vcr import matchers as vcr_matchers
from vcr.cassette import Cassette
from vcr.request import Request

from evidence_first import EvidenceAnswer
from evidence_first._models import once
from evidence_first.local import DEFAULT_READER, TINY_MODEL, LocalModel

CASSETTES = Path(__file__).parent / "cassettes"
# Request bodies recorded byte for byte: what each provider is sent must not change unseen.
GOLDEN_REQUESTS = Path(__file__).parent / "golden" / "requests"
# During replay no server runs; vcrpy answers every request. Nothing listens on port 9.
REPLAY_BASE_URL = "http://127.0.0.1:9/v1"
# Headers that could carry credentials are never written to a cassette.
SECRET_HEADERS = [
    "authorization",
    "api-key",
    "x-api-key",
    "cookie",
    "set-cookie",
    "openai-organization",
    "openai-project",
]


class ModelSlot:
    """At most one local model server at a time: asking for another model stops the current one.

    Two llama.cpp servers on two cores slow each other down badly, so the session keeps one
    slot; tests are ordered (below) so that each model starts once.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._current: LocalModel | None = None

    def say(self, line: str) -> None:
        """Print a progress line on the terminal, past pytest's capture."""
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        capture = self._config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    def get(self, name: str) -> LocalModel:
        """The running server of model ``name``, started (and any other stopped) if needed."""
        current = self._current
        if current is not None and current.model_name == name and current.running:
            return current
        self.stop()
        model = LocalModel(name)
        self.say(f"[live] starting {model.title} on llama.cpp (one server at a time)")
        started = time.monotonic()
        self._current = model.start()
        self.say(f"[live] {model.title} ready in {time.monotonic() - started:.0f} s")
        return self._current

    def stop(self) -> None:
        """Stop the running server, if any, so a test can start its own."""
        if self._current is not None:
            self._current.stop()
            self._current = None


@pytest.fixture
def scripted() -> Callable[..., _support.ScriptedModel]:
    """Return :class:`_support.ScriptedModel`: a model answering as scripted, counting calls."""
    return _support.ScriptedModel


@pytest.fixture
def make_ledger() -> Callable[..., str]:
    """Return :func:`_support.ledger`: a ledger's JSON text from its facts and fields."""
    return _support.ledger


@pytest.fixture
def make_fact() -> Callable[..., dict[str, Any]]:
    """Return :func:`_support.fact`: a ledger fact from its citations."""
    return _support.fact


@pytest.fixture(scope="session")
def model_slot(pytestconfig: pytest.Config) -> Iterator[ModelSlot]:
    slot = ModelSlot(pytestconfig)
    yield slot
    slot.stop()


@pytest.fixture
def local_model(model_slot: ModelSlot) -> LocalModel:
    """The default reader (``DEFAULT_READER``): for tests whose point is a real answer."""
    return model_slot.get(DEFAULT_READER)


@pytest.fixture
def tiny_model(model_slot: ModelSlot) -> LocalModel:
    """The tiny model (``TINY_MODEL``): fast, for plumbing tests that assert invariants only."""
    return model_slot.get(TINY_MODEL)


@pytest.fixture
def no_model_server(model_slot: ModelSlot) -> None:
    """For a test that starts a model server of its own: none of the session's is running."""
    model_slot.stop()


# Offline tests first, then the tiny model's, then the reader's, then those that start servers
# of their own: each model starts once, and the fast feedback comes first.
_ORDER = ("tiny_model", "local_model", "no_model_server")


# The hostile suite (tests/hostile/): how many seeded cases it runs, and what it counted.
HOSTILE_CASES = 400


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--hostile-cases",
        type=int,
        default=HOSTILE_CASES,
        help=f"seeded hostile ledgers per citation mode in tests/hostile (default {HOSTILE_CASES})",
    )
    parser.addoption(
        "--record-golden",
        action="store_true",
        help="rewrite tests/golden/requests from the requests this code sends, and record a new "
        "prompt version's digest in tests/golden/prompt_versions.json",
    )


# In a recorded body the system prompt stands as a reference to its version: the digest test
# (core/test_prompt_versions.py) pins each version's text, so a change to the system prompt
# re-records only the version beside each body. Each marker stands for one JSON spelling of
# the system prompt (escaped to ASCII or not).
SYSTEM_PROMPT_MARKERS = {"@system-prompt@": False, "@system-prompt-ascii@": True}


@functools.cache
def _system_prompts() -> dict[str, str]:
    """Each default system prompt by its full version: every citation style, with and without
    fact markers, and with and without the stance key."""
    from evidence_first._sending.citing.modes import STYLES
    from evidence_first._sending.prompt import system_prompt

    found = {}
    for style in STYLES.values():
        for markers, stance in itertools.product((True, False), (True, False)):
            system, version = system_prompt(style(), enforced_markers=markers, stance=stance)
            found[version] = system
    return found


def _sent_prompt(body: str) -> tuple[str, str]:
    """The prompt version of the one system prompt ``body`` carries, and the body with each
    spelling of it replaced by its marker."""
    carried = {
        version: system
        for version, system in _system_prompts().items()
        if any(json.dumps(system, ensure_ascii=escaped)[1:-1] in body for escaped in (False, True))
    }
    assert len(carried) == 1, f"the body carries {len(carried)} known system prompts, not one"
    ((version, system),) = carried.items()
    for marker, escaped in SYSTEM_PROMPT_MARKERS.items():
        assert marker not in body, f"the body holds {marker} itself"
        body = body.replace(json.dumps(system, ensure_ascii=escaped)[1:-1], marker)
    return version, body


@pytest.fixture
def golden_request(pytestconfig: pytest.Config) -> Callable[[str, str, bytes], None]:
    """Return a check that a request body's bytes are those recorded as ``case`` in
    ``tests/golden/requests/<name>.json`` (one file per provider or dialect, a body per case).

    Each case holds the ``prompt_version`` it was recorded under and the ``body``, in which
    the system prompt of that version stands as a marker (:data:`SYSTEM_PROMPT_MARKERS`); the
    check puts the prompt back and compares every byte. A body recorded under another version
    than the one sent fails: a prompt change bumps the version and re-records.

    With ``--record-golden`` it records them instead: record at a commit whose requests are
    right, and commit the files with the change that alters what is sent.
    """

    def check(name: str, case: str, body: bytes) -> None:
        path = GOLDEN_REQUESTS / f"{name}.json"
        recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        sent = body.decode("utf-8")
        version, referenced = _sent_prompt(sent)
        if pytestconfig.getoption("--record-golden"):
            recorded[case] = {"prompt_version": version, "body": referenced}
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(dict(sorted(recorded.items())), ensure_ascii=False, indent=1)
            path.write_text(text + "\n", encoding="utf-8")
            return
        assert case in recorded, f"no recorded body {name}/{case}; record it with --record-golden"
        assert recorded[case]["prompt_version"] == version, (
            f"{name}/{case} was recorded under prompt version "
            f"{recorded[case]['prompt_version']}, and {version} is sent now: record it again "
            "with --record-golden (CONTRIBUTING, A prompt change)"
        )
        system = _system_prompts()[version]
        expected = recorded[case]["body"]
        for marker, escaped in SYSTEM_PROMPT_MARKERS.items():
            expected = expected.replace(marker, json.dumps(system, ensure_ascii=escaped)[1:-1])
        assert sent == expected, f"{name}/{case}"

    return check


def pytest_configure(config: pytest.Config) -> None:
    config.hostile_tally = Counter()  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    tally: Counter[str] = config.hostile_tally  # type: ignore[attr-defined]
    if tally:
        terminalreporter.write_sep("-", "hostile suite")
        terminalreporter.write_line(", ".join(f"{k}: {v}" for k, v in sorted(tally.items())))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        names = getattr(item, "fixturenames", ())
        return next((n + 1 for n, name in enumerate(_ORDER) if name in names), 0)

    items.sort(key=rank)


def _skip_server_probes(request: Request) -> Request | None:
    # The local model's readiness probe is not part of any exchange under test.
    return None if request.path.endswith("/health") else request


# In a cassette's request body the system prompt stands as a marker naming its version,
# ``@system-prompt <version>@`` (one per spelling of SYSTEM_PROMPT_MARKERS): a prompt change
# re-records as a changed marker, and the matcher names the version a cassette was recorded
# under. The digest test pins each version's text.
CASSETTE_PROMPT_MARKER = re.compile(r"@system-prompt(?:-ascii)? ([^@\"\\]+)@")


def _cassette_marker(marker: str, version: str) -> str:
    return f"{marker[:-1]} {version}@"


def _system_prompt_as_marker(request: Request) -> Request:
    """The request (a copy vcrpy made) with each known system prompt in its body replaced by
    its cassette marker; applied to a request when it is recorded and when it is matched."""
    if not isinstance(request.body, bytes):
        return request
    try:
        body = request.body.decode("utf-8")
    except UnicodeDecodeError:
        return request
    # The longest text first, should one version's prompt ever hold another's.
    for version, system in sorted(_system_prompts().items(), key=lambda item: -len(item[1])):
        for marker, escaped in SYSTEM_PROMPT_MARKERS.items():
            spelled = json.dumps(system, ensure_ascii=escaped)[1:-1]
            body = body.replace(spelled, _cassette_marker(marker, version))
    request.body = body
    return request


def _prompt_versions(request: Request) -> list[str]:
    body = request.body if isinstance(request.body, bytes) else b""
    return CASSETTE_PROMPT_MARKER.findall(body.decode("utf-8", errors="replace"))


def body_and_prompt_version(sent: Request, recorded: Request) -> None:
    """The vcrpy matcher of request bodies: the body sent is the recorded one, its system prompt
    of the same version (both hold it as a marker, :func:`_system_prompt_as_marker`)."""
    sent_versions, recorded_versions = _prompt_versions(sent), _prompt_versions(recorded)
    if sent_versions != recorded_versions:
        sent_named = ", ".join(sent_versions) or "no known prompt version"
        recorded_named = ", ".join(recorded_versions) or "no known prompt version"
        msg = (
            f"the cassette was recorded under {recorded_named}, and {sent_named} is sent now: "
            "record the cassettes again with `uv run python tests/record.py`"
        )
        raise AssertionError(msg)
    vcr_matchers.body(sent, recorded)


def pytest_recording_configure(config: pytest.Config, vcr: VCR) -> None:
    vcr.register_matcher("body_and_prompt_version", body_and_prompt_version)


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    return {
        "filter_headers": SECRET_HEADERS,
        "decode_compressed_response": True,
        # The server's port differs between recordings; the route and the body must match.
        "match_on": ["method", "scheme", "path", "query", "body_and_prompt_version"],
        "before_record_request": [_skip_server_probes, _system_prompt_as_marker],
    }


@pytest.fixture(autouse=True)
def _every_recorded_interaction_played(vcr: Cassette | None, recording: bool) -> Iterator[None]:
    """A cassette test fails when it leaves a recorded interaction unplayed."""
    yield
    if vcr is not None and not recording:
        unplayed = len(vcr) - len(vcr.play_counts)
        assert unplayed == 0, f"{unplayed} of {len(vcr)} recorded interactions were not played"


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """Cassettes live in ``tests/cassettes/<test folder>/<test module>/<test>.yaml``."""
    module = Path(str(request.node.fspath))
    return str(CASSETTES / module.parent.name / module.stem)


@pytest.fixture
def recording(record_mode: str | None) -> bool:
    """Whether cassettes are being recorded (``--record-mode`` other than ``none``)."""
    return record_mode not in (None, "none")


@pytest.fixture
def model_base_url(recording: bool, request: pytest.FixtureRequest) -> str:
    """The OpenAI-compatible API root cassette tests call: the live local model when
    recording, a placeholder when replaying."""
    if not recording:
        return REPLAY_BASE_URL
    model: LocalModel = request.getfixturevalue("tiny_model")
    return model.base_url


@dataclass(frozen=True)
class Received:
    """One HTTP request a loopback server received, as its bytes and as parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any


@dataclass
class ServerSentEvents:
    """A streamed answer: each of ``events`` (a whole event, its blank line included) as it is,
    ``interval`` seconds apart, the body ended by closing the connection; or
    ``events(body)``, the events for the request's JSON body.

    Between events the server watches the connection: ``closed_at`` (``time.monotonic()``) is
    when it saw the client close it, after ``written`` events; ``None`` if the stream ended.
    """

    events: Sequence[str] | Callable[[Any], Sequence[str]]
    interval: float = 0.0
    written: int = 0
    closed_at: float | None = None

    def write(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        events = self.events(body) if callable(self.events) else self.events
        for index, event in enumerate(events):
            if index and self._closed(handler.connection, self.interval):
                return
            try:
                handler.wfile.write(event.encode())
                handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.closed_at = time.monotonic()
                return
            self.written += 1

    def _closed(self, connection: socket.socket, wait: float) -> bool:
        """Whether the client closed ``connection`` within ``wait`` seconds."""
        readable, _, _ = select.select([connection], [], [], wait)
        try:
            closed = bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            closed = True
        if closed:
            self.closed_at = time.monotonic()
        return closed


# What a loopback server sends on an error status when no reply was scripted: a body every
# provider SDK here can read, carrying "crafted failure".
CRAFTED_ERROR = {
    "type": "error",
    "error": {"code": 500, "message": "crafted failure", "status": "INTERNAL", "type": "api_error"},
}


class Loopback:
    """A provider endpoint on 127.0.0.1 that records every request and answers as scripted.

    Args:
        keep_alive: HTTP/1.1, whose connections clients pool as they do with real providers;
            ``False``: HTTP/1.0, each connection closed after its response, so no client keeps
            one (a retry then opens a new connection the server sees).
        status: The status of every answer; change it on the object to fail later requests.
        reply: The JSON answered whatever the status, or ``reply(path, body)`` giving each 200
            answer; on an error status without a JSON reply, :data:`CRAFTED_ERROR` is sent. A
            :class:`ServerSentEvents` reply is streamed.
        delay: Seconds each answer is held back, for timeouts; a client that gave up is no error.
        headers: Headers sent with every answer besides its type and length (a ``Location``).
    """

    def __init__(
        self, *, keep_alive: bool = True, status: int = 200, reply: Any = None, delay: float = 0.0
    ) -> None:
        self.status = status
        self.reply = reply
        self.delay = delay
        self.headers: dict[str, str] = {}
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(keep_alive))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        # A short poll keeps shutdown (each test's teardown) quick.
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        """The server's root, such as ``http://127.0.0.1:41234`` (no ``/v1``)."""
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def posts(self) -> list[Received]:
        """The POST requests received."""
        return [request for request in self.requests if request.method == "POST"]

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the POSTs, one per HTTP request the client attempted."""
        return [request.body for request in self.posts]

    @property
    def body(self) -> Any:
        """The one POST body received; fails if there were more."""
        (body,) = self.bodies
        return body

    def answering(self, status: int, reply: Any, delay: float = 0.0) -> Loopback:
        """Answer every later request with ``status`` and ``reply``, after ``delay`` seconds."""
        self.status, self.reply, self.delay = status, reply, delay
        return self

    def streaming(
        self, events: Sequence[str] | Callable[[Any], Sequence[str]], interval: float = 0.0
    ) -> ServerSentEvents:
        """Answer every later request with 200 and ``events`` (:class:`ServerSentEvents`)."""
        streamed = ServerSentEvents(events, interval)
        self.answering(200, streamed)
        return streamed

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer_for(self, path: str, body: Any) -> Any:
        # A scripted reply is sent whatever the status; a callable one gives 200 answers only.
        if self.reply is not None and not callable(self.reply):
            return self.reply
        if self.status != 200:
            return CRAFTED_ERROR
        return {} if self.reply is None else self.reply(path, body)

    def _handler(self, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with server._lock:
                    server.requests.append(
                        Received(self.command, self.path, dict(self.headers), raw, body)
                    )
                time.sleep(server.delay)
                reply = server._answer_for(self.path, body)
                if isinstance(reply, ServerSentEvents):
                    reply.write(self, server.status, body)
                    return
                payload = json.dumps(reply).encode()
                try:
                    self.send_response(server.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in server.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test output stays quiet

        return Handler


@pytest.fixture
def loopback_server() -> Iterator[Callable[..., Loopback]]:
    """Return a starter of :class:`Loopback` servers (same arguments); they stop with the test."""
    started: list[Loopback] = []

    def start(**kwargs: Any) -> Loopback:
        server = Loopback(**kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def loopback(loopback_server: Callable[..., Loopback]) -> Loopback:
    """A provider endpoint over HTTP/1.0, as every folder's provider tests use it: no client
    keeps a connection, so each request a client attempts reaches the server as its own.

    It answers ``{}`` until told otherwise: set ``reply`` (``reply(path, body)`` for each 200
    answer), ``status`` and ``delay`` on it, or all three with :meth:`Loopback.answering`.
    """
    return loopback_server(keep_alive=False)


@pytest.fixture
def json_endpoint(loopback_server: Callable[..., Loopback]) -> Callable[[int, Any], str]:
    """Return a starter of keep-alive endpoints that answer every POST with ``status`` and the
    JSON ``body``; it returns each one's API root (``.../v1``)."""

    def start(status: int, body: Any) -> str:
        return f"{loopback_server(status=status, reply=body).url}/v1"

    return start


@pytest.fixture
def error_base_url(
    recording: bool, json_endpoint: Callable[[int, Any], str]
) -> Callable[[int], str]:
    """Return the API root of a provider that answers every request with ``status``.

    When recording, a loopback stub answers; when replaying, the cassette does.
    """

    def start(status: int) -> str:
        if not recording:
            return REPLAY_BASE_URL
        error = {"error": {"message": "crafted provider error", "type": "server_error"}}
        return json_endpoint(status, error)

    return start


def decision_logprobs(text: str, yes: float) -> dict[str, Any]:
    """An OpenAI chat completion's ``choices[0].logprobs`` for the ledger ``text``: its tokens,
    the decision's first one offering "yes" with probability ``yes`` and "no" with the rest."""
    at = text.index('"answerable":') + len('"answerable": "')
    top = [
        {"token": ' "y', "logprob": math.log(yes)},
        {"token": ' "n', "logprob": math.log(1 - yes)},
    ]
    parts = [(text[: at - 2], []), (text[at - 2 : at + 1], top), (text[at + 1 :], [])]
    return {
        "content": [
            {"token": token, "logprob": -0.1, "bytes": list(token.encode()), "top_logprobs": alts}
            for token, alts in parts
        ]
    }


@pytest.fixture
def logprobs_of() -> Callable[[str, float], dict[str, Any]]:
    """Return :func:`decision_logprobs`: the log-probabilities a provider gives a ledger."""
    return decision_logprobs


def check_invariants(answer: EvidenceAnswer) -> None:
    """What must hold whatever the model says."""
    assert answer.status in {"answered", "insufficient_evidence", "invalid_response"}
    if answer.status == "invalid_response":
        assert answer.reason_codes
        assert answer.facts == ()
        assert answer.answer is None
    if answer.status == "answered":
        assert answer.answer
        assert answer.citations_verified
        assert answer.segments
    else:
        assert answer.segments == ()
    text = answer.answer or ""
    utf16 = text.encode("utf-16-le")
    for segment in answer.segments:
        assert text[segment.char_start : segment.char_end] == segment.text
        assert utf16[2 * segment.utf16_start : 2 * segment.utf16_end].decode("utf-16-le") == (
            segment.text
        )
        assert all(0 <= index < len(answer.facts) for index in segment.fact_indices)
        assert (segment.support == "unmarked") == (not segment.fact_indices)
    for fact in answer.facts:
        for citation in fact.citations:
            source = answer.source(citation.source_id)
            assert citation.source_id in answer.used_source_ids
            assert source.text[citation.char_start : citation.char_end] == citation.quote
            for span in citation.evidence_spans:
                assert source.text[span.char_start : span.char_end] == span.text
    for check in answer.citation_checks:
        if check.citation is not None:
            c = check.citation
            assert answer.source(c.source_id).text[c.char_start : c.char_end] == c.quote


@pytest.fixture
def invariants() -> Callable[[EvidenceAnswer], None]:
    return check_invariants


# Model profiles: what the three folders' profile tests assert of a request body.

# OpenAI's reasoning guide: "reserving at least 25,000 tokens for reasoning and outputs".
REASONING_ALLOWANCE = 25_000


def _keywords(schema: dict[str, Any]) -> set[str]:
    found = set(schema)
    for sub in [*schema.get("properties", {}).values(), *schema.get("anyOf", ())]:
        found |= _keywords(sub)
    if isinstance(schema.get("items"), dict):
        found |= _keywords(schema["items"])
    return found


@pytest.fixture
def schema_keywords() -> Callable[[dict[str, Any]], set[str]]:
    """The keywords used anywhere in a schema (property names are not keywords)."""
    return _keywords


def _assert_reasoning_request(body: dict[str, Any], max_output_tokens: int) -> None:
    assert body["max_completion_tokens"] == max_output_tokens + REASONING_ALLOWANCE
    assert "max_tokens" not in body
    assert "temperature" not in body
    assert "logprobs" not in body
    assert "top_logprobs" not in body


@pytest.fixture
def reasoning_request() -> Callable[[dict[str, Any], int], None]:
    """Asserts a body is sent as to an OpenAI reasoning model, for a ledger of N tokens:
    ``max_completion_tokens`` with room to reason, no temperature, no log-probabilities."""
    return _assert_reasoning_request


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-time warnings start over: each test sees the first warning for its names."""
    monkeypatch.setattr(once, "_warned", set())
