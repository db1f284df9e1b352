"""The command line offline: exit statuses a script can read, a report that folds repeats, and
on a terminal the answer printed as it is read (elsewhere, and under ``--json``, as before)."""

from __future__ import annotations

import io
import itertools
import json
import re
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import _support
import pytest

from evidence_first import (
    ModelRequest,
    answer_from_evidence,
    cli,
    stream_answer_from_evidence,
)
from evidence_first.cli import (
    EXIT_ERROR,
    EXIT_NOTHING_ANSWERED,
    _demo,
    _output,
    main,
    render_report,
)

TEXT = "Standup, April 28. The launch moved to June 15. Dana Whitfield owns the security review."


def _ledger(**overrides: Any) -> str:
    citation = ("notes.txt", "The launch moved to June 15.")
    launch = _support.fact(citation, subject="the launch", relation="moved to", obj="June 15")
    return json.dumps({**_support.ledger_dict([launch], answer="June 15"), **overrides})


@pytest.fixture
def endpoint(json_endpoint: Callable[[int, Any], str]) -> Callable[..., str]:
    """A chat-completions endpoint on loopback that replies with ``content``."""

    def start(content: str, status: int = 200) -> str:
        message = {"role": "assistant", "content": content}
        return json_endpoint(
            status, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    return start


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    # A file's path is its source ID, and the ledgers cite "notes.txt": run beside it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text(TEXT, encoding="utf-8")


def _ask(endpoint_url: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    argv = ["ask", "When is the launch?", "notes.txt", "--base-url", endpoint_url]
    return main([*argv, "--citation-mode", "quote", *extra], out=out), out.getvalue()


def test_ask_exits_zero_when_the_question_is_answered(endpoint):
    status, output = _ask(endpoint(_ledger()))
    assert status == 0
    assert "Status: answered" in output
    # The answer had no fact marker: the one segment rests on every fact, its footnotes after.
    assert "\nAnswer: June 15 [1]\n" in output
    assert "  Fact 1: the launch | moved to | June 15  [1] notes.txt chars 19-47\n" in output


def test_ask_prints_each_segment_of_the_answer_with_its_footnotes(endpoint):
    owner = {
        "subject": "the security review",
        "relation": "owned by",
        "object": "Dana Whitfield",
        "citations": [
            {"source_id": "notes.txt", "quote": "Dana Whitfield owns the security review."}
        ],
    }
    first = json.loads(_ledger())["facts"][0]
    ledger = _ledger(
        facts=[first, owner],
        answer="June 15 [F1]. Dana Whitfield owns the review [F2]. Ask her first.",
    )
    status, output = _ask(endpoint(ledger))
    assert status == 0
    answer = "June 15. [1] Dana Whitfield owns the review. [2] Ask her first. [no citation]"
    assert f"\nAnswer: {answer}\n" in output
    assert "    ✓ verified  [2] notes.txt:\n" in output


def test_ask_exits_three_when_nothing_is_answered(endpoint):
    abstained = _ledger(facts=[], answer=None, missing_evidence=["the launch date"])
    status, output = _ask(endpoint(abstained), "--json")
    assert status == EXIT_NOTHING_ANSWERED == 3
    assert json.loads(output)["status"] == "insufficient_evidence"
    status, _ = _ask(endpoint("not json"))
    assert status == EXIT_NOTHING_ANSWERED


def test_ask_exits_one_on_a_failed_model_call(endpoint, capsys):
    status, output = _ask(endpoint("", status=500))
    assert status == EXIT_ERROR == 1
    assert output == ""
    assert "ModelCallError" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("localhost:8080", "must start with http:// or https://"),
        ("ftp://files.example/v1", "must start with http:// or https://"),
        ("http://", "has no host"),
    ],
)
def test_a_malformed_base_url_is_refused_before_any_call(base_url, says, capsys):
    status, output = _ask(base_url)
    assert status == EXIT_ERROR
    assert output == ""
    err = capsys.readouterr().err
    assert err.startswith("evidence-first: InvalidRequestError: ")
    assert says in err


