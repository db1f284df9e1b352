"""The request schema written in a dialect (:mod:`~evidence_first._models.dialects`).

:func:`schema_in` writes the request schema (built from the ledger models,
:mod:`evidence_first._sending.schema`) in a dialect: keywords the dialect lacks are dropped,
nullable
strings are spelled its way, a choice it does not take becomes one object, and enums past its
caps become strings. A bound a dialect cannot express leaves the schema, never verification:
the engine still checks every citation, count and policy on whatever comes back.

A dialect's documented limits (nesting, properties, choices, enum sizes) are applied, never
only declared: past an enum limit the enums are dropped; past any other, :func:`schema_in`
raises :class:`~evidence_first.InvalidRequestError` naming the limit. The engine runs it when
it plans a request for a model that declares its dialect, so such a schema is never sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evidence_first._models.dialects import DIALECTS, Dialect, DialectName
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.limits import MAX_ANSWER_CHARS, MAX_FACTS, OUTPUT_TOKENS_PER_FACT
from evidence_first._shapes.markers import answer_pattern, pattern_chars
from evidence_first._shapes.vocabulary import DECISION_KEY, STANCE_KEY

__all__ = ["branch_on_answer", "schema_in"]

# The answered shapes: one per fact count up to this many, then one for more.
_SPLIT_FACTS = 4
# At most this many claims in an answer, and at least this much room for each.
_MAX_CLAIMS = 3
_LEAST_CLAIM_ROOM = 24


def schema_in(schema: Mapping[str, Any], dialect: Dialect | DialectName) -> dict[str, Any]:
    """The request schema written in ``dialect``: a fresh copy, the request's left unchanged.

    Raises:
        InvalidRequestError: The schema would exceed one of the dialect's limits that dropping
            enums cannot bring it under; the message names the limit.
    """
    if isinstance(dialect, str):
        dialect = DIALECTS[dialect]
    if dialect.root_any_of:
        schema = branch_on_answer(dict(schema))
    written = _written(schema, dialect, keep_enums=True)
    if not _enums_fit(written, dialect):
        written = _written(schema, dialect, keep_enums=False)
    _check_limits(written, dialect)
    return written


def _enums_fit(schema: Mapping[str, Any], dialect: Dialect) -> bool:
    enums = [node["enum"] for node, _ in _nodes(schema) if "enum" in node]
    values = [str(value) for enum in enums for value in enum]
    large = dialect.max_large_enum_chars
    return (
        (dialect.max_enum_values is None or len(values) <= dialect.max_enum_values)
        and (
            dialect.max_name_chars is None
            or _name_chars(schema) + sum(map(len, values)) <= dialect.max_name_chars
        )
        and (
            large is None
            or all(sum(len(str(v)) for v in e) <= large for e in enums if len(e) > 250)
        )
    )


def _check_limits(schema: Mapping[str, Any], dialect: Dialect) -> None:
    """Refuse a written schema past a limit of ``dialect`` (enums already fit or were dropped)."""
    nodes = _nodes(schema)
    unions = sum("anyOf" in node or isinstance(node.get("type"), list) for node, _ in nodes)
    counts = {
        "max_unions": (unions, "choices (anyOf or a type list)"),
        "max_depth": (max(depth for _, depth in nodes), "levels of nested objects"),
        "max_properties": (
            sum(len(node.get("properties", ())) for node, _ in nodes),
            "object properties",
        ),
        "max_name_chars": (_name_chars(schema), "characters of property names"),
    }
    for limit, (count, what) in counts.items():
        allowed = getattr(dialect, limit)
        if allowed is not None and count > allowed:
            msg = (
                f"the request schema has {count} {what}, past the {dialect.name} dialect's "
                f"{limit} of {allowed}; it would be refused, so it is not sent"
            )
            raise InvalidRequestError(msg, field="json_schema")


def _nodes(schema: Mapping[str, Any], depth: int = 0) -> list[tuple[Mapping[str, Any], int]]:
    """Every schema node of ``schema``, with its depth in nested objects (the root's is 1)."""
    found: list[tuple[Mapping[str, Any], int]] = []
    stack: list[tuple[Mapping[str, Any], int]] = [(schema, depth)]
    while stack:
        node, level = stack.pop()
        level += node.get("type") == "object" or "properties" in node
        found.append((node, level))
        stack.extend((sub, level) for sub in node.get("properties", {}).values())
        stack.extend((branch, level) for branch in node.get("anyOf", ()))
        if isinstance(node.get("items"), Mapping):
            stack.append((node["items"], level))
    return found


def _name_chars(schema: Mapping[str, Any]) -> int:
    return sum(len(name) for node, _ in _nodes(schema) for name in node.get("properties", ()))


def _merged(branches: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One schema for a choice whose branches differ only in their enums, or ``None``.

    The enums are joined, in order: the one schema allows every branch's values, so it allows
    what the choice allows and, where branches pair values (an ID with its labels), more.
    """
    first = branches[0]
    if any(set(branch) != set(first) for branch in branches):
        return None
    merged: dict[str, Any] = {}
    for key in first:
        joined = _joined(key, [branch[key] for branch in branches])
        if joined is None or (key == "properties" and None in joined.values()):
            return None
        merged[key] = joined
    return merged


def _joined(key: str, values: Sequence[Any]) -> Any:
    """The branches' values of ``key`` as one value, or ``None`` where they cannot be one."""
    value = values[0]
    if all(item == value for item in values):
        return value
    if key == "enum":
        return list(dict.fromkeys(item for enum in values for item in enum))
    if key == "items":
        return _merged(values)
    if key == "properties" and all(list(item) == list(value) for item in values):
        return {name: _merged([item[name] for item in values]) for name in value}
    return None


def _share_first_key(branches: Sequence[Mapping[str, Any]]) -> bool:
    if len(branches) < 2 or not all(branch.get("properties") for branch in branches):
        return False
    return len({next(iter(branch["properties"])) for branch in branches}) == 1


def _differences(first: Any, other: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths at which two written schemas differ (a list is one value)."""
    if isinstance(first, Mapping) and isinstance(other, Mapping) and set(first) == set(other):
        return {
            found for key in first for found in _differences(first[key], other[key], (*path, key))
        }
    return set() if first == other else {path}


def _one_enum_apart(branches: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the branches differ only in the enum of one place: then they are that enum."""
    paths = {path for branch in branches[1:] for path in _differences(branches[0], branch)}
    return len(paths) <= 1 and all(path[-1:] == ("enum",) for path in paths)


def _written(node: Mapping[str, Any], dialect: Dialect, keep_enums: bool) -> dict[str, Any]:
    branches = node.get("anyOf")
    written = [_written(branch, dialect, keep_enums) for branch in branches or ()]
    merged = _merged_choice(written, dialect)
    if merged is not None:
        return merged
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(_keyword(key, value, dialect, keep_enums, written))
    if "pattern" in out:
        # The pattern is the string's one bound: it is built to fit the length bounds, which
        # llama.cpp ignores beside it and vLLM's xgrammar refuses beside it.
        out.pop("minLength", None)
        out.pop("maxLength", None)
    kinds = out.get("type")
    if dialect.nullable == "nullable-keyword" and (kinds == "null" or isinstance(kinds, list)):
        others = [kind for kind in ([kinds] if isinstance(kinds, str) else kinds) if kind != "null"]
        out["type"] = others[0] if others else "string"
        out["nullable"] = True
    return {key: out[key] for key in (*node.keys(), "nullable", "propertyOrdering") if key in out}


def _merged_choice(written: Sequence[Mapping[str, Any]], dialect: Dialect) -> dict[str, Any] | None:
    """A written choice of objects sharing their first key as one object, or ``None`` to keep it.

    Raises:
        InvalidRequestError: The dialect sends no such choice, and its branches are not one.
    """
    if not _share_first_key(written):
        return None
    # Written in the dialect, a choice can lose what told its branches apart (quote mode's
    # patterns): branches one enum apart are exactly one object with that enum.
    merged = _merged(written)
    if merged is not None and (not dialect.object_unions or _one_enum_apart(written)):
        return merged
    if not dialect.object_unions:
        msg = (
            f"the request schema has a choice of objects sharing their first key, which the "
            f"{dialect.name} dialect does not send (object_unions)"
        )
        raise InvalidRequestError(msg, field="json_schema")
    return None


def _keyword(
    key: str, value: Any, dialect: Dialect, keep_enums: bool, written: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a node's ``key: value`` is in ``dialect`` (nothing when it drops it).

    ``written`` is the node's choice (``anyOf``), its branches already written.
    """
    if key == "properties":
        # The decision's and a stance's two values are their shape, not a list of what was
        # sent: kept.
        out: dict[str, Any] = {
            key: {
                name: _written(sub, dialect, keep_enums or name in (DECISION_KEY, STANCE_KEY))
                for name, sub in value.items()
            }
        }
        if dialect.property_ordering:
            out["propertyOrdering"] = list(value)
        return out
    if key == "anyOf":
        return {key: written}
    if key == "items":
        return {key: _written(value, dialect, keep_enums)}
    if key == "enum":
        return {key: list(value)} if keep_enums else {}
    if key == "minItems" and dialect.max_min_items is not None:
        return {key: value} if value <= dialect.max_min_items else {}
    if key in dialect.keywords:
        return {key: list(value) if isinstance(value, list) else value}
    return {}


def branch_on_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """Make "an answer xor missing evidence" structural: a choice of ledger shapes.

    The answered shapes (the decision ``"yes"``, a non-empty answer, no missing evidence) come
    one per fact count, 1 to 4 facts and one for more, each with an answer whose claims end with
    fact markers naming only its facts (:func:`~evidence_first._shapes.markers.answer_pattern`). The
    abstained shape has the decision ``"no"``, a null answer and inference, at least one
    missing-evidence item, facts allowed. A grammar-constrained provider (llama.cpp) then
    cannot produce an ``inconsistent_output`` ledger or a marker naming no fact: the decision it
    writes first chooses the shape. Verification is unchanged: it still checks every rule on
    whatever comes back.

    The pattern bounds the answer's length (llama.cpp ignores ``maxLength`` beside a pattern):
    each fact a shape does not write leaves its share of the output limit
    (:data:`~evidence_first._shapes.limits.OUTPUT_TOKENS_PER_FACT` tokens, read as two characters
    each, since digits are a token apiece) to the answer, at most ``maxLength`` characters in
    all, in at most three claims.
    """
    properties = schema["properties"]
    answer_chars = properties["answer"].get("maxLength", MAX_ANSWER_CHARS)
    facts = properties["facts"]
    most = facts.get("maxItems", MAX_FACTS)
    decision = properties.get(DECISION_KEY)

    def branch(value: str, **changed: Any) -> dict[str, Any]:
        chosen = {DECISION_KEY: {**decision, "enum": [value]}} if decision else {}
        return {**schema, "properties": {**properties, **chosen, **changed}}

    def answered(fewest: int, most_facts: int) -> dict[str, Any]:
        left = OUTPUT_TOKENS_PER_FACT * (most - fewest) + OUTPUT_TOKENS_PER_FACT // 2
        room = min(answer_chars, 2 * left)
        marker = pattern_chars(most_facts, claims=1, claim_chars=0)
        # As many claims as fit, up to one per fact, each of at least _LEAST_CLAIM_ROOM.
        claims = min(fewest, _MAX_CLAIMS)
        while claims > 1 and (room - claims + 1) // claims - marker < _LEAST_CLAIM_ROOM:
            claims -= 1
        answer: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": answer_chars}
        claim_chars = (room - claims + 1) // claims - marker
        if claim_chars >= _LEAST_CLAIM_ROOM:
            # The pattern's longest answer is its maxLength: both bounds say the same.
            bounds = {"facts": most_facts, "claims": claims, "claim_chars": claim_chars}
            answer["maxLength"] = pattern_chars(**bounds)
            answer["pattern"] = answer_pattern(**bounds)
        # Facts before the answer, as in the single-branch schema: the model cites, then
        # answers, and its answer's markers can name only the facts it wrote.
        return branch(
            "yes",
            facts={**facts, "minItems": fewest, "maxItems": most_facts},
            answer=answer,
            missing_evidence={**properties["missing_evidence"], "maxItems": 0},
        )

    shapes = [answered(count, count) for count in range(1, min(most, _SPLIT_FACTS) + 1)]
    if most > _SPLIT_FACTS:
        shapes.append(answered(_SPLIT_FACTS + 1, most))
    abstained = branch(
        "no",
        answer={"type": "null"},
        inference={"type": "null"},
        missing_evidence={**properties["missing_evidence"], "minItems": 1},
    )
    return {"anyOf": [*shapes, abstained]}
