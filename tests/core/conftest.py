"""Fixtures for the core tests: a scripted model that records every call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from evidence_first import ModelRequest, ModelResponse


class ScriptedModel:
    """A sync model that returns a fixed response and records each request it gets."""

    def __init__(self, response: ModelResponse | str | Callable[[ModelRequest], Any]) -> None:
        self._response = response
        self.requests: list[ModelRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    def generate(self, request: ModelRequest) -> ModelResponse | str:
        self.requests.append(request)
        if callable(self._response):
            return self._response(request)
        return self._response


def ledger(
    facts: list[dict[str, Any]] | None = None,
    *,
    answer: str | None = "an answer",
    inference: str | None = None,
    missing_evidence: list[str] | None = None,
) -> str:
    """Serialize a ledger; facts are given as (source_id, quote) citation lists."""
    return json.dumps(
        {
            "facts": facts if facts is not None else [],
            "answer": answer,
            "inference": inference,
            "missing_evidence": missing_evidence if missing_evidence is not None else [],
        },
        ensure_ascii=False,
    )


def fact(*citations: tuple[str, str], subject: str = "s", relation: str = "r") -> dict[str, Any]:
    return {
        "subject": subject,
        "relation": relation,
        "object": "o",
        "citations": [{"source_id": sid, "quote": quote} for sid, quote in citations],
    }


@pytest.fixture
def scripted() -> Callable[..., ScriptedModel]:
    return ScriptedModel


@pytest.fixture
def make_ledger() -> Callable[..., str]:
    return ledger


@pytest.fixture
def make_fact() -> Callable[..., dict[str, Any]]:
    return fact