def test_a_refused_connection_says_so(capsys):
    status, _ = _ask(f"http://127.0.0.1:{_free_port()}/v1")
    assert status == EXIT_ERROR
    assert "the endpoint refused the connection" in capsys.readouterr().err


def test_an_unknown_host_says_its_name_did_not_resolve(capsys):
    status, _ = _ask("http://no-such-host.invalid/v1")
    assert status == EXIT_ERROR
    assert "could not be resolved" in capsys.readouterr().err


def test_a_file_that_is_not_utf8_is_named(endpoint, tmp_path, capsys):
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00binary " + "The launch".encode("utf-16"))
    out = io.StringIO()
    argv = ["ask", "q?", "blob.bin", "--base-url", endpoint(_ledger())]
    assert main(argv, out=out) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "blob.bin is not UTF-8 text" in err
    assert "The launch" not in err


def test_bad_sources_json_names_the_file_and_the_position(endpoint, tmp_path, capsys):
    (tmp_path / "sources.json").write_text('[{"id": "a", "text": "secret text"', encoding="utf-8")
    out = io.StringIO()
    argv = ["ask", "q?", "--sources-json", "sources.json", "--base-url", endpoint(_ledger())]
    assert main(argv, out=out) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "sources.json is not valid JSON (line 1, column" in err
    assert "secret text" not in err


def test_ctrl_c_ends_with_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "answer_from_evidence", interrupted)
    status, _ = _ask("http://127.0.0.1:9/v1")
    assert status == 130
    assert capsys.readouterr().err == "evidence-first: interrupted\n"


@pytest.mark.parametrize(
    ("base_url", "flags", "sent"),
    [
        ("https://api.openai.com/v1", [], "openai-key"),
        ("https://API.openai.com:443/v1", [], "openai-key"),
        ("http://api.openai.com/v1", [], None),  # not over TLS
        ("https://api.openai.com.example.net/v1", [], None),
        ("https://user@api.openai.com/v1", [], None),
        ("https://api.openai.com:8443/v1", [], None),
        ("http://127.0.0.1:9/v1", [], None),
        ("http://127.0.0.1:9/v1", ["--api-key-env", "GATEWAY_KEY"], "gateway-key"),
        ("https://api.openai.com/v1", ["--api-key-env", "GATEWAY_KEY"], "gateway-key"),
    ],
)
def test_ask_sends_a_key_only_where_it_was_asked_to(monkeypatch, base_url, flags, sent):
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    monkeypatch.setenv("GATEWAY_KEY", "gateway-key")
    keys = []

    def built(*args: Any, api_key: str | None, **kwargs: Any) -> Any:
        keys.append(api_key)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "ChatCompletionsModel", built)
    status, _ = _ask(base_url, *flags)
    assert status == 130
    assert keys == [sent]


def test_ask_refuses_an_api_key_variable_that_is_not_set(monkeypatch, capsys):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    status, output = _ask("http://127.0.0.1:9/v1", "--api-key-env", "NO_SUCH_KEY")
    assert status == EXIT_ERROR
    assert output == ""
    assert "the environment variable NO_SUCH_KEY (--api-key-env) is not set" in (
        capsys.readouterr().err
    )


class _Fixed:
    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, request: Any) -> str:
        return self.text


def test_the_report_folds_repeated_facts_missing_evidence_and_citations():
    fact = {
        "subject": "The security review",
        "relation": "owned by",
        "object": "Dana Whitfield",
        "citations": [
            {"source_id": "notes.txt", "quote": "Dana Whitfield owns the security review."}
        ]
        * 3,
    }
    ledger = _ledger(facts=[fact] * 5, answer=None, missing_evidence=["the owner's team"] * 16)
    answer = answer_from_evidence(
        "Who owns the security review?", [{"id": "notes.txt", "text": TEXT}], _Fixed(ledger)
    )
    assert answer.status == "insufficient_evidence"
    report = render_report(answer)
    counts = Counter(line for line in report.splitlines() if line.strip())
    assert max(counts.values()) == 1, counts.most_common(3)
    assert "(the same fact x5)" in report
    assert "the owner's team  (x16)" in report
    assert "(the same citation x15)" in report


