"""Scale and memory: the largest request the contract allows, and the largest ledger to verify.

Scenarios, each in ASCII prose and in mixed-script text (English words with accented Latin and
Chinese words, all in the Basic Multilingual Plane, so a character is one UTF-16 unit and
Python stores the text at 2 bytes per character):

- ``a``: 64 sources of exactly 262,144 UTF-16 units each (the per-source limit; about 16.8
  million characters in all) offered with ``max_context_tokens=32768``. Timed: the public
  ``answer_from_evidence`` call with an instant model, which checks the request, then
  serializes, estimates and packs every source. A single source is larger than the whole
  budget, so every one is omitted ``over_budget`` and the model is never called.
- ``b``: 64 sources that together nearly fill the 32,768-token budget under the default
  estimator, and a ledger of 32 facts x 8 citations, each quoting one of the last sentences of
  its source (the worst case for the quote search). Timed: ``judge(plan, reply)`` (stages 0
  to 5: size check, JSON parsing, schema, locating every quote with its code-point, UTF-16 and
  UTF-8 offsets, the citation flags, consistency), on a plan built once outside the timing.
- ``c``: the same ledger over 64 sources of 262,144 units each, all sent (a caller's
  ``token_counter`` counts each source as 1 token), its quotes near the ends of their sources:
  verification with every citation's flags (the sentences around each cited span, the
  source's status, the fact's words), where a flag computed from whole sources would cost
  seconds. Its stall column is the async entry's, the model answering at once.
- ``d``: one source of 262,144 units, a cited clause followed by a run of spaces (or of
  ideographic spaces, U+3000) with no sentence end or line break, the shape that once made the
  sentence cut backtrack over the run at every position of it (66.5 s in quote mode). Timed:
  the public ``answer_from_evidence`` call with an instant model whose ledger cites the clause,
  in quote mode and in passage mode (where the source is cut into passages at planning); and,
  for ``d: an answer``, a reply whose answer holds a run of 131,000 spaces after its marker
  under ``max_response_chars=131072`` (the marker search). Each once more through
  ``aanswer_from_evidence`` for its event-loop stall.

Memory is measured in a fresh child process per scenario (this script with a hidden
``--measure`` flag): the child builds the input, collects garbage, reads its resident set size
(``VmRSS``) as the baseline and resets the kernel's high-water mark (writing ``5`` to
``/proc/self/clear_refs``), then runs the scenario (one warm-up run, then the timed runs) and
reads the high-water mark (``VmHWM``). The peak above baseline is ``VmHWM - baseline``. The
input size is the memory of the source texts as Python holds them (``sys.getsizeof`` of each
``str``); their UTF-8 size is shown too. Targets: (a) under 2 s, with a peak at most 3x the
input size; (b) under 50 ms; (c) and (d) under 100 ms, and the event loop never held for
50 ms.

Run from the workspace root (Linux only, for ``/proc``)::

    uv run python benchmarks/scale.py [--repeat N] [--quick]

It prints the Python version and platform, then a Markdown table. Missed targets show ``NO``
in the ``met`` column; the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import WORDS, InstantModel, machine_line, prose_sentence, require, run_flags

from evidence_first import (
    CitationMode,
    Evidence,
    ModelResponse,
    aanswer_from_evidence,
    answer_from_evidence,
)
from evidence_first import estimate_tokens as default_estimate_tokens
from evidence_first._engine.entry_points import judge
from evidence_first._engine.plan import plan_answer
from evidence_first._sending.prompt import serialize_source
from evidence_first.adapters import AnswerOptions

QUESTION = "What do the field notes say about the survey of the northern valley?"
MAX_UNITS = 262_144
MAX_CONTEXT_TOKENS = 32_768
TARGET_A_MS = 2000.0
TARGET_B_MS = 50.0
TARGET_C_MS = 100.0
TARGET_STALL_MS = 100.0
TARGET_C_STALL_MS = 50.0
TARGET_MEMORY_RATIO = 3.0

# Accented Latin and Chinese words, all in the Basic Multilingual Plane.
_OTHER_SCRIPT_WORDS = """
café Zürich naïve façade São Łódź Ærø señor déjà crème 河流 山谷 调查 北方 桥梁 村庄 地图 报告
工程师 农民 委员会 冬天 夏天 石头 木材 港口 磨坊 车站 边界 测量 记录
"""
OTHER_SCRIPTS = tuple(_OTHER_SCRIPT_WORDS.split())
ASCII = "ASCII prose"
MIXED = "mixed-script text"
SPACES = "a run of spaces"
IDEOGRAPHIC = "a run of U+3000"
RUN_OF = {SPACES: " ", IDEOGRAPHIC: "\u3000"}
CLAUSE = "The field notes say the survey team measured the northern valley and its roads"


# --- Inputs ----------------------------------------------------------------------------------


def vocabulary(kind: str) -> tuple[str, ...]:
    # Mixed: about three words in ten come from the other scripts.
    return WORDS if kind == ASCII else WORDS + OTHER_SCRIPTS


def limit_sized_sources(count: int, kind: str) -> list[Evidence]:
    """``count`` distinct sources of exactly 262,144 UTF-16 units, from shuffled sentences."""
    rng = random.Random(MAX_UNITS)
    words = vocabulary(kind)
    pool = [prose_sentence(rng, words) for _ in range(4000)]
    sources: list[Evidence] = []
    for index in range(count):
        parts: list[str] = []
        length = 0
        while length <= MAX_UNITS:
            sentence = rng.choice(pool)
            parts.append(sentence)
            length += len(sentence) + 1
        # Every character is in the BMP, so characters are UTF-16 units.
        text = " ".join(parts)[:MAX_UNITS]
        require(len(text.encode("utf-16-le")) // 2 == MAX_UNITS, "a source is not at the limit")
        sources.append(Evidence(id=f"big-{index:02d}", text=text))
    return sources


def packed_cost(evidence: Evidence) -> int:
    """What the packer charges for a source under the default estimator."""
    return default_estimate_tokens(serialize_source(evidence)) + 2


def grow_source(
    source_id: str, rng: random.Random, words: Sequence[str], max_cost: int
) -> tuple[Evidence, list[str]]:
    """Append sentences while the source's packed cost stays within ``max_cost``."""
    sentences: list[str] = []
    evidence = Evidence(id=source_id, text="")
    while True:
        sentence = prose_sentence(rng, words)
        candidate = Evidence(id=source_id, text=" ".join([*sentences, sentence]))
        if packed_cost(candidate) > max_cost:
            return evidence, sentences
        sentences.append(sentence)
        evidence = candidate


