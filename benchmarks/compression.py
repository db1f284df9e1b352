"""Compression with no model: what a retriever's long chunk keeps of its answer when compressed.

Over NQ-open's and ClapNQ's report slices (``public_sets.py``; ``--split tune`` for the tune
slices, where every choice of the rule is made), each answerable question with a gold sentence
gets a **long source**: its gold passage joined with the passages of its 9 BM25 neighbours, a
blank line between each, the gold passage at a seeded-random place among them. The neighbours
are the 9 passages of the same set that a BM25 index of every distinct passage ranks nearest
the question, its own passage left out (``data/public/make_sets.py``): the passages a
retriever would find hardest to tell from the answer's, so the chunk is the hardest one a
retriever could return. The **gold sentence** is the run of passage-mode sentences holding the
short answer (NQ-open), or each of ClapNQ's selected sentences, at its offsets in the long
source (``public_sets.gold_spans``).

Every answer goes through the public ``answer_from_evidence`` in quote mode. A scripted model
records the request it receives and replies with an abstaining ledger, so what was sent is
read from the request itself, with no model. A gold sentence is **kept** when every gold span
lies in one of its source's ``EvidenceAnswer.kept_ranges`` (or the source was sent whole), and
**in the request** when its text is in the source's text as the user message carries it (the
sources array, JSON-decoded). The figures:

- **Half**: each long source alone, ``compress=True``, ``max_context_tokens`` set to half of
  what the source is charged whole: ``answer.budget.sources_tokens`` of the same source sent
  whole under the largest allowance (the packing's own counter, separators included), halved
  and rounded down. Alone, the source's share is the whole allowance, so it is compressed to
  at most half its tokens. BM25 relevance, then an embedder's (``--embedder``), where
  sentence-transformers and the model are installed: neither is a dependency, and nothing is
  downloaded.
- **Rescue**: the default allowance (2,048), 8 long sources that today's packing omits whole:
  each is over the allowance alone. The question's own and the long sources of its 7 nearest
  neighbours' questions (the question's gold passage left out of them, so one source holds the
  answer), the question's own at a seeded-random place. Each joins its passage with its 9 BM25
  neighbours, then, while the source alone is charged no more than the allowance, more
  passages at the end: its neighbours' neighbours, breadth first (the first neighbour's 9,
  then the second's...), each distinct passage once (a set stores 9 neighbours per passage).
  Asked with compression off (today's packing, which must omit all 8 ``over_budget``) and on.
- **Plan time**: 64 sources of generated prose, each holding one sentence that names the
  question's words (so none is far from the best), every one over the default allowance, quote
  mode, BM25, one run each at 131,072 and at 262,144 code points per source (the per-source
  limit), timed from the call of the entry point to the model's request arriving; and the
  same with compression off, for reference (nothing is sent then, so no request: timed until
  the call returns).

Run from the workspace root::

    uv run python benchmarks/compression.py [--sets nq-open,clapnq] [--limit N] [--quick]
        [--embedder NAME] [--json benchmarks/results/compression.json]

It prints the Python version and platform, then Markdown tables; a missed target shows ``NO``
in its ``met`` column and the exit code stays 0. ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import WORDS, machine_line, prose_sentence, require
from public_sets import Item, Span, gold_spans, in_split, items_by_id, load_items

from evidence_first import (
    Evidence,
    EvidenceAnswer,
    ModelRequest,
    answer_from_evidence,
    estimate_tokens,
)
from evidence_first._sending.options import AnswerOptions
from evidence_first._sending.packing import pack_sources

SETS = ("nq-open", "clapnq")
NEIGHBOURS = 9
LONG_SOURCES = 8
JOIN = "\n\n"
# The largest allowance the options accept: every long source alone fits it whole.
WHOLE_ALLOWANCE = 32_768
WHOLE_OPTIONS = AnswerOptions(max_context_tokens=WHOLE_ALLOWANCE)
DEFAULT_ALLOWANCE = AnswerOptions().max_context_tokens
TARGET_HALF = 0.95
TARGET_RESCUE = 0.90
TARGET_PLAN_S = 10.0
TARGET_GROWTH = 2.5
PLAN_SOURCES = 64
PLAN_UNITS = (131_072, 262_144)
QUICK_QUESTIONS = 3
QUICK_PLAN = (4, (16_384, 32_768))
PLAN_QUESTION = "What did the survey team record about the old bridge near the northern river?"
PLAN_ANSWER = "The survey team recorded cracks in the old bridge near the northern river."
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
# What a careful reader replies when nothing sent answers: a valid ledger, no citation.
ABSTAINING = json.dumps(
    {
        "answerable": "no",
        "facts": [],
        "answer": None,
        "inference": None,
        "missing_evidence": ["the passage that states the answer"],
    }
)

Embedder = Callable[[list[str]], list[list[float]]]


class Recorder:
    """A scripted model: records the request it receives and when, and abstains."""

    def __init__(self) -> None:
        self.request: ModelRequest | None = None
        self.arrived = 0.0

    def generate(self, request: ModelRequest) -> str:
        self.arrived = time.perf_counter()
        self.request = request
        return ABSTAINING


@dataclass(frozen=True)
class LongSource:
    """One long source: its evidence and its gold spans (none for a distractor)."""

    evidence: Evidence
    gold: tuple[Span, ...] = ()


def neighbour_texts(item: Item, by_id: dict[str, Item], without: str | None) -> Iterator[str]:
    """The passages nearest the item's: its BM25 neighbours, then theirs, breadth first.

    Each distinct passage once, in that order, never the item's own nor ``without``.
    """
    seen = {item.text, without}
    queue = list(item.neighbours)
    for neighbour in queue:
        found = by_id[neighbour]
        if found.text not in seen:
            seen.add(found.text)
            yield found.text
        queue.extend(found.neighbours)


def charge(evidence: Evidence) -> int:
    """What today's packing charges the source whole, by the default counter."""
    packed = pack_sources([evidence], WHOLE_OPTIONS, count_tokens=estimate_tokens)
    return packed.tokens