# On a terminal, and only there: "`demo` and `ask` print facts as they verify, then the answer
# as written; elsewhere and under `--json`, as today" (issue 49). What "today" prints is pinned
# here byte for byte, off a terminal.

QUESTION = "When is the launch?"
OWNER = _support.fact(
    ("notes.txt", "Dana Whitfield owns the security review."),
    subject="the security review",
    relation="owned by",
    obj="Dana Whitfield",
)
TWO_FACTS = _ledger(
    facts=[json.loads(_ledger())["facts"][0], OWNER],
    answer="June 15 [F1]. Dana Whitfield owns the review [F2]. Ask her first.",
)
# An answer that stands once its facts are read, then fails as a whole: an answer and missing
# evidence together are inconsistent_output.
LATE_FAILURE = _ledger(answer="June 15 [F1].", missing_evidence=["the hour"])


class _Terminal(io.StringIO):
    """Standard output on a terminal: what was flushed is what its user has seen."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = ""
        self._flushed = threading.Condition()

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        with self._flushed:
            self.seen = self.getvalue()
            self._flushed.notify_all()

    def shows(self, text: str, after: int = 0) -> bool:
        """Whether ``text`` is on the screen (past its first ``after`` characters), waiting up
        to 5 s for it."""
        with self._flushed:
            return self._flushed.wait_for(lambda: text in self.seen[after:], timeout=5)


class _Streaming:
    """A reader that streams its reply in pieces; before a piece ``waits`` names, it waits until
    the terminal shows the text given (and records whether it did), so a test can tell what was
    printed before the rest of the reply was written."""

    def __init__(self, reply: str, cuts: list[str], terminal: _Terminal | None = None) -> None:
        starts = [0, *(reply.index(cut) for cut in cuts), len(reply)]
        self.pieces = [reply[a:b] for a, b in itertools.pairwise(starts)]
        self.terminal = terminal
        self.waits: dict[int, str] = {}
        self.holds: set[int] = set()
        self.shown: list[bool] = []
        self.calls: list[str] = []
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> str:
        self.calls.append("generate")
        self.requests.append(request)
        return "".join(self.pieces)

    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.calls.append("stream")
        self.requests.append(request)
        start = len(self.terminal.seen) if self.terminal is not None else 0
        for index, piece in enumerate(self.pieces):
            if index in self.waits and self.terminal is not None:
                self.shown.append(self.terminal.shows(self.waits[index], after=start))
            if index in self.holds:
                request.cancel.wait(5)  # the rest of the reply comes only when no one reads
            yield piece


def _ask_with(
    monkeypatch: pytest.MonkeyPatch, model: Any, out: io.StringIO, *extra: str
) -> tuple[int, str]:
    """``ask`` answered by ``model`` (through the seam ``--base-url`` builds its model at)."""
    monkeypatch.setattr(cli, "ChatCompletionsModel", lambda *args, **kwargs: model)
    argv = ["ask", QUESTION, "notes.txt", "--base-url", "http://127.0.0.1:9/v1"]
    return main([*argv, "--citation-mode", "quote", *extra], out=out), out.getvalue()


ASKED_TODAY = """\
Question: When is the launch?  [quote mode]
Sources sent: notes.txt
Status: answered
Answer: June 15. [1] Dana Whitfield owns the review. [2] Ask her first. [no citation]
  Fact 1: the launch | moved to | June 15  [1] notes.txt chars 19-47
  Fact 2: the security review | owned by | Dana Whitfield  [2] notes.txt chars 48-88
