"""The request schema and the ledger models are one shape: a property test holds them together.

Anything valid under a request schema the engine emits parses as a ledger, and the longest
ledger the schema allows (every string at its maxLength, every list at its maxItems, written
compactly without escapes) fits the request's ``max_response_chars``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_first import LEDGER_JSON_SCHEMA, Evidence, ModelResponse
from evidence_first._engine.plan import plan_answer
from evidence_first._models.dialects import DIALECTS, Dialect
from evidence_first._models.writing import branch_on_answer, schema_in
from evidence_first._reading.parsing import parse_response
from evidence_first._sending.citing.modes import STYLES
from evidence_first._sending.schema import worst_case_chars
from evidence_first.adapters import AnswerOptions

SENTENCE = "The survey of the northern valley ended on the third day."


class _NeverCalled:
    # The full dialect: the richest request schema, quote patterns included.
    dialect = "full"

    def generate(self, request: Any) -> str:
        raise AssertionError


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, Any], AnswerOptions]:
    ids = draw(
        st.lists(
            st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=16),
            min_size=1,
            max_size=64,
            unique=True,
        )
    )
    sentences = draw(st.lists(st.integers(1, 6), min_size=len(ids), max_size=len(ids)))
    sources = [
        Evidence(id=source_id, text=" ".join([SENTENCE] * count))
        for source_id, count in zip(ids, sentences, strict=True)
    ]
    options = AnswerOptions(
        citation_mode=draw(st.sampled_from(sorted(STYLES))),
        knowledge=draw(st.sampled_from(["evidence-only", "allow-general-inference"])),
        max_context_tokens=32_768,
        max_output_tokens=draw(st.integers(1, 8192)),
        max_response_chars=draw(st.integers(2_000, 131_072)),
    )
    plan = plan_answer(options, "What ended on the third day?", sources, _NeverCalled())
    assert plan.request is not None
    assert len(plan.packed.sent) == len(sources)
    return plan.request.json_schema, options


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of a request schema (its keywords only; lists and strings kept short).

    hypothesis-jsonschema would do this, but its current release reaches into Hypothesis
    internals that the pinned Hypothesis no longer has.
    """
    if schema.get("nullable"):
        return st.one_of(
            st.none(), from_schema({k: v for k, v in schema.items() if k != "nullable"})
        )
    if "anyOf" in schema:
        return st.one_of([from_schema(branch) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    options: list[st.SearchStrategy[Any]] = []
    for kind in kinds:
        if kind == "null":
            options.append(st.none())
        elif kind == "string" and "pattern" in schema:
            options.append(st.from_regex(schema["pattern"], fullmatch=True))
        elif kind == "string":
            low = schema.get("minLength", 0)
            high = max(low, min(schema.get("maxLength", 40), 40))
            options.append(st.text(min_size=low, max_size=high))
        elif kind == "array":
            low = schema.get("minItems", 0)
            high = max(low, min(schema.get("maxItems", 3), 3))
            options.append(st.lists(from_schema(schema["items"]), min_size=low, max_size=high))
        elif kind == "object":
            options.append(
                st.fixed_dictionaries(
                    {name: from_schema(sub) for name, sub in schema["properties"].items()}
                )
            )
    return st.one_of(options)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _longest(schema: dict[str, Any]) -> Any:
    """The longest instance, built greedily: lengths add up, so the longest part wins."""
    if "anyOf" in schema:
        return max((_longest(branch) for branch in schema["anyOf"]), key=lambda v: len(_compact(v)))
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(_compact(v)))
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    candidates: list[Any] = []
    for kind in kinds:
        if kind == "null":
            candidates.append(None)
        elif kind == "string" and "pattern" in schema:
            quote = schema["pattern"] == "^$" or schema["pattern"].startswith(_QUOTE)
            longest = _longest_quote if quote else _longest_marked
            candidates.append(longest(schema["pattern"]))
        elif kind == "string":
            candidates.append("x" * schema["maxLength"])
        elif kind == "array":
            candidates.append([_longest(schema["items"])] * schema["maxItems"])
        elif kind == "object":
            candidates.append({name: _longest(sub) for name, sub in schema["properties"].items()})
        else:
            raise AssertionError(f"unexpected type {kind}")
    return max(candidates, key=lambda v: len(_compact(v)))


# Quote mode's pattern: a choice of literal runs, each step past the first two optional.
_QUOTE = "^("


def _longest_quote(pattern: str) -> str:
    """The longest quote a quote pattern allows: its longest run, every step taken."""
    if pattern == "^$":  # no run fits the quote's maxLength
        return ""
    assert pattern.startswith(_QUOTE)
    assert pattern.endswith(")$")
    runs = re.split(r"(?<!\\)\|", pattern[len(_QUOTE) : -2])
    quotes = [re.sub(r"\\(.)", r"\1", re.sub(r"(?<!\\)(\(|\)\?)", "", run)) for run in runs]
    quote = max(quotes, key=len)
    assert re.fullmatch(pattern, quote)
    return quote


def _longest_marked(pattern: str) -> str:
    """The longest answer an answered shape's marker pattern allows, read off the pattern."""
    claim_chars = int(re.search(r"\{\d+,(\d+)\}", pattern).group(1))
    more = re.search(r"\)\{0,(\d+)\}\$$", pattern)
    claims = 1 + int(more.group(1)) if more else 1
    two_digits = "([1-9]|" in pattern
    named = re.search(r", F.*?\)\{0,(\d+)\}", pattern)
    numbers = 1 + (int(named.group(1)) if named else 0)
    marker = "[" + ", ".join(["F10" if two_digits else "F1"] * numbers) + "]."
    answer = " ".join(["x" * claim_chars + " " + marker] * claims)
    assert re.fullmatch(pattern, answer)
    return answer


def _parses(instance: object, options: AnswerOptions) -> bool:
    text = json.dumps(instance, ensure_ascii=False)
    parsed = parse_response(
        ModelResponse(text=text),
        max_response_chars=max(len(text), options.max_response_chars),
        citation_model=STYLES[options.citation_mode].citation_model,
    )
    return parsed.ledger is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_the_longest_ledger_a_request_schema_allows_fits_and_parses(request_schema):
    schema, options = request_schema
    for form in (schema, branch_on_answer(schema)):
        longest = _longest(form)
        jsonschema.validate(longest, form)
        # Tight, but where a quote's pattern allows less than its maxLength (a choice of
        # runs, or only the empty quote where no run fits).
        dumped = json.dumps(form)
        if '"pattern": "^(' in dumped or '"pattern": "^$"' in dumped:
            assert len(_compact(longest)) <= worst_case_chars(form)
        else:
            assert len(_compact(longest)) == worst_case_chars(form)
        assert worst_case_chars(form) <= options.max_response_chars
        assert _parses(longest, options)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(requests(), st.data())
def test_anything_a_request_schema_allows_parses_as_a_ledger(request_schema, data):
    schema, options = request_schema
    for form in (schema, branch_on_answer(schema)):
        instance = data.draw(from_schema(form))
        jsonschema.validate(instance, form)
        assert _parses(instance, options)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(from_schema(LEDGER_JSON_SCHEMA))
def test_anything_the_general_schema_allows_parses_as_a_ledger(instance):
    assert _parses(instance, AnswerOptions(max_response_chars=131_072))


def test_the_schema_sent_is_flat_and_names_every_key():
    schema = LEDGER_JSON_SCHEMA
    text = json.dumps(schema)
    for keyword in ('"$ref"', '"$defs"', '"title"', '"description"', '"default"'):
        assert keyword not in text

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                assert node["required"] == list(node["properties"])
                assert node["additionalProperties"] is False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)


