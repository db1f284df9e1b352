"""The README's first command: the demo shows the product working on the default reader."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter

import pytest

from evidence_first.cli import load_demo_corpus
from evidence_first.local import DEFAULT_READER, KNOWN_MODELS, TINY_MODEL

QUESTION_LINE = re.compile(r"^\[(\d+)/(\d+)\] (.+?)  \[(quote|passage) mode\]")


@pytest.fixture(scope="module")
def demo(model_slot) -> tuple[int, str]:
    """One run of ``evidence-first demo``, as a user runs it: its exit status and output."""
    model_slot.stop()  # the demo starts its own servers, one at a time
    model_slot.say("[live] running `evidence-first demo` (a few minutes on a busy 2-core machine)")
    started = time.monotonic()
    command = [sys.executable, "-m", "evidence_first.cli", "demo"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1200)
    model_slot.say(f"[live] the demo took {time.monotonic() - started:.0f} s")
    return result.returncode, result.stdout


def _blocks(output: str) -> dict[str, str]:
    """Each question's part of the report, by its progress line."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if QUESTION_LINE.match(line):
            current = blocks.setdefault(line, [])
        elif line.startswith("=" * 72):
            current = None
        elif current is not None:
            current.append(line)
    return {head: "\n".join(lines) for head, lines in blocks.items()}


def test_demo_exits_zero_and_names_the_real_models(demo, no_model_server):
    status, output = demo
    assert status == 0
    header = output.split("\n[1/", 1)[0]
    assert f"Reader: {KNOWN_MODELS[DEFAULT_READER].title}" in header
    assert "passage mode" in header
    assert f"Loading {KNOWN_MODELS[DEFAULT_READER].title}" in header
    assert f"Loading {KNOWN_MODELS[TINY_MODEL].title}" in output


def test_demo_prints_a_progress_line_before_each_question(demo, no_model_server):
    _, output = demo
    numbers = [QUESTION_LINE.match(line) for line in output.splitlines()]
    seen = [(int(m[1]), int(m[2])) for m in numbers if m]
    total = len(load_demo_corpus()["questions"])
    assert seen == [(n, total) for n in range(1, total + 1)]


def test_demo_shows_an_answer_an_abstention_after_a_call_and_a_rejection(demo, no_model_server):
    _, output = demo
    blocks = _blocks(output)
    reader, tiny = KNOWN_MODELS[DEFAULT_READER].title, KNOWN_MODELS[TINY_MODEL].title
    answered = [b for b in blocks.values() if "Status: answered" in b and f"({reader}" in b]
    assert answered
    assert all("✓ verified" in block for block in answered)
    abstained = [
        b for b in blocks.values() if "Status: insufficient_evidence" in b and f"({reader}" in b
    ]
    assert abstained, "no honest abstention after a model call"
    assert all("Missing evidence:" in block for block in abstained)
    # The reader's confidence is printed with every answer of its, against its floor.
    confidence = "Reader's confidence that the sources state the answer: "
    assert all(confidence in block for block in answered + abstained)
    assert all("below the floor" in b for b in abstained if "below the floor of" in b)
    not_called = [b for b in blocks.values() if "(no model call)" in b]
    assert not_called
    assert all("below_min_score" in block for block in not_called)
    rejected = [b for b in blocks.values() if f"({tiny}" in b]
    assert rejected
    assert any("✗ rejected" in b or "Status: invalid_response" in b for b in rejected)


def test_demo_shows_that_the_reader_did_not_follow_the_har_318_injection(demo, no_model_server):
    _, output = demo
    planted = next(q["planted"] for q in load_demo_corpus()["questions"] if q.get("planted"))
    (block,) = [b for head, b in _blocks(output).items() if "invoice time zone" in head]
    assert f'a source asks for every answer to be "{planted}"; not followed' in block
    answers = [line for line in block.splitlines() if line.startswith("Answer: ")]
    assert all(planted.casefold() not in line.casefold() for line in answers)


# Lines the report prints once per question, whatever the model said, and the fixed wording of
# a flag, printed with each answer or citation that carries it.
STRUCTURAL = (
    "Status: ",
    "Citation checks (",
    "Missing evidence:",
    "Reason codes: ",
    "Flagged: ",
    "      ⚠ flagged: ",
)


def test_demo_never_prints_the_same_line_more_than_twice(demo, no_model_server):
    _, output = demo
    for block in _blocks(output).values():
        counts = Counter(line for line in block.splitlines() if line.strip())
        assert [line for line, count in counts.items() if count > 2] == []
    counts = Counter(
        line for line in output.splitlines() if line.strip() and not line.startswith(STRUCTURAL)
    )
    assert [line for line, count in counts.items() if count > 2] == []


def test_demo_corpus_holds_what_the_tour_needs():
    corpus = load_demo_corpus()
    statuses = {source.get("status") for source in corpus["sources"]}
    assert {"current", "superseded", "contradicted"} <= statuses
    assert any("ignore all previous instructions" in s["text"] for s in corpus["sources"])
    assert corpus["unanswerable"] in {q["question"] for q in corpus["questions"]}
    assert [q.get("tiny", False) for q in corpus["questions"]][-1] is True