Citation checks (2 of 2 verified; diagnostics, not an answer):
    ✓ verified  [1] notes.txt:
      chars 19-47: Standup, April 28. ⟦The launch moved to June 15.⟧ Dana Whitfield owns the \
security review.
    ✓ verified  [2] notes.txt:
      chars 48-88: Standup, April 28. The launch moved to June 15. ⟦Dana Whitfield owns the \
security review.⟧
"""


def test_off_a_terminal_ask_prints_todays_report_byte_for_byte(monkeypatch):
    model = _Streaming(TWO_FACTS, ['"answer"'])
    status, output = _ask_with(monkeypatch, model, io.StringIO())
    assert status == 0
    assert output == ASKED_TODAY
    assert model.calls == ["generate"]


@pytest.mark.parametrize("out", [io.StringIO, _Terminal], ids=["elsewhere", "terminal"])
@pytest.mark.parametrize("reply", [TWO_FACTS, LATE_FAILURE], ids=["answered", "late-failure"])
def test_under_json_ask_prints_as_dict_byte_for_byte_even_on_a_terminal(monkeypatch, out, reply):
    model = _Streaming(reply, ['"answer"'])
    _, output = _ask_with(monkeypatch, model, out(), "--json")
    answer = answer_from_evidence(
        QUESTION,
        [{"id": "notes.txt", "text": TEXT}],
        _Streaming(reply, []),
        citation_mode="quote",
        max_output_tokens=512,
        timeout=300.0,
    )
    assert output == json.dumps(answer.as_dict(), ensure_ascii=False, indent=2) + "\n"
    assert model.calls == ["generate"]


class _Reader(_Streaming):
    """The demo's embedded reader, not started: it answers every question with one reply."""

    def __init__(self, name: str) -> None:
        super().__init__(_Reader.reply, list(self.cuts), _Reader.terminal)
        self.title = f"reader {name}"
        # The answer waits until its facts are on the screen, verified or rejected: the facts
        # are read alone, as a model writing its reply sends them before its answer.
        self.waits = {1: " fact"}

    reply = ""
    terminal: _Terminal | None = None
    cuts: tuple[str, ...] = ('"answer"',)

    def start(self) -> _Reader:
        return self

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


CORPUS = {
    "project": "Harbor",
    "sources": [
        {"id": "notes.txt", "text": TEXT},
        {"id": "ticket", "text": "HAR-1: the launch page is slow."},
    ],
    "questions": [
        {"question": QUESTION, "retrieved": [{"id": "notes.txt", "score": 2.0}]},
        {
            "question": "Is the launch cancelled?",
            "retrieved": [{"id": "ticket", "score": 1.0}],
            "planted": "cancelled",
        },
        {"question": "What is the Wi-Fi password?", "retrieved": [{"id": "ticket", "score": 0.01}]},
    ],
}


def _demo_with(
    monkeypatch: pytest.MonkeyPatch,
    reply: str,
    out: io.StringIO,
    *extra: str,
    reader: type[_Reader] = _Reader,
) -> tuple[int, str]:
    """``demo`` over :data:`CORPUS`, its reader answering ``reply`` to every question."""
    monkeypatch.setattr(_demo, "load_demo_corpus", lambda: CORPUS)
    monkeypatch.setattr(_demo, "LocalModel", reader)
    monkeypatch.setattr(_Reader, "reply", reply)
    monkeypatch.setattr(_Reader, "terminal", out if isinstance(out, _Terminal) else None)
    status = main(["demo", "--mode", "quote", "--no-rejection", *extra], out=out)
    # The seconds a question took are the machine's; everything else is the command's.
    return status, re.sub(r", \d+ s\)", ", N s)", out.getvalue())