def long_source(
    item: Item,
    by_id: dict[str, Item],
    source_id: str,
    *,
    gold: bool,
    without: str | None = None,
    over: int | None = None,
) -> LongSource:
    """The item's passage joined with its 9 nearest at a seeded-random place.

    ``without`` leaves one passage out (another question's gold passage); ``gold`` keeps the
    item's gold spans, moved to where its passage stands in the joined text. With ``over``,
    passages are added, nearest first, until the source alone is charged more than ``over``.
    """
    nearest = neighbour_texts(item, by_id, without)
    others = list(itertools.islice(nearest, NEIGHBOURS))
    rng = random.Random(f"compression:{item.set}:{item.id}")
    place = rng.randint(0, len(others))
    text = JOIN.join([*others[:place], item.text, *others[place:]])
    while over is not None and charge(Evidence(id=source_id, text=text)) <= over:
        # Each passage added goes at the end, so the gold passage keeps its seeded place.
        others.append(next(nearest))
        text = JOIN.join([*others[:place], item.text, *others[place:]])
    offset = sum(len(other) + len(JOIN) for other in others[:place])
    spans = tuple((a + offset, b + offset) for a, b in gold_spans(item)) if gold else ()
    return LongSource(Evidence(id=source_id, text=text), spans)


def sent_texts(request: ModelRequest | None) -> dict[str, str]:
    """Each source's text as the user message sends it in quote mode, JSON-decoded, by ID."""
    if request is None:
        return {}
    user = request.user
    start = user.index("\n[\n") + 3
    end = user.index("\n]\n", start - 1)
    body = user[start:end]
    items: list[dict[str, Any]] = json.loads(f"[{body}]") if body else []
    return {item["id"]: item["text"] for item in items}


@dataclass(frozen=True)
class Seen:
    """What one answer sent of a long source's gold sentence."""

    sent: bool  # the source is in the request, whole or compressed
    compressed: bool
    kept: bool  # every gold span inside one kept range, or the source sent whole
    in_request: bool  # every gold sentence's text in the source's sent text


