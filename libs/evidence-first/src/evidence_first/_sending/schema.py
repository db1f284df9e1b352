"""The ledger's JSON schema, derived from the ledger models and narrowed for each request.

The models in :mod:`~evidence_first._shapes.ledger` and :mod:`~evidence_first._sending.citing` are
the one
declaration of the ledger's shape. Their pydantic schema is flattened into the form providers
take (no ``$ref``, ``$defs``, ``title``, ``description`` or ``default``; every key required;
a fixed key order), then a request narrows only enums and bounds: the IDs and labels sent,
how many facts and citations fit the output limit, and string lengths that keep the longest
ledger the schema allows within ``max_response_chars``. A citation style hands its part over
as a :class:`CitationShape`: the styles call this module, never the reverse.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel

from evidence_first._shapes.ledger import Ledger, LedgerCitationBase
from evidence_first._shapes.limits import (
    MAX_CITATIONS_PER_FACT,
    MAX_ENUM_VALUES,
    MAX_FACTS,
    OUTPUT_TOKENS_PER_FACT,
)
from evidence_first._shapes.vocabulary import DECISION_KEY, STANCE_KEY, ReaderDecision

if TYPE_CHECKING:
    from evidence_first._sending.options import AnswerOptions

__all__ = [
    "NULL",
    "CitationShape",
    "enum_or_string",
    "flat_schema",
    "ledger_schema",
    "narrowed",
    "stance_last",
    "without_stance",
    "worst_case_chars",
]

NULL: dict[str, Any] = {"type": "null"}
# The decision is always stated in a request: a string of the two values, never null.
_DECISION: dict[str, Any] = {"type": "string", "enum": list(get_args(ReaderDecision))}

_OUTPUT_TOKENS_PER_CITATION = 2 * OUTPUT_TOKENS_PER_FACT
_DROPPED = frozenset({"title", "description", "default", "$defs"})
_KEY_ORDER = (
    "type",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "anyOf",
)


def _flatten(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_flatten(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return _flatten({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    flat: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            flat[key] = {name: _flatten(sub, defs) for name, sub in value.items()}
        else:
            flat[key] = _flatten(value, defs)
    return _as_strict(flat)


def _as_strict(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened node as strict providers take it: nullable types, every key, keys in order."""
    branches = flat.get("anyOf")
    if branches and all(list(b) == ["type"] and isinstance(b["type"], str) for b in branches):
        # `str | None` is a type list, as strict providers spell a nullable string.
        del flat["anyOf"]
        flat["type"] = [branch["type"] for branch in branches]
    if "properties" in flat:
        # Strict providers require every key; parsing still reads an absent optional one.
        flat["required"] = list(flat["properties"])
    rank = {key: n for n, key in enumerate(_KEY_ORDER)}
    return dict(sorted(flat.items(), key=lambda item: rank.get(item[0], len(rank))))


@cache
def flat_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The flattened JSON schema of a ledger model (shared: never modify it)."""
    raw = model.model_json_schema()
    flat: dict[str, Any] = _flatten(raw, raw.get("$defs", {}))
    return flat


def narrowed(general: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema with some properties replaced, keeping the key order."""
    return {**general, "properties": {**general["properties"], **properties}}


def stance_last(general: Mapping[str, Any]) -> dict[str, Any]:
    """A citation's object schema with its ``stance`` key moved last.

    A grammar-constrained provider writes keys in schema order: the reader names a stance
    once the text it cites is written, not before.
    """
    properties = {name: sub for name, sub in general["properties"].items() if name != "stance"}
    properties["stance"] = general["properties"]["stance"]
    return {**general, "properties": properties, "required": list(properties)}


def enum_or_string(values: Sequence[str] | None) -> dict[str, Any]:
    """A string schema: an enum of ``values`` when few enough, else bounded by the longest."""
    schema: dict[str, Any] = {"type": "string"}
    if values:
        if len(values) <= MAX_ENUM_VALUES:
            schema["enum"] = list(values)
        else:
            schema["maxLength"] = max(len(value) for value in values)
    return schema


