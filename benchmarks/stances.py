"""The stance per citation's targets, read from the embedded reader's stored runs (no model runs).

The reader's profile asks for no stance (``ModelProfile.writes_stance``): it reads ``passage/8``.
Its runs asked for one (``quality.py --stance``, ``passage/11``) are stored beside its own in the
same files (``quality.py --json``, in ``results/``). Every stored reply of the reader's own mode
(passage) is judged again by today's engine and decided as the engine decides it for the reader
(each flag's default policy, and the floors chosen under that run's prompt). The rows of a file
are told apart by their request: a row whose run key is the one the request asking for a
stance would get belongs to the stance run; the file's other rows of that mode are the run
without it (``passage/8``).

It prints:

- on the superseded and contradicted questions of the project's report half, how many
  ``answered`` results show verified counter-evidence (a counter-citation of the source the set
  marks superseded or contradicted whose cited text holds another value than the gold answer:
  ``quality.CounterCitation``), against the target of at least half, each case listed;
- right answers, the precision of ``answered``, median output tokens, output tokens per
  citation (each result's output tokens over the citations it wrote) and latency at the
  median, for both runs on the questions both hold, against the targets (no fewer right
  answers, no lower precision, at most 6 more tokens per citation);
- on NQ-open's report slice, the share of ``answered`` results with counter-citations against
  the target of at most 5%, each listed.

A run with no stored rows is reported as not run yet. Run from the workspace root::

    uv run python benchmarks/stances.py [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import machine_line
from quality import (
    PROJECT_SET,
    Floors,
    Outcome,
    context_tokens,
    floors_of,
    gold_spans,
    load_set,
    markdown_table,
    plan_one,
    precision,
    run_key,
    share,
)

from evidence_first import PASSAGE_PROMPT_VERSION, CitationMode, ReaderModel, profile_for
from evidence_first.adapters import profile_for_name

RESULTS = Path(__file__).parent / "results"
# The floors chosen for passage/11 and quote/10 by reader_policies.py --choose on the tune runs
# made with quality.py --stance (docs/benchmarks.md, "Stance per citation, on the reader"); the
# run without the key is decided under the profile's own floors, chosen for passage/8 and
# quote/8: each prompt with its own floors.
STANCE_FLOORS = Floors(
    floors={"passage": 0.77, "quote": 0.80}, flagged={"passage": 0.86, "quote": 0.87}
)
READER = "qwen2.5-coder-1.5b"
PROJECT_RUN = f"quality-report-{READER}.jsonl"
NQ_OPEN_RUN = f"quality-nq-open-report-{READER}.jsonl"
PREVIOUS_VERSION = "evidence-first/passage/8"
CONTESTED_KINDS = ("superseded", "contradicted")
MAX_EXTRA_TOKENS_PER_CITATION = 6.0
MAX_NQ_OPEN_SHARE = 0.05
NOT_RUN = "not run yet"


class StoredReader:
    """Plans requests as the embedded reader is sent them asked for a stance; never called.

    Its profile asks for none (``writes_stance``); the runs that asked were made with
    ``quality.py --stance``.
    """

    profile = profile_for_name(READER).replace(writes_stance=True)

    def generate(self, request: Any) -> str:
        raise AssertionError("the stored replies are judged again; nothing is sent")


@dataclass
class Runs:
    """One results file's rows of one mode: today's request's run and the previous one's."""

    current: list[Outcome] = field(default_factory=list)
    previous: list[Outcome] = field(default_factory=list)


def split_runs(
    set_name: str, path: Path, mode: CitationMode, model: ReaderModel | None = None
) -> Runs:
    """The rows of ``path`` in ``mode``, judged again, by whether today's request made them.

    A question with several rows of earlier requests keeps the last one stored.
    """
    runs = Runs()
    if not path.exists():
        return runs
    model = model or StoredReader()
    documents, questions = load_set(set_name)
    by_id = {q.id: q for q in questions}
    previous: dict[str, Outcome] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else None
        if record is None or record["mode"] != mode or record["id"] not in by_id:
            continue
        question = by_id[record["id"]]
        plan = plan_one(
            question,
            mode,
            documents,
            model,
            max_context_tokens=context_tokens(set_name),
        )
        outcome = Outcome.judged_again(
            record, question, plan, tuple(gold_spans(question, documents))
        )
        identity = record["run_key"].split(" | ")[0]
        if run_key(identity, plan, model) == record["run_key"]:
            runs.current.append(outcome)
        else:
            previous[question.id] = outcome
    runs.previous = list(previous.values())
    return runs


def decided(outcomes: Sequence[Outcome], floors: Floors, mode: CitationMode) -> list[Outcome]:
    return [floors.decide(o, mode) for o in outcomes]


def _answered(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status == "answered"]


def _shown(outcome: Outcome) -> bool:
    return any(c.counter_evidence for c in outcome.counter_citations)


def _met(held: bool) -> str:
    return "yes" if held else "NO"


def counter_evidence_table(current: Sequence[Outcome]) -> list[str]:
    """Answered superseded and contradicted results showing verified counter-evidence."""
    rows = []
    for name, kinds in [*((kind, (kind,)) for kind in CONTESTED_KINDS), ("both", CONTESTED_KINDS)]:
        answered = _answered([o for o in current if o.kind in kinds])
        shown = sum(_shown(o) for o in answered)
        met = _met(2 * shown >= len(answered) and bool(answered)) if name == "both" else ""
        rows.append(
            [
                name,
                str(sum(o.kind in kinds for o in current)),
                str(len(answered)),
                share(sum(bool(o.counter_citations) for o in answered), len(answered)),
                share(shown, len(answered)),
                "at least half" if name == "both" else "",
                met,
            ]
        )
    return markdown_table(
        "kind",
        [
            "questions",
            "answered",
            "with counter-citations",
            "with verified counter-evidence",
            "target",
            "met",
        ],
        rows,
    )


def cases(outcomes: Sequence[Outcome]) -> list[str]:
    """One line per result and one per counter-citation, for reading."""
    lines = []
    for o in outcomes:
        answer = o.detail.get("answer")
        written = sum(c.get("stance") == "contradicts" for c in o.detail.get("citations", ()))
        lines.append(
            f"- {o.id} ({o.kind}): {o.status}, {len(o.counter_citations)} counter-citation(s) "
            f"of {written} marked contradicts; answer {json.dumps(answer, ensure_ascii=False)}"
        )
        for c in o.counter_citations:
            source = "marked source" if c.marked_source else "current source"
            value = "another value" if c.other_value else "the gold answer"
            spans = ", ".join(f"[{start}, {end})" for start, end in c.spans)
            lines.append(
                f"  - fact {c.fact}: `{c.source_id}` {spans} ({source}; {value}): "
                f"{json.dumps(c.text, ensure_ascii=False)}"
            )
    return lines or ["(none)"]


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _precision(outcomes: Sequence[Outcome]) -> float:
    answered = _answered(outcomes)
    return sum(o.correct for o in answered) / len(answered) if answered else 0.0


def _pooled(outcomes: Sequence[Outcome]) -> float | None:
    known = [o for o in outcomes if o.tokens_per_citation is not None]
    citations = sum(o.produced for o in known)
    return sum(o.output_tokens or 0 for o in known) / citations if citations else None


def _shown_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _right(runs: Sequence[Outcome]) -> str:
    return share(sum(o.correct for o in runs), sum(o.answerable for o in runs))


def _per_citation(runs: Sequence[Outcome]) -> float | None:
    return _median([o.tokens_per_citation for o in runs])


def _tokens_met(old: Sequence[Outcome], new: Sequence[Outcome]) -> str:
    before, after = _per_citation(old), _per_citation(new)
    if before is None or after is None:
        return "-"
    return _met(after <= before + MAX_EXTRA_TOKENS_PER_CITATION)


def _row(
    name: str, runs: tuple[Sequence[Outcome], ...], measure: Callable[[Sequence[Outcome]], str]
) -> list[str]:
    return [name, *(measure(r) for r in runs)]


def comparison_table(previous: Sequence[Outcome], current: Sequence[Outcome]) -> list[str]:
    """Both runs on the questions both hold, against the targets."""
    common = {o.id for o in previous} & {o.id for o in current}
    old = [o for o in previous if o.id in common]
    new = [o for o in current if o.id in common]
    both = (old, new)
    correct_met = _met(sum(o.correct for o in new) >= sum(o.correct for o in old))
    rows = [
        [*_row("questions (both runs)", both, lambda r: str(len(r))), "", ""],
        [*_row("answered", both, lambda r: str(len(_answered(r)))), "", ""],
        [*_row("right answers (correct / answerable)", both, _right), "no fewer", correct_met],
        [
            *_row("precision of answered", both, lambda r: precision(list(r))),
            "no lower",
            _met(_precision(new) >= _precision(old)),
        ],
        [
            *_row(
                "median output tokens",
                both,
                lambda r: _shown_value(_median([o.output_tokens for o in r])),
            ),
            "",
            "",
        ],
        [
            *_row(
                "median output tokens per citation",
                both,
                lambda r: _shown_value(_per_citation(r)),
            ),
            f"at most +{MAX_EXTRA_TOKENS_PER_CITATION:g}",
            _tokens_met(old, new),
        ],
        [
            *_row(
                "output tokens per citation, every result (sum / sum)",
                both,
                lambda r: _shown_value(_pooled(r)),
            ),
            "",
            "",
        ],
        [
            *_row(
                "median latency per question (s)",
                both,
                lambda r: _shown_value(_median([o.latency_s for o in r])),
            ),
            "reported",
            "",
        ],
    ]
    version = PASSAGE_PROMPT_VERSION.removeprefix("evidence-first/")
    return markdown_table(
        "metric",
        [
            f"previous run ({PREVIOUS_VERSION.removeprefix('evidence-first/')})",
            f"current run ({version})",
            "target",
            "met",
        ],
        rows,
    )


def nq_open_table(current: Sequence[Outcome]) -> list[str]:
    answered = _answered(current)
    countered = sum(bool(o.counter_citations) for o in answered)
    met = _met(countered <= MAX_NQ_OPEN_SHARE * len(answered)) if answered else "-"
    rows = [
        [
            str(len(current)),
            str(len(answered)),
            share(countered, len(answered)),
            f"at most {MAX_NQ_OPEN_SHARE:.0%}",
            met,
        ]
    ]
    return markdown_table(
        "questions", ["answered", "with counter-citations", "target", "met"], rows
    )


def report(project: Runs, nq_open: Runs, floors: Floors, mode: CitationMode) -> list[str]:
    """The three sections, each run decided as the engine decides it for the reader."""
    current = decided(project.current, STANCE_FLOORS, mode)
    previous = decided(project.previous, floors, mode)
    contested = [o for o in current if o.kind in CONTESTED_KINDS]
    lines = [
        f"Report half, {mode} mode: counter-evidence on superseded and contradicted questions",
        "",
    ]
    if current:
        lines += [*counter_evidence_table(current), "", *cases(contested)]
    else:
        lines.append(NOT_RUN)
    lines += ["", f"Report half, {mode} mode: the current run against the previous one", ""]
    lines += comparison_table(previous, current) if current and previous else [NOT_RUN]
    lines += ["", f"NQ-open's report slice, {mode} mode: counter-citations", ""]
    nq_current = decided(nq_open.current, STANCE_FLOORS, mode)
    if nq_current:
        countered = [o for o in _answered(nq_current) if o.counter_citations]
        lines += [*nq_open_table(nq_current), "", *cases(countered)]
    else:
        lines.append(NOT_RUN)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="the folder of the stored runs"
    )
    args = parser.parse_args(argv)
    reader = StoredReader()
    floors = floors_of(reader)
    mode: CitationMode = profile_for(reader).citation_mode or "passage"
    project = split_runs(PROJECT_SET, args.results / PROJECT_RUN, mode, reader)
    nq_open = split_runs("nq-open", args.results / NQ_OPEN_RUN, mode, reader)
    print(machine_line())
    print(
        f"Reader {READER}: floors {STANCE_FLOORS.describe(mode)} asked for a stance "
        f"({PASSAGE_PROMPT_VERSION}), {floors.describe(mode)} without ({PREVIOUS_VERSION}, "
        "its profile's)."
    )
    print()
    print("\n".join(report(project, nq_open, floors, mode)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