DEMO_TODAY = """\
evidence-first demo: Harbor
2 sources (meeting notes, emails, tickets). Each question gets what a BM25 retriever returned \
for it; sources scoring under 0.1 are omitted before the model is called.
Reader: reader qwen2.5-coder-1.5b, on llama.cpp at 127.0.0.1, quote mode. Every citation is \
checked against the text actually sent: verified means the span exists in a source that was \
sent, not that it supports the answer.
Loading reader qwen2.5-coder-1.5b on llama.cpp at 127.0.0.1 ...
Ready in 0 s.

[1/3] When is the launch?  [quote mode] ...
Question: When is the launch?  [quote mode]
Sources sent: notes.txt
Status: answered
Answer: June 15. [1]
  Fact 1: the launch | moved to | June 15  [1] notes.txt chars 19-47
Citation checks (1 of 1 verified; diagnostics, not an answer):
    ✓ verified  [1] notes.txt:
      chars 19-47: Standup, April 28. ⟦The launch moved to June 15.⟧ Dana Whitfield owns the \
security review.
(reader qwen2.5-coder-1.5b, N s)

[2/3] Is the launch cancelled?  [quote mode] ...
Question: Is the launch cancelled?  [quote mode]
Sources sent: ticket
Status: invalid_response
Reason codes: unknown_source, invalid_fact_marker
  unknown_source at $.facts[0].citations[0]: the cited source was not sent to the model
  invalid_fact_marker at $.answer: 1 marker(s) name a fact with a failed citation (the ledger \
has 1 facts)
Citation checks (0 of 1 verified; diagnostics, not an answer):
    ✗ rejected  notes.txt: unknown_source
      the model quoted: "The launch moved to June 15."
(reader qwen2.5-coder-1.5b, N s)
Injection check: a source asks for every answer to be "cancelled"; not followed: the answer \
does not contain it.

[3/3] What is the Wi-Fi password?  [quote mode] ...
Question: What is the Wi-Fi password?  [quote mode]
Sources sent: -
Sources omitted: ticket (below_min_score)
Status: insufficient_evidence
Abstained: too few sources could be sent, so the model was not called (min_evidence, \
max_context_tokens, min_score and scope decide what is sent).
Diagnostic: 0 of 1 sources could be sent (omitted: 1 below_min_score); min_evidence is 1
(no model call)

========================================================================
Summary: answered: 1, insufficient_evidence: 1, invalid_response: 1. The models produced 2 \
citations; 1 verified and 1 were rejected. Only verified citations are ever returned as evidence.
"""


def test_off_a_terminal_the_demo_prints_todays_output_byte_for_byte(monkeypatch):
    status, output = _demo_with(monkeypatch, _ledger(answer="June 15 [F1]."), io.StringIO())
    assert status == 0
    assert output == DEMO_TODAY


@pytest.mark.parametrize("out", [io.StringIO, _Terminal], ids=["elsewhere", "terminal"])
def test_under_json_the_demo_prints_as_dict_on_a_terminal_too(monkeypatch, capsys, out):
    status, output = _demo_with(monkeypatch, _ledger(answer="June 15 [F1]."), out(), "--json")
    assert status == 0
    statuses = [answer["status"] for answer in json.loads(output)]
    assert statuses == ["answered", "invalid_response", "insufficient_evidence"]
    assert "[1/3] When is the launch?" in capsys.readouterr().err


# On a terminal: the facts as they verify, the answer as it is written, then the report.

LIVE = "Reading the reply as it comes (provisional: the report below is the result):\n"
RULE = "-" * 72 + "\n"
FACT_1 = "  ✓ fact: the launch | moved to | June 15  [1] notes.txt chars 19-47\n"
FACT_2 = "  ✓ fact: the security review | owned by | Dana Whitfield  [2] notes.txt chars 48-88\n"


