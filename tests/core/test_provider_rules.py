"""Every dialect's requests against its provider's documented rules, written out here.

The rules below are read from each provider's own documentation (each names its source), not
from the dialect table, so a table that drifts from the documentation fails here. Requests are
generated across citation modes, knowledge policies, 1 to 64 sources (with passage labels past
the enum cap) and output limits, and written in each dialect as the transport sends them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest

from evidence_first import Evidence, InvalidRequestError, answer_from_evidence
from evidence_first._engine.plan import plan_answer
from evidence_first._models.dialects import DIALECTS
from evidence_first._models.profiles import profile_for_name
from evidence_first._models.writing import schema_in
from evidence_first.adapters import AnswerOptions
from evidence_first.chat_completions import ChatCompletionsModel

SENTENCE = "The survey of the northern valley ended on the third day."
Rule = Callable[[dict[str, Any]], None]


class _NeverCalled:
    def generate(self, request: Any) -> str:
        raise AssertionError


def _requests() -> Iterator[tuple[str, dict[str, Any]]]:
    """Request schemas across modes, policies, source counts and output limits."""
    for mode, knowledge, count, limit in itertools.product(
        ("quote", "passage"),
        ("evidence-only", "allow-general-inference"),
        (1, 2, 8, 40, 64),
        (64, 512, 8192),
    ):
        # Five sentences each: 64 sources send 320 passage labels, past the enum cap.
        sources = [
            Evidence(id=f"source-{n:02d}", text=" ".join([SENTENCE] * 5)) for n in range(count)
        ]
        options = AnswerOptions(
            citation_mode=mode,
            knowledge=knowledge,
            max_context_tokens=32_768,
            max_output_tokens=limit,
        )
        plan = plan_answer(options, "What ended on the third day?", sources, _NeverCalled())
        assert plan.request is not None
        yield f"{mode}-{knowledge}-{count}-{limit}", plan.request.json_schema


REQUESTS = list(_requests())


def _nodes(schema: Any, depth: int = 1) -> Iterator[tuple[dict[str, Any], int]]:
    """Every schema node and its nesting level (objects count; the root object is level 1)."""
    yield schema, depth
    inner = depth + 1
    for sub in schema.get("properties", {}).values():
        yield from _nodes(sub, inner)
    for branch in schema.get("anyOf", ()):
        yield from _nodes(branch, depth)
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], depth)


def _objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for node, _ in _nodes(schema) if "properties" in node]


# OpenAI Structured Outputs, strict mode:
# developers.openai.com/api/docs/guides/structured-outputs#supported-schemas

# "Supported types: String, Number, Boolean, Integer, Object, Array, Enum, anyOf"; string
# properties "pattern", "format"; number properties "multipleOf", "maximum",
# "exclusiveMaximum", "minimum", "exclusiveMinimum"; array properties "minItems", "maxItems";
# definitions through "$defs" and "$ref"; "const" is counted in the size limit.
OPENAI_KEYWORDS = {
    *("type", "properties", "required", "additionalProperties", "items", "enum", "const"),
    *("anyOf", "$defs", "$ref", "description", "title", "pattern", "format"),
    *("multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"),
    *("minItems", "maxItems"),
}
# "For fine-tuned models, we additionally do not support the following": strings "minLength",
# "maxLength", "pattern", "format"; numbers "minimum", "maximum", "multipleOf"; objects
# "patternProperties"; arrays "minItems", "maxItems".
FINE_TUNED_UNSUPPORTED = {
    *("minLength", "maxLength", "pattern", "format", "minimum", "maximum", "multipleOf"),
    *("patternProperties", "minItems", "maxItems"),
}


def openai_strict(schema: dict[str, Any]) -> None:
    nodes = list(_nodes(schema))
    # "the root level object of a schema must be an object, and not use anyOf"
    assert schema.get("type") == "object"
    assert "anyOf" not in schema
    for node, _ in nodes:
        assert set(node) <= OPENAI_KEYWORDS, set(node) - OPENAI_KEYWORDS
    for node in _objects(schema):
        # "additionalProperties: false must always be set in objects"
        assert node["additionalProperties"] is False
        # "all fields must be required"
        assert set(node["required"]) == set(node["properties"])
    # "A schema may have up to 5000 object properties total, with up to 10 levels of nesting."
    assert sum(len(node.get("properties", ())) for node, _ in nodes) <= 5000
    assert max(depth for node, depth in nodes if "properties" in node) <= 10
    enums = [node["enum"] for node, _ in nodes if "enum" in node]
    # "up to 1000 enum values across all enum properties"
    assert sum(map(len, enums)) <= 1000
    # "the total string length of all property names, definition names, enum values, and const
    # values cannot exceed 120,000 characters"
    names = sum(len(name) for node in _objects(schema) for name in node["properties"])
    assert names + sum(len(str(v)) for enum in enums for v in enum) <= 120_000
    # "For a single enum property with string values, the total string length of all enum
    # values cannot exceed 15,000 characters when there are more than 250 enum values."
    assert all(sum(len(str(v)) for v in enum) <= 15_000 for enum in enums if len(enum) > 250)
    # "Objects provided via 'anyOf' must not share identical first keys" (the API's 400,
    # openai/openai-python#2193). No document says whether differing first-key schemas pass,
    # so no choice of objects starting with the same key is sent at all.
    for node, _ in nodes:
        branches = [b for b in node.get("anyOf", ()) if "properties" in b]
        firsts = [next(iter(b["properties"])) for b in branches]
        assert len(firsts) == len(set(firsts)), firsts


# Azure OpenAI structured outputs (learn.microsoft.com/azure/ai-foundry/openai/how-to/
# structured-outputs, "JSON Schema support and limitations"): "Azure OpenAI structured outputs
# support the same subset of the JSON Schema as OpenAI" as first published: its unsupported
# type-specific keywords are, for strings, "minLength, maxLength, pattern, format"; for
# arrays, "unevaluatedItems, contains, minContains, maxContains, minItems, maxItems,
# uniqueItems". "A schema may have up to 100 object properties total, with up to five levels
# of nesting"; "A schema may have up to 500 enum values across all enum properties"; "the
# total string length of all property names, definition names, enum values, and const values
# cannot exceed 15,000 characters"; "for a single enum property with string values, the total
# string length of all enum values cannot exceed 7,500 characters when there are more than 250
# enum values".
AZURE_UNSUPPORTED = {"minLength", "maxLength", "pattern", "format", "minItems", "maxItems"}


def azure_openai(schema: dict[str, Any]) -> None:
    nodes = list(_nodes(schema))
    assert schema.get("type") == "object"
    assert "anyOf" not in schema
    for node, _ in nodes:
        assert set(node) <= OPENAI_KEYWORDS - AZURE_UNSUPPORTED, set(node) & AZURE_UNSUPPORTED
    for node in _objects(schema):
        assert node["additionalProperties"] is False
        assert set(node["required"]) == set(node["properties"])
    assert sum(len(node.get("properties", ())) for node, _ in nodes) <= 100
    assert max(depth for node, depth in nodes if "properties" in node) <= 5
    enums = [node["enum"] for node, _ in nodes if "enum" in node]
    assert sum(map(len, enums)) <= 500
    names = sum(len(name) for node in _objects(schema) for name in node["properties"])
    assert names + sum(len(str(v)) for enum in enums for v in enum) <= 15_000
    assert all(sum(len(str(v)) for v in enum) <= 7_500 for enum in enums if len(enum) > 250)


def openai_fine_tuned(schema: dict[str, Any]) -> None:
    openai_strict(schema)
    for node, _ in _nodes(schema):
        assert not set(node) & FINE_TUNED_UNSUPPORTED, set(node) & FINE_TUNED_UNSUPPORTED


# Anthropic structured outputs:
# docs.claude.com/en/docs/build-with-claude/structured-outputs#json-schema-limitations
# "Numerical constraints (minimum, maximum, multipleOf...)" and "String constraints
# (minLength, maxLength)" are not supported; for arrays only "minItems values of 0 and 1";
# "additionalProperties must be set to false for objects"; at most 16 parameters whose type is
# a union (anyOf or a list of types).
ANTHROPIC_UNSUPPORTED = {"minimum", "maximum", "multipleOf", "minLength", "maxLength", "maxItems"}


def anthropic(schema: dict[str, Any]) -> None:
    nodes = list(_nodes(schema))
    for node, _ in nodes:
        assert not set(node) & ANTHROPIC_UNSUPPORTED
        assert node.get("minItems", 0) in (0, 1)
    for node in _objects(schema):
        assert node["additionalProperties"] is False
    assert sum("anyOf" in node or isinstance(node.get("type"), list) for node, _ in nodes) <= 16


# Gemini `response_schema`, "a select subset of an OpenAPI 3.0 schema object"
# (ai.google.dev/api/caching#Schema): its fields are type, format, title, description,
# nullable, enum, maxItems, minItems, properties, required, minProperties, maxProperties,
# minLength, maxLength, pattern, example, anyOf, propertyOrdering, default, items, minimum,
# maximum; `type` is one value, and null is written `nullable: true`.
GEMINI_FIELDS = {
    *("type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems"),
    *("properties", "required", "minProperties", "maxProperties", "minLength", "maxLength"),
    *("pattern", "example", "anyOf", "propertyOrdering", "default", "items"),
    *("minimum", "maximum"),
}


def gemini_response_schema(schema: dict[str, Any]) -> None:
    for node, _ in _nodes(schema):
        assert set(node) <= GEMINI_FIELDS, set(node) - GEMINI_FIELDS
        assert isinstance(node.get("type", "object"), str)
        assert node.get("type") != "null"
    _keeps_key_order(schema)


# Gemini `response_json_schema` (ai.google.dev/gemini-api/docs/structured-output#json-schema-
# support): "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description",
# "enum", "items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf",
# "oneOf", "properties", "additionalProperties", "required"; and "The non-standard
# `propertyOrdering` property may also be set" (googleapis/python-genai,
# GenerateContentConfig.response_json_schema).
GEMINI_JSON_KEYWORDS = {
    *("$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum"),
    *("items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf"),
    *("properties", "additionalProperties", "required", "propertyOrdering"),
}


def gemini_json_schema(schema: dict[str, Any]) -> None:
    for node, _ in _nodes(schema):
        assert set(node) <= GEMINI_JSON_KEYWORDS, set(node) - GEMINI_JSON_KEYWORDS
    _keeps_key_order(schema)


def _keeps_key_order(schema: dict[str, Any]) -> None:
    # "Gemini 2.0 requires an explicit propertyOrdering list within the JSON input to define
    # the preferred structure" (structured-output, "Model support"): facts come before the
    # answer only if every object lists its keys.
    for node in _objects(schema):
        assert node.get("propertyOrdering") == list(node["properties"])


# llama.cpp (grammars/README.md, "JSON Schemas → GBNF"), vLLM and any OpenAI-compatible
# server: standard JSON Schema (2020-12). Only llama.cpp-family servers get a root choice.
def json_schema(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "anyOf" not in schema


def llama_cpp(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    # vLLM counts "a string mixing a generative constraint (pattern or format) with" minLength
    # or maxLength among what xgrammar does not support (vllm/v1/structured_output/
    # backend_xgrammar.py): it falls back, or answers 400 when xgrammar is forced.
    for node, _ in _nodes(schema):
        assert not ("pattern" in node and {"minLength", "maxLength"} & set(node)), node


# llama.cpp built with LLGuidance takes the same schema, sent as a grammar (below).
RULES: dict[str, Rule] = {
    "full": llama_cpp,
    "llguidance": llama_cpp,
    "json-schema": json_schema,
    "openai": openai_strict,
    "openai-fine-tuned": openai_fine_tuned,
    "azure-openai": azure_openai,
    "anthropic": anthropic,
    "gemini": gemini_response_schema,
    "gemini-json": gemini_json_schema,
}


def test_every_dialect_has_its_provider_rules():
    assert set(RULES) == set(DIALECTS)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_request_keeps_its_provider_rules(dialect):
    for name, schema in REQUESTS:
        written = schema_in(schema, dialect)  # type: ignore[arg-type]
        try:
            RULES[dialect](written)
        except AssertionError as error:
            raise AssertionError(f"{dialect} / {name}: {error}") from error


def test_the_requests_reach_past_the_enum_cap():
    passage_64 = dict(REQUESTS)["passage-evidence-only-64-8192"]
    citation = passage_64["properties"]["facts"]["items"]["properties"]["citations"]["items"]
    assert "enum" not in citation["properties"]["passages"]["items"]


# Every limit a dialect declares is applied, never only declared: pushed past its value, an
# enum limit drops the enums (IDs and labels become bounded strings), and any other refuses the
# schema before anything is sent.

SOURCES = [Evidence(id=f"source-{n}", text=" ".join([SENTENCE] * 3)) for n in range(4)]


def _passage_schema() -> dict[str, Any]:
    plan = plan_answer(AnswerOptions(citation_mode="passage"), "q?", SOURCES, _NeverCalled())
    assert plan.request is not None
    return plan.request.json_schema


def _enum_values(schema: dict[str, Any]) -> int:
    return sum(len(node.get("enum", ())) for node, _ in _nodes(schema))


@pytest.mark.parametrize(("limit", "value"), [("max_enum_values", 15), ("max_name_chars", 250)])
def test_past_an_enum_limit_the_enums_are_dropped(limit, value):
    schema = _passage_schema()
    # The decision's 2 values, 4 IDs, 12 labels and each of the 4 choices' 2 stances.
    assert _enum_values(schema_in(schema, "json-schema")) == 26
    tight = dataclasses.replace(DIALECTS["json-schema"], **{limit: value})
    # The decision's own two stay, and the stance's, in the one citation object left.
    assert _enum_values(schema_in(schema, tight)) == 4


def test_past_the_minitems_limit_the_bound_is_dropped():
    schema = _passage_schema()
    assert any("minItems" in node for node, _ in _nodes(schema_in(schema, "json-schema")))
    tight = dataclasses.replace(DIALECTS["json-schema"], max_min_items=0)
    assert not any("minItems" in node for node, _ in _nodes(schema_in(schema, tight)))


def test_past_the_large_enum_limit_the_enums_are_dropped():
    # OpenAI's limit applies to one enum of more than 250 values.
    values = [f"label-{n}" for n in range(251)]
    schema = {
        "type": "object",
        "properties": {"label": {"type": "string", "enum": values}},
        "required": ["label"],
        "additionalProperties": False,
    }
    tight = dataclasses.replace(DIALECTS["json-schema"], max_large_enum_chars=len("".join(values)))
    assert _enum_values(schema_in(schema, tight)) == 251
    tighter = dataclasses.replace(tight, max_large_enum_chars=len("".join(values)) - 1)
    assert _enum_values(schema_in(schema, tighter)) == 0


@pytest.mark.parametrize(
    ("limit", "value", "words"),
    [
        ("max_unions", 1, r"choices \(anyOf or a type list\)"),
        ("max_depth", 2, "levels of nested objects"),
        ("max_properties", 10, "object properties"),
        ("max_name_chars", 20, "characters of property names"),
    ],
)
def test_past_any_other_limit_the_schema_is_refused_naming_it(limit, value, words):
    tight = dataclasses.replace(DIALECTS["json-schema"], **{limit: value})
    with pytest.raises(
        InvalidRequestError, match=f"{words}, past the json-schema dialect's {limit} of {value}"
    ):
        schema_in(_passage_schema(), tight)


def test_a_model_declaring_its_dialect_is_refused_before_the_call(monkeypatch):
    monkeypatch.setitem(DIALECTS, "openai", dataclasses.replace(DIALECTS["openai"], max_depth=2))

    class Declared(_NeverCalled):
        dialect = "openai"

    with pytest.raises(InvalidRequestError, match="max_depth") as raised:
        answer_from_evidence("q?", SOURCES, Declared())  # _NeverCalled fails if called
    assert raised.value.field == "json_schema"


def test_a_model_declaring_no_known_dialect_is_not_checked():
    class Elsewhere:
        dialect = "a dialect of its own"

        def generate(self, request: Any) -> str:
            return "{}"

    assert answer_from_evidence("q?", SOURCES, Elsewhere()).status == "invalid_response"


@pytest.mark.parametrize(
    ("base_url", "model", "dialect"),
    [
        (None, "gpt-4.1-mini", "openai"),
        (
            "https://api.openai.com/v1",
            "ft:gpt-4.1-mini-2025-04-14:acme::B1a2c3",
            "openai-fine-tuned",
        ),
        ("https://res.openai.azure.com/openai/v1", "ft:gpt-4.1-mini:acme::x", "azure-openai"),
        ("https://res.openai.azure.com/openai/v1", "gpt-4.1-mini", "azure-openai"),
        ("http://127.0.0.1:8080/v1", "ft:anything", "json-schema"),
        ("http://127.0.0.1:8080/v1", "qwen2.5-coder-1.5b", "full"),
        ("http://127.0.0.1:8080/v1", "gemma-3-270m", "llguidance"),
    ],
)
def test_the_dialect_of_an_openai_compatible_endpoint(base_url, model, dialect):
    chat = ChatCompletionsModel(base_url or "https://api.openai.com/v1", model=model)
    assert chat.dialect == dialect


def test_an_unknown_dialect_is_refused_when_the_client_is_built():
    with pytest.raises(InvalidRequestError, match="dialect must be one of") as raised:
        ChatCompletionsModel("http://127.0.0.1:8080/v1", dialect="gemini-2")  # type: ignore[arg-type]
    assert raised.value.field == "dialect"


# Amazon Bedrock's cross-Region inference profiles: "Cross-Region (system-defined) inference
# profiles are named after the model that they support and defined by the Regions that they
# support" (docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html), an
# ID being the model's behind its geography, "{geoRegion}.{modelId}"; the geographies are
# GLOBAL ("global"), EU, US, US_GOV ("Cross-region Inference Identifier for the US GovCloud
# area", "us-gov"), APAC, JP and AU (docs.aws.amazon.com/cdk/api/v2/docs/
# @aws-cdk_aws-bedrock-alpha.CrossRegionInferenceProfileRegion.html). A profile ID is the same
# model as its bare ID, so it refuses what that model refuses: Claude Opus 4.7 any temperature.
BEDROCK_GEOGRAPHIES = ("global", "eu", "us", "us-gov", "apac", "jp", "au")


@pytest.mark.parametrize("family", [None, "openai-compatible"])
@pytest.mark.parametrize("geography", BEDROCK_GEOGRAPHIES)
@pytest.mark.parametrize(
    "model",
    ["anthropic.claude-opus-4-7-20260416-v1:0", "anthropic.claude-sonnet-4-5-20250929-v1:0"],
)
def test_a_bedrock_inference_profile_is_its_models_profile_in_every_geography(
    model, geography, family
):
    bare = profile_for_name(model, family)
    assert bare.name in ("claude-no-sampling", "claude-sampling")
    assert profile_for_name(f"{geography}.{model}", family) == bare


def test_a_govcloud_claude_opus_4_7_is_sent_no_temperature():
    profile = profile_for_name("us-gov.anthropic.claude-opus-4-7-20260416-v1:0", None)
    assert profile.temperature is False
