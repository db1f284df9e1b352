"""What both commands of ``evidence-first`` print besides the report: progress, JSON, the answer.

On a terminal the answer is printed as it is read (:func:`shown_as_read`), before its report.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from evidence_first._engine.result import EvidenceAnswer
from evidence_first._shapes.events import DecisionEvent, FactEvent, SourcesEvent, StreamEvent
from evidence_first._shapes.vocabulary import FLAG_DESCRIPTIONS
from evidence_first.local import LocalModel
from evidence_first.render._escaping import TextInPieces, in_text, printable
from evidence_first.render._outcome import outcome_text

__all__ = ["RULE", "Progress", "emit", "on_terminal", "shown_as_read", "started"]

RULE = "-" * 72
"""The line between what was shown as the reply was read and the report of the result."""
_HEADING = "Reading the reply as it comes (provisional: the report below is the result):"


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


def on_terminal(out: TextIO, *, as_json: bool) -> bool:
    """Whether to print the answer as it is read: ``out`` is a terminal, and carries no JSON.

    Anywhere else (a pipe, a file) the output stays what a script reads: the report alone.
    """
    return not as_json and out.isatty()


def shown_as_read(events: Iterator[StreamEvent | EvidenceAnswer], out: TextIO) -> EvidenceAnswer:
    """Print a streamed answer as it is read; return its result, whose report comes next.

    Each fact is printed once its citations verify, then the answer's text as it is written,
    each piece flushed. Once the result is in, a result that is not ``answered`` is said on a
    line of its own, then :data:`RULE`: the report printed after it is the result, and
    everything above it was provisional. Nothing is printed for a result without a model call.
    Every string of the model's is shown as the report shows it (:func:`in_text`).

    Raises:
        EvidenceFirstError: The call failed, timed out or was cancelled; the line being
            written is ended first, so that the message reads on a line of its own.
        RuntimeError: ``events`` ended without a result, which no stream of the core does.
    """
    screen = _Screen(out)
    try:
        for item in events:
            if isinstance(item, EvidenceAnswer):
                screen.result(item)
                return item
            screen.show(item)
    finally:
        screen.end_text()
        # Leaving before the result (an error, Ctrl-C) closes the stream: the call is cancelled.
        close = getattr(events, "close", None)
        if close is not None:
            close()
    msg = "the stream ended without its result"
    raise RuntimeError(msg)


class _Screen:
    """What a terminal has been shown of one streamed answer."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.opened = False  # the heading is printed: the model is called
        self.verified = False  # a fact was shown verified
        self.written = False  # some of the answer's text was shown
        self.writing = False  # the answer's line is open
        self.text = TextInPieces()
        # Each distinct cited span's number, from 1 in order of first appearance, fact by fact:
        # the report's numbers for the same facts.
        self.numbers: dict[tuple[str, int, int], int] = {}

    def show(self, event: StreamEvent) -> None:
        if isinstance(event, SourcesEvent):
            if event.model_called:
                self.opened = True
                self._line(_HEADING)
        elif isinstance(event, DecisionEvent):
            self._line(_decision(event))
        elif isinstance(event, FactEvent):
            for line in self._fact(event):
                self._line(line)
        elif event.text:
            self._text(event.text)

    def _line(self, line: str) -> None:
        self.end_text()
        self.out.write(line + "\n")
        self.out.flush()

    def _fact(self, event: FactEvent) -> list[str]:
        fact = event.fact
        if fact is None:
            codes = dict.fromkeys(check.code for check in event.checks if check.code is not None)
            return [f"  ✗ fact rejected: {', '.join(codes) or 'not a fact the ledger can hold'}"]
        self.verified = True
        spans = []
        for c in fact.citations:
            span = (c.source_id, c.char_start, c.char_end)
            number = self.numbers.setdefault(span, len(self.numbers) + 1)
            spans.append(f"[{number}] {printable(c.source_id)} chars {c.char_start}-{c.char_end}")
        shown = " | ".join(in_text(part) for part in (fact.subject, fact.relation, fact.object))
        flags = dict.fromkeys(flag for check in event.checks for flag in check.flags)
        # Counter-evidence is numbered in the report after every supporting span, which later
        # facts may add to: here it is named by its place alone.
        return [
            f"  ✓ fact: {shown}  {', '.join(spans)}",
            *(
                f"      contradicted by {printable(c.source_id)} chars {c.char_start}-{c.char_end}"
                for c in fact.counter_citations
            ),
            *(f"      ⚠ flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in flags),
        ]

    def _text(self, piece: str) -> None:
        if not self.writing:
            self.out.write("  Answer as written: ")
            self.written = self.writing = True
        self.out.write(self.text.add(piece))
        self.out.flush()

    def end_text(self) -> None:
        """End the answer's line, if it is open, with what was held back of it."""
        if self.writing:
            self.out.write(self.text.end() + "\n")
            self.out.flush()
            self.writing = False

    def result(self, answer: EvidenceAnswer) -> None:
        if not self.opened:
            return
        self.end_text()
        if answer.status != "answered":
            self.out.write(f"✗ {self._taken_back(answer)}{outcome_text(answer)}\n")
        self.out.write(RULE + "\n")
        self.out.flush()

    def _taken_back(self, answer: EvidenceAnswer) -> str:
        """What a result that is not ``answered`` takes back of what was shown, if anything.

        A rejection takes back every fact and word shown; an abstention, the answer's text
        (its verified facts stay, as partial facts).
        """
        if answer.status == "invalid_response" and (self.verified or self.written):
            return "REJECTED: nothing shown above stands. "
        if self.written:
            return "WITHDRAWN: the answer shown above does not stand. "
        return ""


def _decision(event: DecisionEvent) -> str:
    says = "state" if event.answerable == "yes" else "do not state"
    confidence = event.reader_confidence
    shown = "" if confidence is None else f" (confidence {confidence:.2f})"
    return f"  Reader: the sources {says} the answer{shown}"
