"""Schema dialects: the subset of JSON Schema each provider accepts, one table per dialect.

A strict provider answers an unsupported keyword with an HTTP 400, and the engine makes one
call, so every question would fail. Each :class:`Dialect` row names the documentation it is
based on; :mod:`evidence_first._models.writing` writes the request schema in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DIALECTS", "Dialect", "DialectName"]

DialectName = Literal[
    "full",
    "llguidance",
    "json-schema",
    "openai",
    "openai-fine-tuned",
    "azure-openai",
    "anthropic",
    "gemini",
    "gemini-json",
]

_STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items"})

# What a grammar-building server reads: everything the ledger uses.
_GRAMMAR = _STRUCTURE | {
    "enum",
    "anyOf",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
}


@dataclass(frozen=True)
class Dialect:
    """One provider family's JSON Schema subset, as documented (``source``).

    Attributes:
        name: The dialect's name.
        source: Where the subset is documented.
        keywords: The schema keywords it accepts; any other is dropped.
        root_any_of: Whether the root may be a choice (``anyOf``): then the request is sent
            as answered shapes, one per fact count, and an abstained one
            (``writing.branch_on_answer``).
        nullable: How a nullable string is written: a type list (``["string", "null"]``) or
            OpenAPI's ``nullable: true`` (a schema of type ``null`` alone becomes one too).
        max_min_items: The largest ``minItems`` it accepts (Anthropic: 1).
        max_enum_values: Enum values allowed across the whole schema; past it, enums are
            dropped and IDs and labels are plain strings.
        max_name_chars: The characters allowed across every property name and enum value
            (OpenAI's count, which also counts definition names and consts: the ledger has
            none); past it, enums are dropped, and names alone past it are refused.
        max_large_enum_chars: The characters allowed in one enum of more than 250 values.
        max_unions: Schemas that are a choice (``anyOf`` or a type list) allowed.
        max_depth: Nesting levels of objects allowed.
        max_properties: Object properties allowed across the schema.
        property_ordering: Whether each object lists its keys in ``propertyOrdering`` (Gemini
            2.0 orders keys alphabetically otherwise, and the ledger must cite before it answers).
        object_unions: Whether a choice among objects that begin with the same key may be
            sent. Without, such a choice (passage mode's one branch per source) is sent as one
            object whose enums hold every branch's values: a label under another source's ID
            is then refused by verification (``passage_source_mismatch``), not by the schema.
        compact: Whether the schema is sent as an LLGuidance grammar for compact JSON, in
            llama.cpp's ``grammar`` field (``strict.llguidance_grammar``), not as a
            ``response_format``: a model free to lay its reply out writes a newline and an
            indent before most keys, each a token it writes and nobody reads.
    """

    name: DialectName
    source: str
    keywords: frozenset[str]
    root_any_of: bool = False
    nullable: Literal["type-list", "nullable-keyword"] = "type-list"
    max_min_items: int | None = None
    max_enum_values: int | None = None
    max_name_chars: int | None = None
    max_large_enum_chars: int | None = None
    max_unions: int | None = None
    max_depth: int | None = None
    max_properties: int | None = None
    property_ordering: bool = False
    object_unions: bool = True
    compact: bool = False

    @property
    def reads_patterns(self) -> bool:
        """Whether it reads a string's ``pattern`` (a style may then pattern its quotes)."""
        return "pattern" in self.keywords


DIALECTS: dict[DialectName, Dialect] = {
    # llama.cpp (`json_schema`, converted to a grammar: tools/server/README.md,
    # grammars/README.md "JSON Schemas → GBNF"), vLLM guided decoding (xgrammar), and Ollama
    # (`format`, converted by llama.cpp's json-schema-to-grammar): everything the ledger uses,
    # a root `anyOf` included. A string with a `pattern` carries no length bound besides
    # (writing.py): llama.cpp ignores one there, and vLLM counts "a string mixing a generative
    # constraint (pattern or format) with" length bounds among the features xgrammar does not
    # support (vllm/v1/structured_output/backend_xgrammar.py, has_xgrammar_unsupported_json_
    # features): it falls back to another backend, or answers 400 when xgrammar is forced.
    "full": Dialect(
        name="full",
        source="llama.cpp grammars/README.md; vLLM structured outputs (xgrammar); Ollama format",
        keywords=_GRAMMAR,
        root_any_of=True,
    ),
    # llama.cpp built with LLGuidance, as the embedded models' server (xllamacpp) is: "grammars
    # starting with %llguidance are passed to LLGuidance" (llama.cpp docs/llguidance.md), and
    # /v1/chat/completions takes /completion's `grammar` (tools/server/README.md). The full
    # dialect, sent as that grammar: a JSON schema whose top-level "x-guidance" asks for
    # compact JSON (github.com/guidance-ai/llguidance docs/json_schema.md; the server's own
    # `response_format` conversion ignores it). A llama.cpp built without LLGuidance refuses
    # the grammar: give such a server the full dialect.
    "llguidance": Dialect(
        name="llguidance",
        source="llama.cpp docs/llguidance.md; guidance-ai/llguidance docs/json_schema.md",
        keywords=_GRAMMAR,
        root_any_of=True,
        compact=True,
    ),
    # An OpenAI-compatible server whose subset is unknown: standard JSON Schema with every
    # bound, and an object root (a gateway may refuse a root anyOf).
    "json-schema": Dialect(
        name="json-schema",
        source="JSON Schema 2020-12, as OpenAI-compatible servers take response_format",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems", "minLength", "maxLength"},
    ),
    # OpenAI Structured Outputs, strict (developers.openai.com/api/docs/guides/structured-outputs
    # #supported-schemas): strings take only pattern and format, so no string length; arrays
    # minItems/maxItems; anyOf, "the root level object ... must not use anyOf"; every key
    # required and additionalProperties false. Limits: "up to 5000 object properties total,
    # with up to 10 levels of nesting"; "up to 1000 enum values across all enum properties";
    # "total string length of all property names, definition names, enum values, and const
    # values cannot exceed 120,000 characters"; "the total string length of all enum values
    # cannot exceed 15,000 characters when there are more than 250 enum values". A choice of
    # objects sharing their first key was refused in strict mode ("Objects provided via
    # 'anyOf' must not share identical first keys", openai/openai-python#2193), and no OpenAI
    # document says whether a first key with a different enum per branch passes: such a
    # choice is sent as one object.
    "openai": Dialect(
        name="openai",
        source="developers.openai.com/api/docs/guides/structured-outputs#supported-schemas",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems"},
        max_enum_values=1000,
        max_name_chars=120_000,
        max_large_enum_chars=15_000,
        max_depth=10,
        max_properties=5000,
        object_unions=False,
    ),
    # Fine-tuned OpenAI models (``ft:...``), the same guide: "For fine-tuned models, we
    # additionally do not support the following": minLength, maxLength, pattern, format,
    # minimum, maximum, multipleOf, patternProperties, minItems, maxItems. The sizes stay
    # bounded by max_response_chars and verification, as for every dialect without bounds.
    "openai-fine-tuned": Dialect(
        name="openai-fine-tuned",
        source="developers.openai.com/api/docs/guides/structured-outputs#supported-schemas",
        keywords=_STRUCTURE | {"enum", "anyOf"},
        max_enum_values=1000,
        max_name_chars=120_000,
        max_large_enum_chars=15_000,
        max_depth=10,
        max_properties=5000,
        object_unions=False,
    ),
    # Azure OpenAI structured outputs (learn.microsoft.com/azure/ai-foundry/openai/how-to/
    # structured-outputs, "JSON Schema support and limitations"): OpenAI's subset as it was
    # first published, so no string lengths and no minItems or maxItems (listed as unsupported
    # keywords for arrays); "A schema may have up to 100 object properties total, with up to
    # five levels of nesting"; at most 500 enum values, 15,000 characters of property names,
    # definition names, enum values and consts, and 7,500 characters in an enum of more than
    # 250 values. An Azure deployment's name says nothing of its model, so its fine-tunes take
    # this dialect too.
    "azure-openai": Dialect(
        name="azure-openai",
        source="learn.microsoft.com/azure/ai-foundry/openai/how-to/structured-outputs",
        keywords=_STRUCTURE | {"enum", "anyOf"},
        max_enum_values=500,
        max_name_chars=15_000,
        max_large_enum_chars=7_500,
        max_depth=5,
        max_properties=100,
        object_unions=False,
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
    # minItems/maxItems; no string length. Gemini 2.5 and later keep the schema's key order;
    # "Gemini 2.0 requires an explicit propertyOrdering list" (the same page), which
    # `response_json_schema` takes: "The non-standard `propertyOrdering` property may also be
    # set" (googleapis/python-genai, `GenerateContentConfig.response_json_schema`).
    "gemini-json": Dialect(
        name="gemini-json",
        source="ai.google.dev/gemini-api/docs/structured-output#json-schema-support",
        keywords=_STRUCTURE | {"enum", "anyOf", "minItems", "maxItems", "propertyOrdering"},
        property_ordering=True,
    ),
}
