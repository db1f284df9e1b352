"""Print the model-profile rules table of ``docs/providers.md``, generated from the rule table.

Run from the workspace root, and paste its output between the ``<!-- profile-rules -->``
markers (``tests/core/test_profiles.py`` compares them)::

    uv run python docs/scripts/providers_table.py
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from typing import Any

from evidence_first._models.rules import CAUTIOUS, PROFILE_RULES, ProfileRule

HEADER = ("| rule | vendor | models | sets | documentation |", "|---|---|---|---|---|")

_VENDORS = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "google": "Google",
    "mistral": "Mistral",
    "embedded": "embedded",
}


def cell(text: str) -> str:
    """``text`` safe in a table cell: its pipes escaped, for GitHub's renderer and MkDocs'."""
    return text.replace("|", "\\|")


def pattern(rule: ProfileRule) -> str:
    """The rule's name pattern as code, exact in both renderers (a code span cannot hold ``|``)."""
    escaped = html.escape(rule.pattern.pattern, quote=False)
    for char in "\\`*_[]":
        escaped = escaped.replace(char, "\\" + char)
    return f"<code>{escaped}</code>"


def settings(values: Mapping[str, Any]) -> str:
    """What a rule sets, in words; the profile's fields by name."""
    words: list[str] = []
    for field, value in values.items():
        if field == "temperature":
            words.append("temperature 0" if value else "no temperature (the model's default)")
        elif field == "logprobs" and not value:
            words.append("no log-probabilities")
        elif field == "logprobs":
            # A rule that names no dialect leaves the host to say whether they are asked for.
            where = "" if "dialect" in values else " (asked for on OpenAI's and Azure's hosts)"
            words.append(f"log-probabilities{where}")
        elif field == "stream_usage":
            words.append("a stream's usage asked for" if value else "no usage asked of a stream")
        elif field == "output_limit":
            words.append(f"the limit in `{value}`")
        elif field == "output_allowance":
            words.append(f"{value:,} output tokens on top of the ledger's")
        elif field == "structured_output":
            words.append("native structured output" if value else "JSON asked for in the prompt")
        elif field == "dialect":
            words.append(f"the `{value}` dialect")
        elif field == "citation_mode":
            words.append(f"citation mode `{value}`")
        elif field in ("confidence_floors", "flagged_floors"):
            floors = ", ".join(f"{mode} {floor}" for mode, floor in value.items())
            whose = "confidence floors" if field == "confidence_floors" else "a flagged answer's"
            words.append(f"{whose}: {floors}")
        elif field == "writes_stance":
            words.append("a stance per citation asked for" if value else "no stance asked for")
        elif field == "policies":
            policies = ", ".join(f"`{flag}` {policy}" for flag, policy in value.items())
            words.append(f"policies: {policies}")
        else:
            words.append(f"`{field}={value!r}`")
    return "; ".join(words) or "its family's defaults (temperature 0, `max_tokens`)"


def rule_rows() -> Iterator[tuple[str, str, str, str, str]]:
    """``(rule, vendor, models, sets, documentation)`` per rule, then per cautious profile."""
    for rule in PROFILE_RULES:
        models = f"names matching {pattern(rule)}"
        yield f"`{rule.name}`", _VENDORS[rule.vendor], models, settings(rule.settings), rule.source
    for rule in CAUTIOUS.values():
        vendor = _VENDORS[rule.vendor]
        models = f"any other {vendor} name (by {pattern(rule)}, or its provider); warns once"
        yield f"`{rule.name}`", vendor, models, settings(rule.settings), rule.source


def table() -> list[str]:
    """The table's lines: its header, then a row per rule."""
    return [*HEADER, *("| " + " | ".join(map(cell, row)) + " |" for row in rule_rows())]


if __name__ == "__main__":
    print("\n".join(table()))