def seen(answer: EvidenceAnswer, recorder: Recorder, long: LongSource) -> Seen:
    source_id = long.evidence.id
    texts = sent_texts(recorder.request)
    if source_id not in texts:
        return Seen(sent=False, compressed=False, kept=False, in_request=False)
    ranges = answer.kept_ranges.get(source_id)
    kept = ranges is None or all(
        any(a <= start and end <= b for a, b in ranges) for start, end in long.gold
    )
    text = long.evidence.text
    in_request = all(text[start:end] in texts[source_id] for start, end in long.gold)
    return Seen(sent=True, compressed=ranges is not None, kept=kept, in_request=in_request)


def ask(
    question: str, sources: Sequence[Evidence], **options: Any
) -> tuple[EvidenceAnswer, Recorder]:
    recorder = Recorder()
    answer = answer_from_evidence(
        question,
        sources,
        recorder,
        citation_mode="quote",
        min_reader_confidence=None,
        **options,
    )
    return answer, recorder


# --- Half: each long source compressed to half its tokens ------------------------------------


@dataclass(frozen=True)
class HalfCase:
    set: str
    id: str
    whole_tokens: int
    allowance: int
    sent_tokens: int
    saved_tokens: int
    parts: int
    kept: bool
    in_request: bool


def half_case(item: Item, by_id: dict[str, Item], embedder: Embedder | None) -> HalfCase:
    long = long_source(item, by_id, "chunk", gold=True)
    whole, _ = ask(item.question, [long.evidence], max_context_tokens=WHOLE_ALLOWANCE)
    whole_tokens = whole.budget.sources_tokens
    require(whole.used_source_ids == ("chunk",), f"{item.id}: the long source was not sent whole")
    allowance = max(whole_tokens // 2, 1)
    extra = {} if embedder is None else {"embedder": embedder}
    answer, recorder = ask(
        item.question, [long.evidence], max_context_tokens=allowance, compress=True, **extra
    )
    sent = seen(answer, recorder, long)
    require(not sent.sent or sent.compressed, f"{item.id}: a source over budget was sent whole")
    return HalfCase(
        set=item.set,
        id=item.id,
        whole_tokens=whole_tokens,
        allowance=allowance,
        sent_tokens=answer.budget.sources_tokens,
        saved_tokens=answer.budget.saved_tokens,
        parts=len(answer.kept_ranges.get("chunk", ())),
        kept=sent.kept,
        in_request=sent.in_request,
    )


# --- Rescue: 8 long sources under the default allowance --------------------------------------


@dataclass(frozen=True)
class RescueCase:
    set: str
    id: str
    omitted_today: bool  # today's packing omits the answer-holding source whole
    sent_whole_today: int  # how many of the 8 today's packing sends
    today: bool  # its gold sentence sent, compression off
    kept: bool  # its gold sentence sent, compression on
    in_request: bool
    compressed: int  # how many of the 8 were sent compressed
    saved_tokens: int


def rescue_sources(item: Item, by_id: dict[str, Item]) -> tuple[list[Evidence], LongSource]:
    """The question's long source among its 7 nearest neighbours' long sources."""
    own = long_source(item, by_id, "answer", gold=True, over=DEFAULT_ALLOWANCE)
    others = [
        long_source(
            by_id[n], by_id, f"other-{k}", gold=False, without=item.text, over=DEFAULT_ALLOWANCE
        ).evidence
        for k, n in enumerate(item.neighbours[: LONG_SOURCES - 1])
    ]
    place = random.Random(f"compression:rescue:{item.set}:{item.id}").randint(0, len(others))
    others.insert(place, own.evidence)
    return others, own


def rescue_case(item: Item, by_id: dict[str, Item]) -> RescueCase:
    sources, own = rescue_sources(item, by_id)
    off, off_recorder = ask(item.question, sources)
    require(
        set(off.omissions.values()) == {"over_budget"} and len(off.omissions) == len(sources),
        f"{item.id}: today's packing sent one of the long sources",
    )
    on, on_recorder = ask(item.question, sources, compress=True)
    today = seen(off, off_recorder, own)
    rescued = seen(on, on_recorder, own)
    return RescueCase(
        set=item.set,
        id=item.id,
        omitted_today=off.omissions.get("answer") == "over_budget",
        sent_whole_today=len(off.used_source_ids),
        today=today.sent and today.kept,
        kept=rescued.sent and rescued.kept,
        in_request=rescued.in_request,
        compressed=len(on.kept_ranges),
        saved_tokens=on.budget.saved_tokens,
    )


# --- Plan time --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanTime:
    sources: int
    units: int
    seconds: float
    seconds_off: float
    compressed: int


def prose_sources(count: int, units: int) -> list[Evidence]:
    """``count`` distinct sources of exactly ``units`` code points of generated prose.

    Each holds :data:`PLAN_ANSWER` once, at a seeded place, so every source's best passage is
    near the best among them and each is compressed (a source far below the best would not
    be), at every size alike.
    """
    rng = random.Random(units)
    pool = [prose_sentence(rng, WORDS) for _ in range(4000)]
    sources = []
    for index in range(count):
        parts: list[str] = []
        length = 0
        while length <= units:
            sentence = rng.choice(pool)
            parts.append(sentence)
            length += len(sentence) + 1
        parts.insert(rng.randrange(len(parts) // 2), PLAN_ANSWER)
        sources.append(Evidence(id=f"big-{index:02d}", text=" ".join(parts)[:units]))
    return sources


def timed(sources: Sequence[Evidence], *, compress: bool) -> tuple[float, EvidenceAnswer]:
    """Seconds from the entry point's call to the model's request arriving.

    With nothing to send (compression off, every source over budget) no request is made:
    then the seconds until the call returns.
    """
    recorder = Recorder()
    start = time.perf_counter()
    answer = answer_from_evidence(
        PLAN_QUESTION, sources, recorder, citation_mode="quote", compress=compress
    )
    end = time.perf_counter()
    require(not compress or recorder.request is not None, "nothing compressed was sent")
    return (end if recorder.request is None else recorder.arrived) - start, answer


def plan_time(count: int, units: int) -> PlanTime:
    sources = prose_sources(count, units)
    seconds_off, _ = timed(sources, compress=False)
    seconds, answer = timed(sources, compress=True)
    return PlanTime(count, units, seconds, seconds_off, len(answer.kept_ranges))


# --- Tables -----------------------------------------------------------------------------------


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "-"


def met(part: int, whole: int, target: float) -> str:
    return "-" if not whole else "yes" if part / whole >= target else "NO"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def by_set(cases: Sequence[Any], sets: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """Each set's cases, then every case pooled when there is more than one set."""
    groups = [(name, [c for c in cases if c.set == name]) for name in sets]
    return [*groups, ("pooled", list(cases))] if len(sets) > 1 else groups


def half_table(cases: Sequence[HalfCase], sets: Sequence[str]) -> list[str]:
    rows = []
    for name, group in by_set(cases, sets):
        kept = sum(c.kept for c in group)
        rows.append(
            [
                name,
                str(len(group)),
                f"{statistics.median(c.whole_tokens for c in group):,.0f}" if group else "-",
                f"{statistics.median(c.sent_tokens for c in group):,.0f}" if group else "-",
                f"{statistics.median(c.parts for c in group):g}" if group else "-",
                share(kept, len(group)),
                share(sum(c.in_request for c in group), len(group)),
                f">= {TARGET_HALF:.0%}",
                met(kept, len(group), TARGET_HALF),
            ]
        )
    header = [
        "set",
        "questions",
        "median tokens whole",
        "median tokens sent",
        "median parts",
        "gold sentence kept",
        "gold sentence in the request",
        "target",
        "met",
    ]
    return table(header, rows)


def rescue_table(cases: Sequence[RescueCase], sets: Sequence[str]) -> list[str]:
    rows = []
    for name, group in by_set(cases, sets):
        omitted = [c for c in group if c.omitted_today]
        kept = sum(c.kept for c in omitted)
        rows.append(
            [
                name,
                str(len(group)),
                share(len(omitted), len(group)),
                f"{statistics.median(c.sent_whole_today for c in group):g}" if group else "-",
                share(sum(c.today for c in omitted), len(omitted)),
                share(kept, len(omitted)),
                share(sum(c.kept for c in group), len(group)),
                f"{statistics.median(c.compressed for c in group):g}" if group else "-",
                f">= {TARGET_RESCUE:.0%}",
                met(kept, len(omitted), TARGET_RESCUE),
            ]
        )
    header = [
        "set",
        "questions",
        "answer's source omitted whole today",
        "median sources sent whole today",
        "gold sentence sent, compress off (omitted today)",
        "gold sentence sent, compress on (omitted today)",
        "gold sentence sent, compress on (all)",
        "median sources compressed",
        "target",
        "met",
    ]
    return table(header, rows)


def plan_table(times: Sequence[PlanTime]) -> list[str]:
    rows = [
        [
            str(t.sources),
            f"{t.units:,}",
            f"{t.sources * t.units:,}",
            f"{t.seconds:.2f}",
            f"{t.seconds_off:.2f}",
            str(t.compressed),
            f"<= {TARGET_PLAN_S:g}",
            "yes" if t.seconds <= TARGET_PLAN_S else "NO",
        ]
        for t in times
    ]
    header = [
        "sources",
        "code points each",
        "in all",
        "plan time, compress on (s)",
        "compress off (s)",
        "sources compressed",
        "target (s)",
        "met",
    ]
    return table(header, rows)


def growth(times: Sequence[PlanTime]) -> float:
    return times[-1].seconds / times[0].seconds if times[0].seconds > 0 else float("inf")


# --- Run --------------------------------------------------------------------------------------


def load_embedder(name: str) -> tuple[Embedder | None, str]:
    """An embedder from a sentence-transformers model in the local cache, or why there is none.

    Nothing is downloaded: a model not cached counts as not installed. ``wordllama`` is
    WordLlama's static embeddings, whose weights its wheel carries
    (``uv run --with wordllama``).
    """
    if name == "wordllama":
        return _wordllama()
    try:
        module = importlib.import_module("sentence_transformers")
    except ImportError:
        return None, "not installed (sentence-transformers is not importable)"
    try:
        model = module.SentenceTransformer(name, local_files_only=True)
    except (OSError, ValueError):
        return None, f"not installed ({name} is not in the local model cache)"

    def embed(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = model.encode(texts).tolist()
        return vectors

    return embed, name


def _wordllama() -> tuple[Embedder | None, str]:
    try:
        module = importlib.import_module("wordllama")
    except ImportError:
        return None, "not installed (wordllama is not importable)"
    # Its wheel carries the tokenizer's configuration in its tokenizers/ folder, where load()
    # does not look before it downloads: handed to it as a cache, nothing is downloaded.
    cache = Path(tempfile.mkdtemp(prefix="wordllama-"))
    shutil.copytree(Path(module.__file__).parent / "tokenizers", cache / "tokenizers")
    model = module.WordLlama.load(cache_dir=cache, disable_download=True)

    def embed(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = model.embed(texts).tolist()
        return vectors

    return embed, "WordLlama (l2_supercat, 256 dimensions, its wheel's weights)"


@dataclass
class Figures:
    sets: list[str]
    split: str = "report"
    half: list[HalfCase] = field(default_factory=list)
    embedded: list[HalfCase] = field(default_factory=list)
    embedder: str = ""
    rescue: list[RescueCase] = field(default_factory=list)
    plan: list[PlanTime] = field(default_factory=list)


def questions_of(name: str, limit: int | None, split: str = "report") -> list[Item]:
    """The split's answerable questions with a gold sentence, in the stable order."""
    chosen = in_split(load_items(name), split)
    return [item for item in chosen if item.answerable and gold_spans(item)][:limit]


def measure(args: argparse.Namespace) -> Figures:
    limit = QUICK_QUESTIONS if args.quick and args.limit is None else args.limit
    embedder, described = load_embedder(args.embedder)
    figures = Figures(sets=list(args.sets), split=args.split, embedder=described)
    for name in args.sets:
        by_id = items_by_id(name)
        questions = questions_of(name, limit, args.split)
        for number, item in enumerate(questions, 1):
            figures.half.append(half_case(item, by_id, None))
            if embedder is not None:
                figures.embedded.append(half_case(item, by_id, embedder))
            figures.rescue.append(rescue_case(item, by_id))
            if number % 100 == 0:
                print(f"{name}: {number}/{len(questions)}", file=sys.stderr, flush=True)
    count, sizes = QUICK_PLAN if args.quick else (PLAN_SOURCES, PLAN_UNITS)
    figures.plan = [plan_time(count, units) for units in sizes]
    return figures


def render(figures: Figures) -> str:
    sets = figures.sets
    times = figures.plan
    ratio = growth(times)
    embedded = (
        [f"The same with an embedder, {figures.embedder}:", "", *half_table(figures.embedded, sets)]
        if figures.embedded
        else [f"The same with an embedder: {figures.embedder}."]
    )
    lines = [
        machine_line(),
        "",
        f"The {figures.split} slices.",
        "",
        "Each long source compressed to half its tokens, BM25 (quote mode):",
        "",
        *half_table(figures.half, sets),
        "",
        *embedded,
        "",
        f"Default allowance, {LONG_SOURCES} long sources, one holding the answer:",
        "",
        *rescue_table(figures.rescue, sets),
        "",
        f"Plan time, quote mode, default allowance, BM25, {times[0].sources} sources over "
        "budget (one run each):",
        "",
        *plan_table(times),
        "",
        f"Doubling the text: {ratio:.2f}x the time (target <= {TARGET_GROWTH:g}x: "
        f"{'yes' if ratio <= TARGET_GROWTH else 'NO'}).",
    ]
    return "\n".join(lines)


def as_json(figures: Figures) -> dict[str, Any]:
    """The figures and the questions each target missed, for ``benchmarks/results/``."""

    def summary(cases: Sequence[HalfCase]) -> dict[str, Any]:
        return {
            name: {
                "questions": len(group),
                "kept": sum(c.kept for c in group),
                "in_request": sum(c.in_request for c in group),
                "median_whole_tokens": statistics.median(c.whole_tokens for c in group),
                "median_sent_tokens": statistics.median(c.sent_tokens for c in group),
                "missed": [c.id for c in group if not c.kept],
            }
            for name, group in by_set(cases, figures.sets)
            if group
        }

    rescue = {
        name: {
            "questions": len(group),
            "omitted_today": sum(c.omitted_today for c in group),
            "sent_today_of_omitted": sum(c.today for c in group if c.omitted_today),
            "kept_of_omitted": sum(c.kept for c in group if c.omitted_today),
            "kept_of_all": sum(c.kept for c in group),
            "missed": [c.id for c in group if c.omitted_today and not c.kept],
        }
        for name, group in by_set(figures.rescue, figures.sets)
        if group
    }
    return {
        "machine": machine_line(),
        "split": figures.split,
        "half_budget_bm25": summary(figures.half),
        "embedder": figures.embedder,
        "half_budget_embedder": summary(figures.embedded),
        "rescue_default_budget": rescue,
        "plan_time": [asdict(t) for t in figures.plan],
        "plan_time_growth": growth(figures.plan),
    }


def parse_sets(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names or any(name not in SETS for name in names) or len(set(names)) != len(names):
        msg = f"give distinct sets from {', '.join(SETS)}, comma-separated"
        raise argparse.ArgumentTypeError(msg)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=parse_sets, default=list(SETS), help="nq-open,clapnq")
    parser.add_argument(
        "--split",
        choices=("tune", "report"),
        default="report",
        help="the slices measured: tune (where the rule's choices are made) or report (default)",
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N questions per set")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the first {QUICK_QUESTIONS} questions per set; plan time on "
        f"{QUICK_PLAN[0]} small sources",
    )
    parser.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        help="the sentence-transformers model measured from the local cache, where "
        f"sentence-transformers is importable (default {DEFAULT_EMBEDDER}); else reported "
        "as not installed",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    figures = measure(args)
    print(render(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(as_json(figures), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
