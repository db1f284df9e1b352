"""The command line offline: exit statuses a script can read, and a report that folds repeats."""

from __future__ import annotations

import io
import json
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

import _support
import pytest

from evidence_first import answer_from_evidence, cli
from evidence_first.cli import EXIT_ERROR, EXIT_NOTHING_ANSWERED, main, render_report

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