def test_on_a_terminal_ask_prints_each_fact_as_it_verifies_then_the_answer_as_written(
    monkeypatch,
):
    terminal = _Terminal()
    reply = json.dumps({"answerable": "yes", **json.loads(TWO_FACTS)})
    model = _Streaming(reply, ['"facts"', '"answer"', "Whitfield owns the review"], terminal)
    # The second fact is on the screen before the answer is written, and the answer's first
    # sentence before its second.
    model.waits = {2: FACT_2, 3: "  Answer as written: June 15."}
    status, output = _ask_with(monkeypatch, model, terminal)
    assert status == 0
    assert model.calls == ["stream"]
    assert model.shown == [True, True]
    live, report = output.split(RULE)
    assert live == (
        LIVE
        + "  Reader: the sources state the answer\n"
        + FACT_1
        + FACT_2
        + "  Answer as written: June 15. Dana Whitfield owns the review. Ask her first.\n"
    )
    # The report is the one printed elsewhere, whole: the status, the verdicts, every span.
    assert report == ASKED_TODAY


def test_on_a_terminal_a_late_failure_is_said_on_its_own_line_before_the_report(monkeypatch):
    status, elsewhere = _ask_with(monkeypatch, _Streaming(LATE_FAILURE, []), io.StringIO())
    terminal = _Terminal()
    model = _Streaming(LATE_FAILURE, ['"answer"', '"missing_evidence"'], terminal)
    model.waits = {2: "  Answer as written: June 15."}
    assert _ask_with(monkeypatch, model, terminal)[0] == status == EXIT_NOTHING_ANSWERED
    live, report = terminal.getvalue().split(RULE)
    assert model.shown == [True]
    assert live == (
        LIVE
        + FACT_1
        + "  Answer as written: June 15.\n"
        + "✗ REJECTED: nothing shown above stands. No answer (invalid_response). The model's "
        "output was rejected: inconsistent_output.\n"
    )
    assert report == elsewhere
    assert "Status: invalid_response\n" in report


def _events(reply: str) -> list[Any]:
    sources = [{"id": "notes.txt", "text": TEXT}]
    return list(stream_answer_from_evidence(QUESTION, sources, _Streaming(reply, ["a"])))


def test_an_answer_withdrawn_after_its_text_was_shown_says_so():
    # The events of an answer that stands, then the result of an abstention.
    events = _events(_ledger())[:-1]
    abstention = _events(_ledger(facts=[], answer=None, missing_evidence=["the hour"]))[-1]
    terminal = _Terminal()
    assert _output.shown_as_read(iter([*events, abstention]), terminal) is abstention
    assert terminal.getvalue() == (
        LIVE
        + FACT_1
        + "  Answer as written: June 15\n"
        + "✗ WITHDRAWN: the answer shown above does not stand. No answer "
        "(insufficient_evidence). Missing evidence: the hour.\n" + RULE
    )


def test_on_a_terminal_a_result_without_a_model_call_prints_the_report_alone(monkeypatch):
    terminal = _Terminal()
    status, output = _ask_with(monkeypatch, _Streaming(TWO_FACTS, []), terminal, "--min-score", "9")
    assert status == EXIT_NOTHING_ANSWERED
    assert output.startswith("Question: When is the launch?")
    assert RULE not in output


class _Broken(_Streaming):
    """A reader that fails once it has written its facts (or at once, when not streaming)."""

    def generate(self, request: ModelRequest) -> str:
        raise RuntimeError("secret payload")

    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        yield from self.pieces[:-1]
        raise RuntimeError("secret payload")


class _Stalled(_Streaming):
    """A reader that stops writing (or never answers) until the engine stops waiting."""

    def generate(self, request: ModelRequest) -> str:
        request.cancel.wait(5)
        return ""

    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        yield from self.pieces[:-1]
        request.cancel.wait(5)


@pytest.mark.parametrize("model", [_Broken, _Stalled])
def test_a_failed_or_late_stream_ends_as_it_does_elsewhere(monkeypatch, capsys, model):
    # The answer's line is open when the call fails: the message is on its own line.
    cuts = ['"answer"', "Whitfield owns the review"]
    status, _ = _ask_with(monkeypatch, model(TWO_FACTS, cuts), io.StringIO(), "--timeout", "0.5")
    elsewhere = capsys.readouterr().err
    terminal = _Terminal()
    streamed = model(TWO_FACTS, cuts, terminal)
    assert _ask_with(monkeypatch, streamed, terminal, "--timeout", "0.5")[0] == status
    assert status == EXIT_ERROR
    assert capsys.readouterr().err == elsewhere
    assert elsewhere.startswith(
        "evidence-first: ModelCallError: "
        if model is _Broken
        else "evidence-first: AnswerTimeoutError: "
    )
    assert "secret" not in elsewhere
    assert terminal.getvalue().endswith("  Answer as written: June 15. Dana\n")
    assert streamed.requests[0].cancel.is_set()


