"""`ask` has one flag per option, derived from the options' declaration."""

from __future__ import annotations

import argparse
import io
import typing
from typing import Literal

import annotated_types
import pytest
from pydantic import Field

from evidence_first import cli
from evidence_first.adapters import AnswerOptionFields, AnswerOptions

# A flag value for each option whose range does not give one (see _sample below).
SAMPLES: dict[str, tuple[list[str], object]] = {
    "output_language": (["German"], "German"),
    "question_time": (["1777366800000"], 1777366800000),
    "timeout": (["12.5"], 12.5),
    "min_score": (["0.25"], 0.25),
    "min_reader_confidence": (["none"], None),
    "scope": (["team", "public"], ["team", "public"]),
    "scope_key": (["area"], "area"),
}


def _sample(
    name: str, declaration: type[AnswerOptionFields] = AnswerOptionFields
) -> tuple[list[str], object]:
    """The command-line words for option ``name``, and the option's value they must give.

    An option with a choice takes its last one; a bool, the flag that turns its default over; a
    bounded int, one above its lowest value (so it differs from most defaults); any other, its
    entry in :data:`SAMPLES`.
    """
    field = declaration.model_fields[name]
    flag = f"--{name.replace('_', '-')}"
    choices = (
        typing.get_args(field.annotation) if typing.get_origin(field.annotation) is Literal else ()
    )
    if choices:
        return [flag, choices[-1]], choices[-1]
    if field.annotation is bool:
        return [f"--no-{flag[2:]}" if field.default else flag], not field.default
    if field.annotation is int:
        low = next(bound.ge for bound in field.metadata if isinstance(bound, annotated_types.Ge))
        return [flag, str(low + 1)], low + 1
    values, value = SAMPLES[name]
    return [word for sample in values for word in (flag, sample)], value


def test_ask_passes_every_option_flag_through_as_the_option(monkeypatch, tmp_path):
    seen = {}

    def capture(question, sources, model, **options):
        seen.update(options)
        AnswerOptions(**options)  # what the command passes is what the core accepts
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "answer_from_evidence", capture)
    source = tmp_path / "notes.txt"
    source.write_text("The launch moved to June 15.", encoding="utf-8")
    names = [
        name
        for name in AnswerOptionFields.model_fields
        if name not in {"token_counter", "embedder"}
    ]
    flags = [word for name in names for word in _sample(name)[0]]
    status = cli.main(
        ["ask", "When?", str(source), "--base-url", "http://127.0.0.1:9/v1", *flags],
        out=io.StringIO(),
    )

    assert status == cli.EXIT_INTERRUPTED
    assert seen == {name: _sample(name)[1] for name in names}
    assert seen["knowledge"] == "allow-general-inference"  # a value other than the default


class _WithBool(AnswerOptionFields):
    """The declaration with a bool option, as a new one would be declared."""

    strict_quotes: bool = Field(False, description="a bool option")


@pytest.mark.parametrize(
    ("words", "value"),
    [(["--strict-quotes"], True), (["--no-strict-quotes"], False), ([], None)],
)
def test_a_bool_option_is_a_flag_and_its_negation(monkeypatch, words, value):
    monkeypatch.setattr(cli, "AnswerOptionFields", _WithBool)
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli._add_option_flags(parser, ["strict_quotes"])
    parsed = parser.parse_args(words)
    assert getattr(parsed, "strict_quotes", None) is value  # None: not given, left unset
    assert _sample("strict_quotes", _WithBool) == (["--strict-quotes"], True)


def test_a_bool_flag_takes_no_word_that_could_read_as_true(monkeypatch):
    monkeypatch.setattr(cli, "AnswerOptionFields", _WithBool)
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli._add_option_flags(parser, ["strict_quotes"])
    with pytest.raises(SystemExit):  # "False" is no value of the flag: a usage error
        parser.parse_args(["--strict-quotes", "False"])


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
    assert "anyOf" in full  # the shapes llama.cpp enforces
    assert default["type"] == "object"  # an unknown server gets an object root