@dataclass(frozen=True)
class CitationShape:
    """What a citation style contributes to a request's schema.

    Attributes:
        model: The ledger citation the style parses.
        schema: Its request schema, narrowed to what was sent (IDs, labels).
        identifiers: The citation's keys that hold IDs or labels: their bounds are validity
            bounds, never shortened to fit ``max_response_chars``.
        output_cost: How many times the quote style's output one citation costs; the
            schema allows proportionally fewer facts and citations per output token.
        fitted: Given the citation's schema with its final string bounds, the same schema
            with its patterns agreeing with those bounds (quote mode's patterns bound a
            quote's length themselves, as llama.cpp ignores ``maxLength`` beside a pattern).
    """

    model: type[LedgerCitationBase]
    schema: dict[str, Any]
    identifiers: Collection[str]
    output_cost: int
    fitted: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def without_stance(shape: CitationShape) -> CitationShape:
    """``shape`` with no ``stance`` key: the citation of before the key.

    Each citation object's ``stance`` is last (:func:`stance_last`), so what is left is that
    object as it was before the key, in its order; the bounds fitted to
    ``max_response_chars`` are then fitted to it.
    """
    return dataclasses.replace(shape, schema=_no_stance(shape.schema))


def _no_stance(schema: Any) -> Any:
    """``schema`` with the ``stance`` key taken out of every object that has one."""
    if isinstance(schema, list):
        return [_no_stance(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {name: _no_stance(value) for name, value in schema.items()}
    properties = out.get("properties")
    if isinstance(properties, dict) and STANCE_KEY in properties:
        out["properties"] = {name: sub for name, sub in properties.items() if name != STANCE_KEY}
        out["required"] = [name for name in out.get("required", ()) if name != STANCE_KEY]
    return out


def ledger_schema(citation: CitationShape, options: AnswerOptions | None = None) -> dict[str, Any]:
    """The ledger schema for a request; without ``options``, the general form (no limits).

    Args:
        citation: The citation's part, from the citation style (``style.shape(sent)``).
        options: The request's options, three of which the schema reads. Under
            ``knowledge="evidence-only"`` the ``inference`` must be ``null``.
            ``max_output_tokens`` bounds how many facts, and citations per fact, the schema
            allows (verification still accepts up to 32 and 8). Under ``max_response_chars``
            string lengths (and, if need be, list sizes) shrink until the longest ledger the
            schema allows, written without escapes, fits.
    """
    knowledge = "allow-general-inference" if options is None else options.knowledge
    max_output_tokens = None if options is None else options.max_output_tokens
    max_response_chars = None if options is None else options.max_response_chars
    general = flat_schema(Ledger[citation.model])  # type: ignore[name-defined]
    props = general["properties"]
    facts, citations = MAX_FACTS, MAX_CITATIONS_PER_FACT
    missing: int = props["missing_evidence"]["maxItems"]
    if max_output_tokens is not None:
        tokens = max_output_tokens // citation.output_cost
        facts = max(1, min(MAX_FACTS, tokens // OUTPUT_TOKENS_PER_FACT))
        citations = max(1, min(MAX_CITATIONS_PER_FACT, tokens // _OUTPUT_TOKENS_PER_CITATION))
    fact = props["facts"]["items"]
    while True:
        schema = narrowed(
            general,
            {
                DECISION_KEY: _DECISION,
                "facts": {
                    **props["facts"],
                    "items": narrowed(
                        fact,
                        {
                            "citations": {
                                **fact["properties"]["citations"],
                                "items": citation.schema,
                                "maxItems": citations,
                            }
                        },
                    ),
                    "maxItems": facts,
                },
                "inference": NULL if knowledge == "evidence-only" else props["inference"],
                "missing_evidence": {**props["missing_evidence"], "maxItems": missing},
            },
        )
        factor = 1.0
        if max_response_chars is not None:
            shortest, longest = _worst(schema, citation.identifiers)
            if math.isfinite(longest) and longest > max_response_chars:
                if shortest > max_response_chars and (facts, citations, missing) != (1, 1, 1):
                    facts, citations = max(1, facts // 2), max(1, citations // 2)
                    missing = max(1, missing // 2)
                    continue
                room, spread = max_response_chars - shortest, longest - shortest
                factor = max(0.0, room / spread) if spread > 0 else 0.0
        scaled = _scaled(schema, factor, citation.identifiers)
        if citation.fitted is not None:
            cited = scaled["properties"]["facts"]["items"]["properties"]["citations"]
            cited["items"] = citation.fitted(cited["items"])
        return scaled


def _scaled(node: dict[str, Any], factor: float, identifiers: Collection[str]) -> dict[str, Any]:
    """A fresh copy whose every text ``maxLength`` L becomes ``1 + floor((L - 1) * factor)``.

    Properties named in ``identifiers`` (source IDs, passage labels) keep their bounds.
    """
    copy: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            copy[key] = {
                name: _scaled(sub, 1.0 if name in identifiers else factor, identifiers)
                for name, sub in value.items()
            }
        elif isinstance(value, dict):
            copy[key] = _scaled(value, factor, identifiers)
        elif isinstance(value, list):
            copy[key] = [
                _scaled(item, factor, identifiers) if isinstance(item, dict) else item
                for item in value
            ]
        else:
            copy[key] = value
    if factor < 1.0 and "maxLength" in copy:
        copy["maxLength"] = 1 + math.floor((copy["maxLength"] - 1) * factor)
    return copy


def worst_case_chars(schema: Mapping[str, Any]) -> float:
    r"""The length of the longest compact JSON text ``schema`` allows, strings unescaped.

    ``inf`` when a string or array is unbounded. Escape sequences (``\"``, ``\u0001``) can
    lengthen a text up to six times per character; they are not counted.
    """
    return _worst(schema, ())[1]


def _worst(
    schema: Mapping[str, Any], identifiers: Collection[str], fixed: bool = False
) -> tuple[float, float]:
    """The longest text with every text string at length 1, and at its ``maxLength``.

    Strings under ``identifiers`` (or with ``fixed``) count at their ``maxLength`` in both.
    """
    branches = schema.get("anyOf")
    if branches is not None:
        return _widest([_worst(branch, identifiers, fixed) for branch in branches])
    values = schema.get("enum")
    if values is not None:
        longest = max(map(_printed, values))
        return longest, longest
    kinds = schema.get("type")
    if not isinstance(kinds, list):
        return _worst_of(schema, kinds, identifiers, fixed)
    return _widest([_worst_of(schema, kind, identifiers, fixed) for kind in kinds])


def _widest(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return max(pair[0] for pair in pairs), max(pair[1] for pair in pairs)


def _worst_of(
    schema: Mapping[str, Any], kind: object, identifiers: Collection[str], fixed: bool
) -> tuple[float, float]:
    if kind in ("null", "boolean"):
        return (4, 4) if kind == "null" else (5, 5)
    if kind == "integer":
        # The longest a bounded integer prints; otherwise a 64-bit one's (sign and 19 digits).
        ends = [schema[key] for key in ("minimum", "maximum") if key in schema]
        width = max((len(str(end)) for end in ends), default=20) if len(ends) == 2 else 20
        return width, width
    if kind == "string":
        bound = schema.get("maxLength")
        if bound is None:
            return math.inf, math.inf
        return 2 + (bound if fixed else min(bound, 1)), 2 + bound
    if kind == "array":
        return _worst_array(schema, identifiers, fixed)
    if kind == "object":
        return _worst_object(schema, identifiers, fixed)
    return math.inf, math.inf


def _worst_array(
    schema: Mapping[str, Any], identifiers: Collection[str], fixed: bool
) -> tuple[float, float]:
    count = schema.get("maxItems", math.inf)
    if count == 0:
        return 2, 2
    short, long = _worst(schema["items"], identifiers, fixed)
    return 1 + count * (short + 1), 1 + count * (long + 1)


def _worst_object(
    schema: Mapping[str, Any], identifiers: Collection[str], fixed: bool
) -> tuple[float, float]:
    short = long = 1.0 + max(1, len(schema["properties"]))
    for name, sub in schema["properties"].items():
        key = _printed(name) + 1
        sub_short, sub_long = _worst(sub, identifiers, fixed or name in identifiers)
        short, long = short + key + sub_short, long + key + sub_long
    return short, long


def _printed(value: object) -> int:
    """The length of ``value`` as compact JSON, without ASCII escapes."""
    if isinstance(value, str):
        return len(encode_basestring(value))
    return len(str(value)) if isinstance(value, int) else len(repr(value))