def _schema_for(mode: str, sources: list[Evidence], **options: Any) -> dict[str, Any]:
    plan = plan_answer(
        AnswerOptions(citation_mode=mode, max_context_tokens=32_768, **options),
        "q?",
        sources,
        _NeverCalled(),
    )
    assert plan.request is not None
    return plan.request.json_schema


def test_text_bounds_shrink_to_fit_the_response_limit_and_ids_never_do():
    sources = [Evidence(id=f"source-{n}", text=SENTENCE) for n in range(8)]
    roomy = _schema_for("quote", sources, max_output_tokens=8192, max_response_chars=131_072)
    tight = _schema_for("quote", sources, max_output_tokens=8192, max_response_chars=32_768)
    choices = tight["properties"]["facts"]["items"]["properties"]["citations"]["items"]["anyOf"]
    assert worst_case_chars(roomy) > 32_768 >= worst_case_chars(tight)
    assert [c["properties"]["source_id"]["enum"] for c in choices] == [[s.id] for s in sources]
    for choice in choices:
        quote = choice["properties"]["quote"]
        assert quote["maxLength"] < 1000
        # The pattern bounds the quote itself (llama.cpp ignores maxLength beside it).
        longest = _longest_quote(quote["pattern"])
        assert len(longest) <= quote["maxLength"]
        assert SENTENCE.startswith(longest)


def test_past_the_enum_cap_labels_are_strings_bounded_by_the_longest_label_sent():
    # 320 labels in all: past the cap, one citation object takes every ID sent and any label
    # up to the longest sent, and verification pairs each label with its source.
    sources = [Evidence(id=f"s{n}", text=" ".join([SENTENCE] * 5)) for n in range(64)]
    schema = _schema_for("passage", sources, max_response_chars=4_000)
    citation = schema["properties"]["facts"]["items"]["properties"]["citations"]["items"]
    assert "anyOf" not in citation
    assert citation["properties"]["source_id"]["enum"] == [source.id for source in sources]
    labels = citation["properties"]["passages"]["items"]
    assert labels == {"type": "string", "maxLength": len("s10#5")}
    assert worst_case_chars(schema) <= 4_000


def test_a_response_limit_too_small_for_any_ledger_still_gives_a_valid_schema():
    schema = _schema_for("quote", [Evidence(id="a", text=SENTENCE)], max_response_chars=1)
    longest = _longest(schema)
    jsonschema.validate(longest, schema)
    assert schema["properties"]["facts"]["maxItems"] == 1


