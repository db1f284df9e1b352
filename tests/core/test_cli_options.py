"""`ask` has one flag per option, derived from the options' declaration."""

from __future__ import annotations

import io

from evidence_first import cli
from evidence_first.adapters import AnswerOptionFields, AnswerOptions


def test_ask_passes_every_option_flag_through_as_the_option(monkeypatch, tmp_path):
    seen = {}

    def capture(question, sources, model, **options):
        seen.update(options)
        AnswerOptions(**options)  # what the command passes is what the core accepts
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "answer_from_evidence", capture)
    source = tmp_path / "notes.txt"
    source.write_text("The launch moved to June 15.", encoding="utf-8")
    status = cli.main(
        [
            "ask", "When?", str(source), "--base-url", "http://127.0.0.1:9/v1",
            "--knowledge", "allow-general-inference", "--citation-mode", "quote",
            "--output-language", "German", "--question-time", "1777366800000",
            "--max-context-tokens", "4096", "--max-output-tokens", "300",
            "--max-response-chars", "9000", "--timeout", "12.5", "--min-evidence", "1",
            "--min-score", "0.25", "--scope", "team", "--scope", "public", "--scope-key", "area",
        ],
        out=io.StringIO(),
    )  # fmt: skip

    assert status == cli.EXIT_INTERRUPTED
    assert set(seen) == set(AnswerOptionFields.model_fields) - {"token_counter"}
    assert seen == {
        "knowledge": "allow-general-inference",
        "citation_mode": "quote",
        "output_language": "German",
        "question_time": 1777366800000,
        "max_context_tokens": 4096,
        "max_output_tokens": 300,
        "max_response_chars": 9000,
        "timeout": 12.5,
        "min_evidence": 1,
        "min_score": 0.25,
        "scope": ["team", "public"],
        "scope_key": "area",
    }


def test_an_out_of_range_flag_is_the_options_own_error(tmp_path, capsys):
    source = tmp_path / "notes.txt"
    source.write_text("text", encoding="utf-8")
    status = cli.main(
        ["ask", "q?", str(source), "--base-url", "http://127.0.0.1:9/v1", "--timeout", "0"],
        out=io.StringIO(),
    )
    assert status == cli.EXIT_ERROR
    assert "timeout must be greater than 0" in capsys.readouterr().err


def test_ask_sends_the_schema_in_the_dialect_asked_for(monkeypatch, tmp_path):
    bodies = []

    def capture(self, request):
        bodies.append(self.body(request))
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.ChatCompletionsModel, "generate", capture)
    source = tmp_path / "notes.txt"
    source.write_text("The launch moved to June 15.", encoding="utf-8")
    for dialect in ("full", None):
        flags = ["--dialect", dialect] if dialect else []
        cli.main(
            ["ask", "q?", str(source), "--base-url", "http://127.0.0.1:9/v1", *flags],
            out=io.StringIO(),
        )
    full, default = (body["response_format"]["json_schema"]["schema"] for body in bodies)
    assert "anyOf" in full  # the two branches llama.cpp enforces
    assert default["type"] == "object"  # an unknown server gets an object root
