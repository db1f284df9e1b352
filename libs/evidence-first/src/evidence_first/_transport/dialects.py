"""Schema dialects: the subset of JSON Schema each provider accepts, one table per dialect.

A strict provider answers an unsupported keyword with an HTTP 400, and the engine makes one
call, so every question would fail. :func:`schema_in` writes the request schema (built from
the ledger models, :mod:`evidence_first._schema`) in a dialect: keywords the dialect lacks
are dropped, nullable strings are spelled its way, and enums past its caps become strings.
A bound a dialect cannot express leaves the schema, never verification: the engine still
checks every citation, count and policy on whatever comes back.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from evidence_first._limits import MAX_ANSWER_CHARS

__all__ = [
    "DIALECTS",
    "Dialect",
    "DialectName",
    "branch_on_answer",
    "openai_dialect_for",
    "schema_in",
]

DialectName = Literal["full", "json-schema", "openai", "anthropic", "gemini", "gemini-json"]

_STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items"})


@dataclass(frozen=True)
class Dialect:
    """One provider family's JSON Schema subset, as documented (``source``).

    Attributes:
        name: The dialect's name.
        source: Where the subset is documented.
        keywords: The schema keywords it accepts; any other is dropped.
        root_any_of: Whether the root may be a choice (``anyOf``): then the request is sent
            as two branches, answered or abstained (:func:`branch_on_answer`).
        nullable: How a nullable string is written: a type list (``["string", "null"]``) or
            OpenAPI's ``nullable: true`` (a schema of type ``null`` alone becomes one too).
        max_min_items: The largest ``minItems`` it accepts (Anthropic: 1).
        max_enum_values: Enum values allowed across the whole schema; past it, enums are
            dropped and IDs and labels are plain strings.
        max_enum_chars: The characters allowed across all enum values.
        max_large_enum_chars: The characters allowed in one enum of more than 250 values.
        max_unions: Schemas that are a choice (``anyOf`` or a type list) allowed.
        max_depth: Nesting levels of objects allowed.
        max_properties: Object properties allowed across the schema.
        property_ordering: Whether each object lists its keys in ``propertyOrdering`` (Gemini
            orders keys alphabetically otherwise, and the ledger must cite before it answers).
    """

    name: DialectName
    source: str
    keywords: frozenset[str]
    root_any_of: bool = False
    nullable: Literal["type-list", "nullable-keyword"] = "type-list"
    max_min_items: int | None = None
    max_enum_values: int | None = None
    max_enum_chars: int | None = None
    max_large_enum_chars: int | None = None
    max_unions: int | None = None
    max_depth: int | None = None
    max_properties: int | None = None
    property_ordering: bool = False


DIALECTS: dict[DialectName, Dialect] = {
    # llama.cpp (`json_schema`, converted to a grammar: tools/server/README.md,
    # grammars/README.md "JSON Schemas → GBNF"), vLLM guided decoding (xgrammar), and Ollama
    # (`format`, converted by llama.cpp's json-schema-to-grammar): everything the ledger uses,
    # a root `anyOf` included.
    "full": Dialect(
        name="full",
        source="llama.cpp grammars/README.md; vLLM structured outputs (xgrammar); Ollama format",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems", "minLength", "maxLength"},
        root_any_of=True,
    ),
    # An OpenAI-compatible server whose subset is unknown: standard JSON Schema with every
    # bound, and an object root (a gateway may refuse a root anyOf).
    "json-schema": Dialect(
        name="json-schema",
        source="JSON Schema 2020-12, as OpenAI-compatible servers take response_format",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems", "minLength", "maxLength"},
    ),
    # OpenAI Structured Outputs, strict (platform.openai.com/docs/guides/structured-outputs,
    # "Supported schemas"): strings take only pattern and format, and fine-tuned models not
    # even those, so no string length; arrays minItems/maxItems; anyOf, not at the root;
    # every key required and additionalProperties false. Limits: 5,000 properties, 10 levels
    # of nesting, 1,000 enum values, 120,000 characters of names and enum values, and 15,000
    # characters in one enum of more than 250 values.
    "openai": Dialect(
        name="openai",
        source="platform.openai.com/docs/guides/structured-outputs#supported-schemas",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems"},
        max_enum_values=1000,
        max_enum_chars=120_000,
        max_large_enum_chars=15_000,
        max_depth=10,
        max_properties=5000,
    ),
    # Anthropic structured outputs (docs.claude.com/en/docs/build-with-claude/structured-outputs,
    # "JSON Schema limitations"): no numeric or string-length constraints, minItems 0 or 1
    # only, no maxItems, additionalProperties false on every object, no recursion; at most
    # 16 properties whose schema is a choice (anyOf or a type list). Also what OpenAI's
    # strict mode takes: the portable strict form.
    "anthropic": Dialect(
        name="anthropic",
        source="docs.claude.com/en/docs/build-with-claude/structured-outputs#json-schema-limitations",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems"},
        max_min_items=1,
        max_unions=16,
    ),
    # Gemini `response_schema` (ai.google.dev/api/caching#Schema: "a select subset of an
    # OpenAPI 3.0 schema object"): no additionalProperties, one type per schema with
    # `nullable`, `propertyOrdering` for the key order; anyOf, enum, min/maxItems and
    # min/maxLength are fields of Schema.
    "gemini": Dialect(
        name="gemini",
        source="ai.google.dev/api/caching#Schema; ai.google.dev/gemini-api/docs/structured-output",
        keywords=frozenset({"type", "properties", "required", "items", "enum", "anyOf"})
        | {"nullable", "minItems", "maxItems", "minLength", "maxLength", "propertyOrdering"},
        nullable="nullable-keyword",
        property_ordering=True,
    ),
    # Gemini `response_json_schema` (ai.google.dev/gemini-api/docs/structured-output, "JSON
    # Schema support"): type, properties, additionalProperties, required, items, enum, anyOf,
    # minItems/maxItems; keys keep the schema's order. No string length.
    "gemini-json": Dialect(
        name="gemini-json",
        source="ai.google.dev/gemini-api/docs/structured-output#json-schema-support",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems"},
    ),
}


def openai_dialect_for(base_url: object) -> DialectName:
    """The dialect of an OpenAI-compatible API root (``None``: OpenAI's own).

    OpenAI's and Azure OpenAI's strict mode is ``"openai"``; any other server (vLLM,
    llama.cpp, a gateway) is sent ``"json-schema"``.
    """
    if base_url is None or str(base_url) == "":
        return "openai"
    host = (urllib.parse.urlsplit(str(base_url)).hostname or "").lower()
    openai = host == "api.openai.com" or host.endswith(".openai.azure.com")
    return "openai" if openai else "json-schema"


def schema_in(schema: Mapping[str, Any], dialect: Dialect | DialectName) -> dict[str, Any]:
    """The request schema written in ``dialect``: a fresh copy, the request's left unchanged."""
    if isinstance(dialect, str):
        dialect = DIALECTS[dialect]
    if dialect.root_any_of:
        schema = branch_on_answer(dict(schema))
    enums = _enums(schema)
    values = [value for enum in enums for value in enum]
    keep_enums = (
        (dialect.max_enum_values is None or len(values) <= dialect.max_enum_values)
        and (dialect.max_enum_chars is None or sum(map(len, values)) <= dialect.max_enum_chars)
        and (
            dialect.max_large_enum_chars is None
            or all(
                sum(map(len, enum)) <= dialect.max_large_enum_chars
                for enum in enums
                if len(enum) > 250
            )
        )
    )
    written: dict[str, Any] = _written(schema, dialect, keep_enums)
    return written


def _written(node: Mapping[str, Any], dialect: Dialect, keep_enums: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _written(sub, dialect, keep_enums) for name, sub in value.items()}
            if dialect.property_ordering:
                out["propertyOrdering"] = list(value)
        elif key == "anyOf":
            out[key] = [_written(branch, dialect, keep_enums) for branch in value]
        elif key == "items":
            out[key] = _written(value, dialect, keep_enums)
        elif key == "enum":
            if keep_enums:
                out[key] = list(value)
        elif key == "minItems" and dialect.max_min_items is not None:
            if value <= dialect.max_min_items:
                out[key] = value
        elif key in dialect.keywords:
            out[key] = list(value) if isinstance(value, list) else value
    kinds = out.get("type")
    if dialect.nullable == "nullable-keyword" and (kinds == "null" or isinstance(kinds, list)):
        others = [kind for kind in ([kinds] if isinstance(kinds, str) else kinds) if kind != "null"]
        out["type"] = others[0] if others else "string"
        out["nullable"] = True
    return {key: out[key] for key in (*node.keys(), "nullable", "propertyOrdering") if key in out}


def _enums(node: object) -> list[list[str]]:
    found: list[list[str]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            if "enum" in item:
                found.append([str(value) for value in item["enum"]])
            stack.extend(item["properties"].values() if "properties" in item else ())
            stack.extend(item.get("anyOf", ()))
            if "items" in item:
                stack.append(item["items"])
    return found


def branch_on_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """Make "an answer xor missing evidence" structural: a choice of two ledger shapes.

    One branch answers (at least one fact, a non-empty answer, no missing evidence); the other
    abstains (a null answer and inference, at least one missing-evidence item, facts allowed).
    A grammar-constrained provider (llama.cpp) then cannot produce an ``inconsistent_output``
    ledger. Verification is unchanged: it still checks every rule on whatever comes back.
    """
    properties = schema["properties"]
    answer_chars = properties["answer"].get("maxLength", MAX_ANSWER_CHARS)
    # Facts first, as in the single-branch schema: the model cites before it answers.
    answered = {
        **schema,
        "properties": {
            "facts": {**properties["facts"], "minItems": 1},
            "answer": {"type": "string", "minLength": 1, "maxLength": answer_chars},
            "inference": properties["inference"],
            "missing_evidence": {**properties["missing_evidence"], "maxItems": 0},
        },
    }
    abstained = {
        **schema,
        "properties": {
            "facts": properties["facts"],
            "answer": {"type": "null"},
            "inference": {"type": "null"},
            "missing_evidence": {**properties["missing_evidence"], "minItems": 1},
        },
    }
    return {"anyOf": [answered, abstained]}