def _nodes(schema: Any, depth: int = 0) -> list[tuple[dict[str, Any], int]]:
    """Every schema node, with its depth in nested objects."""
    found = [(schema, depth)]
    inner = depth + 1 if schema.get("type") == "object" else depth
    for sub in schema.get("properties", {}).values():
        found.extend(_nodes(sub, inner))
    for branch in schema.get("anyOf", ()):
        found.extend(_nodes(branch, depth))
    if "items" in schema:
        found.extend(_nodes(schema["items"], depth))
    return found


def _check_dialect(schema: dict[str, Any], dialect: Dialect) -> None:
    nodes = _nodes(schema)
    for node, _ in nodes:
        assert set(node) <= dialect.keywords, (dialect.name, set(node) - dialect.keywords)
        if dialect.nullable == "nullable-keyword":
            assert isinstance(node.get("type", "object"), str)
            assert node.get("type") != "null"
        if dialect.max_min_items is not None:
            assert node.get("minItems", 0) <= dialect.max_min_items
        if "properties" in node:
            assert node["required"] == list(node["properties"])
            if "additionalProperties" in dialect.keywords:
                assert node["additionalProperties"] is False
            if dialect.property_ordering:
                assert node["propertyOrdering"] == list(node["properties"])
    assert dialect.root_any_of or "anyOf" not in schema
    enums = [str(value) for node, _ in nodes for value in node.get("enum", ())]
    if dialect.max_large_enum_chars is not None:
        for node, _ in nodes:
            if len(node.get("enum", ())) > 250:
                assert sum(len(str(v)) for v in node["enum"]) <= dialect.max_large_enum_chars
    if dialect.max_unions is not None:
        unions = [
            node for node, _ in nodes if "anyOf" in node or isinstance(node.get("type"), list)
        ]
        assert len(unions) <= dialect.max_unions
    if dialect.max_enum_values is not None:
        assert len(enums) <= dialect.max_enum_values
    if dialect.max_name_chars is not None:
        names = [name for node, _ in nodes for name in node.get("properties", {})]
        assert sum(map(len, enums)) + sum(map(len, names)) <= dialect.max_name_chars
    if dialect.max_depth is not None:
        assert max(depth for _, depth in nodes) <= dialect.max_depth
    if dialect.max_properties is not None:
        assert sum(len(node.get("properties", {})) for node, _ in nodes) <= dialect.max_properties


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.data())
def test_every_dialect_gets_only_its_keywords_within_its_limits_and_still_a_ledger(
    request_schema, data
):
    schema, options = request_schema
    for dialect in DIALECTS.values():
        written = schema_in(schema, dialect)
        _check_dialect(written, dialect)
        instance = data.draw(from_schema(written), label=dialect.name)
        # Without minItems a schema allows a fact with no citation, which parsing refuses
        # (invalid_schema): such a dialect's schema guides, and verification decides.
        assert _parses(instance, options) or "minItems" not in dialect.keywords, dialect.name
    assert schema == request_schema[0]  # the request's own schema is left as it was


def test_the_full_dialect_is_the_branched_form_the_embedded_reader_is_sent():
    schema = _schema_for("passage", [Evidence(id="a", text=SENTENCE)])
    # Each patterned string without the length bounds its pattern was fitted to.
    assert schema_in(schema, "full") == _unbounded_beside_patterns(branch_on_answer(schema))
    assert schema_in(schema, "json-schema") == schema


def _unbounded_beside_patterns(node: Any) -> Any:
    if isinstance(node, list):
        return [_unbounded_beside_patterns(item) for item in node]
    if not isinstance(node, dict):
        return node
    dropped = {"minLength", "maxLength"} if "pattern" in node else set()
    return {key: _unbounded_beside_patterns(v) for key, v in node.items() if key not in dropped}


def test_a_dialect_drops_bounds_it_cannot_express_and_keeps_the_shape():
    sources = [Evidence(id="a", text=SENTENCE), Evidence(id="b", text="The ferry is late.")]
    schema = _schema_for("quote", sources, knowledge="evidence-only")
    anthropic = schema_in(schema, "anthropic")
    citation = anthropic["properties"]["facts"]["items"]["properties"]["citations"]
    assert "maxItems" not in citation
    assert citation["minItems"] == 1
    # Without their patterns the choices per source are one enum apart: one object.
    assert citation["items"]["properties"] == {
        "quote": {"type": "string"},
        "source_id": {"type": "string", "enum": ["a", "b"]},
        "stance": {"type": "string", "enum": ["supports", "contradicts"]},
    }
    assert anthropic["properties"]["answer"] == {"type": ["string", "null"]}
    gemini = schema_in(schema, "gemini")
    assert gemini["properties"]["inference"] == {"type": "string", "nullable": True}
    assert gemini["propertyOrdering"] == [
        "answerable",
        "facts",
        "answer",
        "inference",
        "missing_evidence",
    ]
    assert "additionalProperties" not in gemini
