"""What tests of every folder share: a scripted model and the ledger builders.

Importable as ``_support`` from any test module (``pythonpath`` in ``pyproject.toml``); the
fixtures ``scripted``, ``make_ledger`` and ``make_fact`` of ``tests/conftest.py`` hand out the
same objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from evidence_first import ModelRequest, ModelResponse

__all__ = ["ScriptedModel", "fact", "forged", "ledger", "ledger_dict"]


class ScriptedModel:
    """A sync model that returns a fixed response and records each request it gets.

    The response is a ``ModelResponse`` or text returned as it is, a ledger mapping (sent as
    JSON, non-ASCII text kept), or ``response(request)`` giving each one.
    """

    def __init__(
        self, response: ModelResponse | str | dict[str, Any] | Callable[[ModelRequest], Any]
    ) -> None:
        self._response = (
            json.dumps(response, ensure_ascii=False) if isinstance(response, dict) else response
        )
        self.requests: list[ModelRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    def generate(self, request: ModelRequest) -> ModelResponse | str:
        self.requests.append(request)
        if callable(self._response):
            return self._response(request)
        return self._response


def ledger_dict(
    facts: Iterable[dict[str, Any]] | None = None,
    *,
    answer: str | None = "an answer",
    inference: str | None = None,
    missing_evidence: Iterable[str] | None = None,
) -> dict[str, Any]:
    """A ledger's four keys, in the order the schema gives them."""
    return {
        "facts": list(facts) if facts is not None else [],
        "answer": answer,
        "inference": inference,
        "missing_evidence": list(missing_evidence) if missing_evidence is not None else [],
    }


def ledger(
    facts: Iterable[dict[str, Any]] | None = None,
    *,
    answer: str | None = "an answer",
    inference: str | None = None,
    missing_evidence: Iterable[str] | None = None,
) -> str:
    """:func:`ledger_dict` as the JSON text a model replies with (non-ASCII text kept)."""
    built = ledger_dict(
        facts, answer=answer, inference=inference, missing_evidence=missing_evidence
    )
    return json.dumps(built, ensure_ascii=False)


def fact(
    *citations: tuple[str, str] | dict[str, Any],
    subject: str = "s",
    relation: str = "r",
    obj: str = "o",
) -> dict[str, Any]:
    """A ledger fact; each citation a ``(source_id, quote)`` pair or a citation mapping."""
    return {
        "subject": subject,
        "relation": relation,
        "object": obj,
        "citations": [
            c if isinstance(c, dict) else {"source_id": c[0], "quote": c[1]} for c in citations
        ],
    }


def forged(answer: Any, **fields: Any) -> Any:
    """A copy of ``answer`` with ``fields`` set past every check, as no load or copy allows.

    For the tests of what only reads an answer (renderers, metadata): they must hold whatever
    object they are given, even one no path of the package builds.
    """
    copy = answer.model_copy()
    for name, value in fields.items():
        object.__setattr__(copy, name, value)
    return copy
