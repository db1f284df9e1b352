"""What both commands of ``evidence-first`` print besides the report: progress and JSON."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from evidence_first._engine.result import EvidenceAnswer
from evidence_first.local import LocalModel

__all__ = ["Progress", "emit", "started"]


def emit(answers: list[EvidenceAnswer], *, as_json: bool, out: TextIO) -> None:
    """Write ``as_dict()`` of the answers as JSON: one object for one answer, else a list.

    Strict JSON or nothing: a NaN or an infinity raises ``ValueError`` before a line is written
    (the call refuses them in a source's metadata, so an answer holds none).
    """
    if as_json:
        payload: Any = [a.as_dict() for a in answers] if len(answers) != 1 else answers[0].as_dict()
        out.write(json.dumps(payload, ensure_ascii=False, indent=2, allow_nan=False) + "\n")


class Progress:
    """Progress lines: on the report stream, or on stderr when stdout carries JSON."""

    def __init__(self, out: TextIO, *, as_json: bool) -> None:
        self.stream = sys.stderr if as_json else out

    def __call__(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def started(model: LocalModel, say: Progress) -> LocalModel:
    """Start ``model``, saying so and how long it took."""
    say(f"Loading {model.title} on llama.cpp at 127.0.0.1 ...")
    begun = time.monotonic()
    model.start()
    say(f"Ready in {time.monotonic() - begun:.0f} s.")
    return model
