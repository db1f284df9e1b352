"""The embedded reader's answer policies, old and new, judged again from the same stored replies.

The reader's runs (``quality.py --json``, stored in ``results/``) ask with no confidence floor
and every answer flag only flagging, and keep each reply and its confidence. This script judges
every stored reply again with today's engine, then applies each candidate policy, the engine's
own rule, so no model runs:

- ``old``: the policies the reader had before its joint floors (floors of 0.78 in passage
  mode and 0.73 in quote mode; answers resting only on non-current sources and uncovered
  questions abstain);
- ``before``: the profile's floors before the fact-words check read values and the question's
  words around the span (0.61 and 0.84 in passage mode, 0.73 and 0.86 in quote mode), an
  answer flagged ``unsupported_facts`` or ``uncovered_question`` held to the higher one, as
  when ``uncovered_question`` flagged by default;
- ``flag``: the engine's defaults for any model (only non-current answers abstain) under a
  confidence floor;
- ``joint``: the same, and an answer that carries an answer flag of a check on by default
  (``unsupported_facts``; ``uncovered_question`` is off) is held to a second, higher floor
  (the profile's ``flagged_floors``): a flag and a low confidence must agree before the answer
  abstains.

``--choose`` picks the floors of ``flag`` and ``joint`` on the tune runs (the project's tune
half and the public sets' tune slices together): the most correct answers at a precision of
``answered`` no lower than ``old``'s on the same runs (the rule that chose the
floors before); ties go to the higher precision, then the lower floors. The report runs are then
judged with the chosen floors. Run from the workspace root::

    uv run python benchmarks/reader_policies.py [--choose] [--mode M] [--floor F --flagged-floor G]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import machine_line
from quality import (
    PROJECT_SET,
    Outcome,
    Question,
    context_tokens,
    gold_spans,
    load_set,
    markdown_table,
    plan_one,
    precision,
    run_key,
    share,
)

from evidence_first import profile_for
from evidence_first.adapters import profile_for_name

RESULTS = Path(__file__).parent / "results"
READER = "qwen2.5-coder-1.5b"
MODES = ("passage", "quote")
# The stored runs per split: (set, file).
RUNS: dict[str, tuple[tuple[str, str], ...]] = {
    split: (
        (PROJECT_SET, f"quality-{split}-{READER}.jsonl"),
        ("nq-open", f"quality-nq-open-{split}-{READER}.jsonl"),
        ("clapnq", f"quality-clapnq-{split}-{READER}.jsonl"),
    )
    for split in ("tune", "report")
}
OLD_FLOORS = {"passage": 0.78, "quote": 0.73}
# The floors the reader's profile held before this change: (plain, flagged) by mode.
BEFORE_FLOORS = {"passage": (0.61, 0.84), "quote": (0.73, 0.86)}


class _Reader:
    """Plans requests as the embedded reader is sent them (its profile), and is never called."""

    profile = profile_for_name(READER)

    def generate(self, request: Any) -> str:
        raise AssertionError("the stored replies are judged again; nothing is sent")


@dataclass(frozen=True)
class Policy:
    """How an answer that verified is decided, as the engine decides it.

    Attributes:
        name: Shown in the tables.
        floor: The reader's confidence floor (``None``: none).
        flagged_floor: The floor of an answer that carries an answer flag (``None``: the same).
        uncovered: ``"abstain"``, ``"flag"`` or ``"off"``: the ``uncovered_question`` policy.
    """

    name: str
    floor: float | None
    flagged_floor: float | None = None
    uncovered: str = "off"

    def decide(self, outcome: Outcome) -> Outcome:
        abstaining = {"non_current_evidence"} | (
            {"uncovered_question"} if self.uncovered == "abstain" else set()
        )
        if self.uncovered == "off":
            # The run asked with every check on: a check that is off raises no flag.
            flags = tuple(flag for flag in outcome.answer_flags if flag != "uncovered_question")
            outcome = dataclasses.replace(outcome, answer_flags=flags)
        return outcome.decided(self.floor, abstaining, self.flagged_floor)


def judged(set_name: str, path: Path, mode: str = "passage") -> list[Outcome]:
    """Every stored reply of ``path`` in ``mode`` to today's request, judged again today.

    A file may hold runs of earlier prompts too: a reply counts only where its request is
    byte-identical to the one today's code sends (the run key's digest).
    """
    if not path.exists():
        return []
    documents, questions = load_set(set_name)
    by_id: dict[str, Question] = {q.id: q for q in questions}
    reader = _Reader()
    outcomes = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["mode"] != mode or record["id"] not in by_id:
            continue
        question = by_id[record["id"]]
        plan = plan_one(
            question,
            mode,  # type: ignore[arg-type]
            documents,
            reader,
            max_context_tokens=context_tokens(set_name),
        )
        if _digest(record["run_key"]) != _digest(run_key("", plan, reader)):
            continue
        gold = tuple(gold_spans(question, documents))
        outcomes.append(Outcome.judged_again(record, question, plan, gold))
    return outcomes


def _digest(key: str) -> str:
    """The request's digest in a run key (its model identity left out)."""
    return key.rpartition(" | ")[2]


