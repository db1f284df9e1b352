"""Each option is declared once; every place that takes options derives from the declaration."""

from __future__ import annotations

import importlib.util
import re
import typing
from pathlib import Path

import pytest

from evidence_first import Evidence, InvalidRequestError, answer_from_evidence
from evidence_first.adapters import AnswerOptionFields, AnswerOptions, OptionArgs

DOCS = Path(__file__).parents[2] / "docs"
CONCEPTS = DOCS / "concepts.md"


def test_the_keyword_arguments_are_the_declared_options_with_their_types():
    declared = {name: field.annotation for name, field in AnswerOptionFields.model_fields.items()}
    assert typing.get_type_hints(OptionArgs) == declared


def test_the_docs_options_table_is_the_declaration():
    text = CONCEPTS.read_text(encoding="utf-8")
    table = re.search(r"<!-- options:[^\n]*-->\n(.*?)<!-- /options -->", text, re.DOTALL)
    assert table is not None
    spec = importlib.util.spec_from_file_location(
        "options_table", DOCS / "scripts/options_table.py"
    )
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert table.group(1).strip().splitlines() == script.table()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_context_tokens", 0),
        ("max_context_tokens", 32_769),
        ("max_output_tokens", 8_193),
        ("max_response_chars", 0),
        ("min_evidence", 65),
        ("timeout", 0),
        ("timeout", 300.5),
        ("knowledge", "anything"),
        ("citation_mode", "verbatim"),
        ("min_score", float("nan")),
        ("scope", "one-string"),
        ("scope_key", ""),
        ("output_language", " "),
        ("question_time", 10**20),
        ("token_counter", 3),
        ("max_output_tokens", True),
    ],
)
def test_an_option_built_directly_is_checked_like_a_keyword(name, value):
    with pytest.raises(InvalidRequestError) as built:
        AnswerOptions(**{name: value})
    assert built.value.field == name
    with pytest.raises(InvalidRequestError) as called:
        answer_from_evidence("q?", [Evidence(id="a", text="t")], _never_called(), **{name: value})
    assert called.value.field == name
    assert str(called.value) == str(built.value)


def test_the_range_is_inclusive_at_both_ends():
    low = AnswerOptions(max_context_tokens=1, min_evidence=64, timeout=300)
    high = AnswerOptions(max_context_tokens=32_768, max_output_tokens=8_192)
    assert (low.max_context_tokens, low.min_evidence, low.timeout) == (1, 64, 300.0)
    assert (high.max_context_tokens, high.max_output_tokens) == (32_768, 8_192)


def test_an_unknown_option_is_a_type_error_like_any_unknown_keyword():
    with pytest.raises(TypeError, match="top_k"):
        AnswerOptions(top_k=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="top_k"):
        answer_from_evidence("q?", [], _never_called(), top_k=3)  # type: ignore[call-arg]


def test_model_copy_checks_its_update_and_keeps_the_rest():
    options = AnswerOptions(max_context_tokens=4096, scope={"team"})
    with pytest.raises(InvalidRequestError) as raised:
        options.model_copy(update={"max_context_tokens": 9_999_999})
    assert raised.value.field == "max_context_tokens"
    copy = options.model_copy(update={"max_output_tokens": 100})
    assert (copy.max_context_tokens, copy.max_output_tokens) == (4096, 100)
    assert copy.scope == frozenset({"team"})
    assert options.max_output_tokens == 2048


def test_options_are_frozen():
    options = AnswerOptions()
    with pytest.raises(ValueError, match="frozen"):
        options.max_context_tokens = 5  # type: ignore[misc]


def _never_called():
    class Model:
        def generate(self, request):
            raise AssertionError("the model must not be called")

    return Model()
