"""Each option is declared once; every place that takes options derives from the declaration."""

from __future__ import annotations

import ast
import importlib.util
import re
import typing
from pathlib import Path

import pytest
from pydantic import Field

import evidence_first
from evidence_first import Evidence, InvalidRequestError, answer_from_evidence
from evidence_first._sending.options import OPTION_NAMES
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
        ("min_reader_confidence", 1.5),
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


class _WithNew(AnswerOptions):
    """The options with a bool and a bounded float, as new ones would be declared."""

    strict_quotes: bool = Field(False, description="a bool option")
    share: float = Field(0.5, ge=0, le=1, description="a bounded float option")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("strict_quotes", "False", "strict_quotes must be True or False"),
        ("strict_quotes", 1, "strict_quotes must be True or False"),
        ("share", 1.5, "share must be a number from 0 to 1"),
        ("share", None, "share must be a number from 0 to 1"),
        ("share", True, "share must be a number from 0 to 1"),
    ],
)
def test_a_new_bool_or_float_option_is_checked_by_its_declaration(name, value, message):
    with pytest.raises(InvalidRequestError, match=f"^{message}$") as raised:
        _WithNew(**{name: value})
    assert raised.value.field == name
    assert (_WithNew(strict_quotes=True).strict_quotes, _WithNew(share=1).share) == (True, 1.0)


def test_every_option_reaches_the_code_that_uses_it():
    # An option is read by name (`options.<name>`, `plan.options.<name>`, `self.<name>`), by
    # the stage it is handed to: a search for the name finds every reader.
    read: set[str] = set()
    for path in Path(evidence_first.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                owner = node.value
                if (isinstance(owner, ast.Name) and owner.id in {"options", "self"}) or (
                    isinstance(owner, ast.Attribute) and owner.attr == "options"
                ):
                    read.add(node.attr)
    assert sorted(OPTION_NAMES - read) == []


def test_no_stage_is_handed_options_by_reading_its_signature():
    # Each stage is given the options explicitly, as one typed value (`AnswerOptions`).
    for path in Path(evidence_first.__file__).parent.rglob("*.py"):
        assert "inspect.signature" not in path.read_text(encoding="utf-8"), path.name


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