def budget_filling_sources(
    count: int, max_context_tokens: int, kind: str
) -> tuple[list[Evidence], list[list[str]]]:
    """``count`` sources that share ``max_context_tokens`` evenly, and their sentences."""
    rng = random.Random(count)
    words = vocabulary(kind)
    grown = [
        grow_source(f"doc-{index:02d}", rng, words, max_context_tokens // count)
        for index in range(count)
    ]
    return [evidence for evidence, _ in grown], [sentences for _, sentences in grown]


def ledger_citing_the_ends(
    sources: Sequence[Evidence], sentences: Sequence[Sequence[str]], facts: int
) -> str:
    """A valid, answered ledger: ``facts`` facts x 8 citations, quoting the last sentences.

    Citation ``n`` quotes source ``n % len(sources)``, walking back from its last sentence, so
    the quotes sit near the ends of their sources; each occurs once in its source.
    """
    count = len(sources)
    items = []
    for fact in range(facts):
        citations = []
        for n in range(8 * fact, 8 * fact + 8):
            source, quote = sources[n % count], sentences[n % count][-1 - n // count]
            text = source.text
            require(text.find(quote) == text.rfind(quote) >= 0, "quote not unique")
            citations.append({"source_id": source.id, "quote": quote})
        items.append(
            {
                "subject": "survey",
                "relation": f"is described in note {fact}",
                "object": "the northern valley",
                "citations": citations,
            }
        )
    ledger = {
        "facts": items,
        "answer": "The survey team measured the northern valley and recorded its roads.",
        "inference": None,
        "missing_evidence": [],
    }
    return json.dumps(ledger, ensure_ascii=False)


# --- Scenarios (run in the child process) ----------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """How big a run is: the full sizes, or a tiny configuration for ``--quick``."""

    big_sources: int
    budget_sources: int
    budget_tokens: int
    facts: int
    run_units: int  # the whitespace-run source's size, and about its answer's run


FULL = Sizes(
    big_sources=64,
    budget_sources=64,
    budget_tokens=MAX_CONTEXT_TOKENS,
    facts=32,
    run_units=MAX_UNITS,
)
QUICK = Sizes(big_sources=4, budget_sources=8, budget_tokens=4096, facts=4, run_units=8192)


@dataclass(frozen=True)
class Prepared:
    """A scenario's input, and the call to time (which checks its own result)."""

    texts: list[str]
    run: Callable[[], dict[str, int]]
    arun: Callable[[], Awaitable[None]] | None = None  # the same call through the async entry


def prepare_pack(sizes: Sizes, kind: str, mode: CitationMode = "quote") -> Prepared:
    sources = limit_sized_sources(sizes.big_sources, kind)
    model = InstantModel(
        '{"facts": [], "answer": null, "inference": null, "missing_evidence": ["anything"]}'
    )

    def run() -> dict[str, int]:
        answer = answer_from_evidence(
            QUESTION, sources, model, citation_mode=mode, max_context_tokens=MAX_CONTEXT_TOKENS
        )
        reasons = list(answer.omissions.values())
        return {
            "offered": len(sources),
            "sent": len(answer.used_source_ids),
            "over_budget": reasons.count("over_budget"),
            "citations": 0,
        }

    async def arun() -> None:
        await aanswer_from_evidence(
            QUESTION, sources, model, citation_mode=mode, max_context_tokens=MAX_CONTEXT_TOKENS
        )

    return Prepared([source.text for source in sources], run, arun)


def prepare_pack_passages(sizes: Sizes, kind: str) -> Prepared:
    return prepare_pack(sizes, kind, "passage")


async def longest_stall_ms(call: Callable[[], Awaitable[None]]) -> float:
    """The longest the event loop went without running a 1 ms ticker while ``call`` ran."""
    longest = 0.0
    done = False

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)  # let the ticker start
    await call()
    done = True
    await ticker
    return longest * 1000


def prepare_verify(sizes: Sizes, kind: str) -> Prepared:
    sources, sentences = budget_filling_sources(sizes.budget_sources, sizes.budget_tokens, kind)
    ledger = ledger_citing_the_ends(sources, sentences, sizes.facts)
    options = AnswerOptions(
        max_context_tokens=sizes.budget_tokens, max_output_tokens=8192, max_response_chars=131_072
    )
    plan = plan_answer(options, QUESTION, sources, InstantModel(ledger))
    require(len(plan.packed.sent) == len(sources), "not every source was packed")
    require(plan.budget.sources_tokens >= 0.9 * sizes.budget_tokens, "the budget is not full")
    response = ModelResponse(text=ledger)

    def run() -> dict[str, int]:
        answer = judge(plan, response)
        require(answer.status == "answered", f"status {answer.status}")
        verified = sum(check.verdict == "verified" for check in answer.citation_checks)
        require(verified == 8 * sizes.facts, f"{verified} citations verified")
        return {
            "offered": len(sources),
            "sent": len(sources),
            "over_budget": 0,
            "citations": verified,
        }

    return Prepared([source.text for source in sources], run)


def ledger_citing_near_the_ends(sources: Sequence[Evidence], facts: int) -> str:
    """A valid, answered ledger: ``facts`` x 8 citations of 48-character spans near the ends.

    Citation ``n`` quotes source ``n % len(sources)``, ``100 * (n // len(sources))`` characters
    before its end, so the quote search crosses almost the whole source.
    """
    count = len(sources)
    citations = []
    for n in range(8 * facts):
        text = sources[n % count].text
        end = len(text) - 100 * (n // count)
        citations.append({"source_id": sources[n % count].id, "quote": text[end - 48 : end]})
    items = [
        {
            "subject": "survey",
            "relation": f"is described in note {fact}",
            "object": "the northern valley",
            "citations": citations[8 * fact : 8 * fact + 8],
        }
        for fact in range(facts)
    ]
    ledger = {"facts": items, "answer": "It is described.", "inference": None}
    return json.dumps({**ledger, "missing_evidence": []}, ensure_ascii=False)


def prepare_verify_limit(sizes: Sizes, kind: str) -> Prepared:
    sources = limit_sized_sources(sizes.big_sources, kind)
    ledger = ledger_citing_near_the_ends(sources, min(sizes.facts, len(sources)))
    settings = {
        "max_context_tokens": MAX_CONTEXT_TOKENS,
        "max_output_tokens": 8192,
        "max_response_chars": 131_072,
        "token_counter": lambda text: 1,  # every source fits: the sizes are the contract's
    }
    model = InstantModel(ledger)
    plan = plan_answer(AnswerOptions(**settings), QUESTION, sources, model)
    require(len(plan.packed.sent) == len(sources), "not every source was packed")
    response = ModelResponse(text=ledger)
    expected = 8 * min(sizes.facts, len(sources))

    def run() -> dict[str, int]:
        answer = judge(plan, response)
        require(answer.status == "answered", f"status {answer.status}")
        verified = sum(check.verdict == "verified" for check in answer.citation_checks)
        require(verified == expected, f"{verified} citations verified")
        return {
            "offered": len(sources),
            "sent": len(sources),
            "over_budget": 0,
            "citations": verified,
        }

    async def arun() -> None:
        answer = await aanswer_from_evidence(QUESTION, sources, model, **settings)
        require(answer.status == "answered", f"status {answer.status}")

    return Prepared([source.text for source in sources], run, arun)


def run_ledger(citation: dict[str, object], answer: str = "It is recorded [F1].") -> str:
    fact = {"subject": "survey", "relation": "recorded", "object": "the northern valley"}
    ledger = {"facts": [{**fact, "citations": [citation]}], "answer": answer, "inference": None}
    return json.dumps({**ledger, "missing_evidence": []}, ensure_ascii=False)


def prepare_run(sizes: Sizes, kind: str, mode: CitationMode = "quote") -> Prepared:
    """A source of ``sizes.run_units`` units: the cited clause, then one run of whitespace."""
    tail = "end of the notes"
    run = RUN_OF[kind] * (sizes.run_units - len(CLAUSE) - len(tail))
    source = Evidence(id="notes", text=CLAUSE + run + tail)
    require(len(source.text.encode("utf-16-le")) // 2 == sizes.run_units, "not at the size")
    citation: dict[str, object] = {"source_id": "notes", "quote": CLAUSE}
    if mode == "passage":
        citation = {"source_id": "notes", "passages": ["notes#1"], "quote": None}
    model = InstantModel(run_ledger(citation))
    settings = {"citation_mode": mode, "token_counter": lambda text: 1}

    def run_call() -> dict[str, int]:
        answer = answer_from_evidence(QUESTION, [source], model, **settings)
        require(answer.status == "answered", f"status {answer.status}")
        return {"offered": 1, "sent": 1, "over_budget": 0, "citations": 1}

    async def arun() -> None:
        answer = await aanswer_from_evidence(QUESTION, [source], model, **settings)
        require(answer.status == "answered", f"status {answer.status}")

    return Prepared([source.text], run_call, arun)


def prepare_run_passages(sizes: Sizes, kind: str) -> Prepared:
    return prepare_run(sizes, kind, "passage")


def prepare_answer_run(sizes: Sizes, kind: str) -> Prepared:
    """An answer whose marker is followed by a run of whitespace and one more word."""
    source = Evidence(id="notes", text=CLAUSE + ". The roads were mapped.")
    answer = "It is recorded [F1]." + RUN_OF[kind] * (sizes.run_units // 2 - 1000) + "x"
    model = InstantModel(run_ledger({"source_id": "notes", "quote": CLAUSE}, answer))
    settings = {"max_response_chars": 131_072}

    def run_call() -> dict[str, int]:
        result = answer_from_evidence(QUESTION, [source], model, **settings)
        require(result.status == "answered", f"status {result.status}")
        return {"offered": 1, "sent": 1, "over_budget": 0, "citations": 1}

    async def arun() -> None:
        result = await aanswer_from_evidence(QUESTION, [source], model, **settings)
        require(result.status == "answered", f"status {result.status}")

    return Prepared([source.text, answer], run_call, arun)


SCENARIOS: dict[str, tuple[str, Callable[[Sizes, str], Prepared], str]] = {
    "a-ascii": ("a: check, estimate and pack", prepare_pack, ASCII),
    "a-mixed": ("a: check, estimate and pack", prepare_pack, MIXED),
    "a-passage-ascii": ("a: the same, passage mode", prepare_pack_passages, ASCII),
    "a-passage-mixed": ("a: the same, passage mode", prepare_pack_passages, MIXED),
    "b-ascii": ("b: verify the ledger", prepare_verify, ASCII),
    "b-mixed": ("b: verify the ledger", prepare_verify, MIXED),
    "c-ascii": ("c: verify, maximum-size sources", prepare_verify_limit, ASCII),
    "c-mixed": ("c: verify, maximum-size sources", prepare_verify_limit, MIXED),
    "d-spaces": ("d: a whitespace run in a source", prepare_run, SPACES),
    "d-ideographic": ("d: a whitespace run in a source", prepare_run, IDEOGRAPHIC),
    "d-passage-spaces": ("d: the same, passage mode", prepare_run_passages, SPACES),
    "d-passage-ideographic": ("d: the same, passage mode", prepare_run_passages, IDEOGRAPHIC),
    "d-answer-spaces": ("d: a whitespace run in the answer", prepare_answer_run, SPACES),
    "d-answer-ideographic": ("d: a whitespace run in the answer", prepare_answer_run, IDEOGRAPHIC),
}


def _proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    msg = f"/proc/self/status has no {field}"
    raise RuntimeError(msg)


def measure_here(key: str, quick: bool, repeat: int) -> dict[str, float | int | str]:
    """Build the input, then time the scenario and track the peak resident set above baseline."""
    _, prepare, kind = SCENARIOS[key]
    prepared = prepare(QUICK if quick else FULL, kind)
    gc.collect()
    baseline_kib = _proc_status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    counts = prepared.run()  # warm-up
    timings: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        prepared.run()
        timings.append((time.perf_counter() - start) * 1000)
    peak_kib = _proc_status_kib("VmHWM")
    stall = -1.0 if prepared.arun is None else asyncio.run(longest_stall_ms(prepared.arun))
    return {
        "stall_ms": stall,
        **counts,
        "input_bytes": sum(sys.getsizeof(text) for text in prepared.texts),
        "input_utf8_bytes": sum(len(text.encode("utf-8")) for text in prepared.texts),
        "characters": sum(len(text) for text in prepared.texts),
        "median_ms": statistics.median(timings),
        "min_ms": min(timings),
        "runs": len(timings),
        "peak_above_baseline_bytes": (peak_kib - baseline_kib) * 1024,
    }


# --- Running the children and reporting ------------------------------------------------------


@dataclass(frozen=True)
class Result:
    key: str
    offered: int
    sent: int
    over_budget: int
    citations: int
    characters: int
    input_bytes: int
    input_utf8_bytes: int
    median_ms: float
    min_ms: float
    runs: int
    peak_above_baseline_bytes: int
    stall_ms: float  # -1 when not measured

    @property
    def scenario(self) -> str:
        return SCENARIOS[self.key][0]

    @property
    def kind(self) -> str:
        return SCENARIOS[self.key][2]

    @property
    def memory_ratio(self) -> float:
        return self.peak_above_baseline_bytes / self.input_bytes

    @property
    def is_pack(self) -> bool:
        return self.key.startswith("a")

    @property
    def target(self) -> str:
        if self.is_pack:
            return (
                f"< {TARGET_A_MS / 1000:g} s, peak <= {TARGET_MEMORY_RATIO:g}x input, "
                f"stall < {TARGET_STALL_MS:g} ms"
            )
        if self.key.startswith(("c", "d")):
            return f"< {TARGET_C_MS:g} ms, stall < {TARGET_C_STALL_MS:g} ms"
        return f"< {TARGET_B_MS:g} ms"

    @property
    def met(self) -> bool:
        if self.is_pack:
            return (
                self.median_ms < TARGET_A_MS
                and self.memory_ratio <= TARGET_MEMORY_RATIO
                and 0 <= self.stall_ms < TARGET_STALL_MS
            )
        if self.key.startswith(("c", "d")):
            return self.median_ms < TARGET_C_MS and 0 <= self.stall_ms < TARGET_C_STALL_MS
        return self.median_ms < TARGET_B_MS


def run_child(key: str, quick: bool, repeat: int) -> Result:
    command = [sys.executable, __file__, "--measure", key, "--repeat", str(repeat)]
    if quick:
        command.append("--quick")
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        msg = f"the {key} measurement failed:\n{completed.stderr}"
        raise RuntimeError(msg)
    return Result(key=key, **json.loads(completed.stdout))


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f}"


def render(results: list[Result]) -> str:
    lines = [
        machine_line(),
        "",
        "| scenario | text | sources offered | sent | omitted over_budget | citations verified "
        "| characters | input MB (str / UTF-8) | median ms | peak above baseline MB "
        "| peak / input | longest event-loop stall, async entry (ms) | target | met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines.extend(
        f"| {r.scenario} | {r.kind} | {r.offered} | {r.sent} | {r.over_budget} | {r.citations} "
        f"| {r.characters:,} | {megabytes(r.input_bytes)} / {megabytes(r.input_utf8_bytes)} "
        f"| {r.median_ms:.2f} | {megabytes(r.peak_above_baseline_bytes)} "
        f"| {f'{r.memory_ratio:.2f}' if r.is_pack else '-'} "
        f"| {f'{r.stall_ms:.1f}' if r.stall_ms >= 0 else '-'} | {r.target} "
        f"| {'yes' if r.met else 'NO'} |"
        for r in results
    )
    lines.append("")
    lines.extend(
        f"{r.scenario}, {r.kind}: min {r.min_ms:.2f} ms over {r.runs} runs" for r in results
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", choices=sorted(SCENARIOS), help=argparse.SUPPRESS)
    return run_flags(
        argv,
        parser,
        repeat_help="timed runs per scenario (default: 5 for a, 50 for b, 10 for c and d)",
        quick_help="tiny inputs, as a smoke test",
    )


def repeats(key: str, quick: bool, override: int | None) -> int:
    if override is not None:
        return override
    if quick:
        return 1
    return {"a": 5, "b": 50, "c": 10, "d": 10}[key[0]]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure_here(args.measure, args.quick, args.repeat or 1)))
        return 0
    results = [
        run_child(key, args.quick, repeats(key, args.quick, args.repeat)) for key in SCENARIOS
    ]
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