def figures(outcomes: Sequence[Outcome], policy: Policy) -> tuple[int, int, int, int, int]:
    """Correct, answerable, answered, unanswerable abstained, unanswerable under ``policy``."""
    decided = [policy.decide(o) for o in outcomes]
    answerable = [o for o in decided if o.answerable]
    unanswerable = [o for o in decided if not o.answerable]
    return (
        sum(o.correct for o in answerable),
        len(answerable),
        sum(o.status == "answered" for o in decided),
        sum(o.status != "answered" for o in unanswerable),
        len(unanswerable),
    )


def row(name: str, outcomes: Sequence[Outcome], policy: Policy) -> list[str]:
    correct, answerable, answered, held, unanswerable = figures(outcomes, policy)
    decided = [policy.decide(o) for o in outcomes]
    return [
        name,
        policy.name,
        share(correct, answerable),
        precision(decided),
        share(held, unanswerable),
        str(answered),
    ]


def choose(outcomes: Sequence[Outcome], baseline: Policy) -> tuple[Policy, Policy]:
    """The ``flag`` and ``joint`` policies the rule picks on ``outcomes`` (see the module)."""
    base_correct, _, base_answered, _, _ = figures(outcomes, baseline)
    base_precision = base_correct / base_answered if base_answered else 1.0
    floors = [None, *(step / 100 for step in range(1, 100))]

    def best(policies: Iterable[Policy]) -> Policy:
        chosen, key = None, None
        for policy in policies:
            correct, _, answered, _, _ = figures(outcomes, policy)
            held_precision = correct / answered if answered else 1.0
            if held_precision < base_precision:
                continue
            candidate = (correct, held_precision)
            if key is None or candidate > key:
                chosen, key = policy, candidate
        assert chosen is not None
        return chosen

    flag = best(Policy("flag", floor) for floor in floors)
    joint = best(
        Policy("joint", floor, upper)
        for floor in floors
        for upper in (step / 100 for step in range(1, 100))
        if floor is None or upper > floor
    )
    return flag, joint


def describe(policy: Policy) -> str:
    floor = "none" if policy.floor is None else f"{policy.floor:.2f}"
    flagged = "" if policy.flagged_floor is None else f", flagged {policy.flagged_floor:.2f}"
    return f"{policy.name}: floor {floor}{flagged}, uncovered {policy.uncovered}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choose", action="store_true", help="choose floors on the tune runs")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=profile_for(_Reader()).citation_mode,
        help="the citation mode judged (default: the reader's own; the public sets were run in "
        "passage mode only)",
    )
    parser.add_argument("--floor", type=float, default=None)
    parser.add_argument("--flagged-floor", type=float, default=None)
    args = parser.parse_args(argv)
    runs = {
        split: {name: judged(name, RESULTS / file, args.mode) for name, file in files}
        for split, files in RUNS.items()
    }
    old = Policy("old", OLD_FLOORS[args.mode], uncovered="abstain")
    before = Policy("before", *BEFORE_FLOORS[args.mode], uncovered="flag")
    if args.choose:
        tune = [o for outcomes in runs["tune"].values() for o in outcomes]
        flag, joint = choose(tune, old)
    else:
        flag = Policy("flag", args.floor)
        joint = Policy("joint", args.floor, args.flagged_floor)
    policies = (old, before, Policy("flag, no floor", None), flag, joint)
    print(machine_line())
    print(f"Mode: {args.mode}. Policies: " + "; ".join(describe(p) for p in policies) + ".")
    for split, by_set in runs.items():
        rows: list[list[str]] = []
        every = [o for outcomes in by_set.values() for o in outcomes]
        for name, outcomes in [*by_set.items(), ("all", every)]:
            if outcomes:
                rows.extend(row(f"{name} ({len(outcomes)})", outcomes, p) for p in policies)
        print(f"\n{split}\n")
        print(
            "\n".join(
                markdown_table(
                    "set (questions)",
                    [
                        "policy",
                        "correct / answerable",
                        "precision of answered",
                        "unanswerable abstained",
                        "answered",
                    ],
                    rows,
                )
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