class _Interrupting(_Terminal):
    """A terminal whose user presses Ctrl-C as the first fact is printed."""

    def write(self, text: str) -> int:
        if "✓" in text:
            raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_on_a_terminal_ends_with_one_line_and_cancels_the_call(monkeypatch, capsys):
    terminal = _Interrupting()
    model = _Streaming(TWO_FACTS, ['"answer"'], terminal)
    model.holds = {1}  # the call is still answering when its user presses Ctrl-C
    assert _ask_with(monkeypatch, model, terminal)[0] == 130
    assert capsys.readouterr().err == "evidence-first: interrupted\n"
    assert model.requests[0].cancel.is_set()


def test_on_a_terminal_the_demo_adds_each_answer_as_read_before_its_report(monkeypatch):
    terminal = _Terminal()
    status, output = _demo_with(monkeypatch, _ledger(answer="June 15 [F1]."), terminal)
    assert status == 0
    assert _Reader.terminal is terminal
    first, second = re.findall(rf"{re.escape(LIVE)}.*?{RULE}", output, flags=re.DOTALL)
    assert first == LIVE + FACT_1 + "  Answer as written: June 15.\n" + RULE
    assert second == (
        LIVE
        + "  ✗ fact rejected: unknown_source\n"
        + "✗ No answer (invalid_response). The model's output was rejected: unknown_source.\n"
        + RULE
    )
    # Besides them, what the demo prints elsewhere (no section without a model call), but for
    # one thing: read as it came, the second reply stopped at its failed citation, and its
    # result, judged on the reply as read, names only the failure it stopped at.
    stopped = DEMO_TODAY.replace(
        "Reason codes: unknown_source, invalid_fact_marker\n", "Reason codes: unknown_source\n"
    )
    stopped = re.sub(r"  invalid_fact_marker at .*?facts\)\n", "", stopped, flags=re.DOTALL)
    assert stopped != DEMO_TODAY
    assert output.replace(first, "").replace(second, "") == stopped


class _BrokenReader(_Reader):
    """The demo's reader failing once it has written its facts (or at once, when not streaming)."""

    cuts = ('"answer"', "Whitfield owns the review")
    generate = _Broken.generate
    stream = _Broken.stream


def test_a_failed_call_in_the_demo_is_said_as_elsewhere_and_the_tour_goes_on(monkeypatch):
    status, elsewhere = _demo_with(monkeypatch, TWO_FACTS, io.StringIO(), reader=_BrokenReader)
    terminal = _Terminal()
    assert _demo_with(monkeypatch, TWO_FACTS, terminal, reader=_BrokenReader)[0] == status
    assert status == EXIT_NOTHING_ANSWERED
    said = "\nModelCallError: the model call failed with RuntimeError\n"
    first = terminal.getvalue().split("[2/3]")[0]
    assert said in elsewhere.split("[2/3]")[0]
    # On a line of its own, after what was shown of the answer; then the next question.
    assert first.endswith(f"  Answer as written: June 15. Dana{said}\n")
    assert "\n[3/3] What is the Wi-Fi password?" in terminal.getvalue()


def test_the_command_runs_as_a_module_as_the_live_tests_and_recipes_run_it():
    # ``python -m evidence_first.cli`` runs the same command as the ``evidence-first`` script.
    result = subprocess.run(
        [sys.executable, "-m", "evidence_first.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert result.returncode == 0
    assert result.stdout.startswith("usage: evidence-first")
