"""Framework overhead of ``answer_from_evidence`` with an instant model.

Measures everything the library does around the model call (checking the request, packing,
rendering the prompt and schema, the model-call plumbing, parsing the ledger and verifying
every citation) with a model whose ``generate`` returns a prepared ledger at once. The
``Evidence`` objects are built once, outside the timed region.

Scenarios:

- ``8 x 2 KB``: eight sources of about 2,000 characters of pseudo-prose; 4 facts x 2
  citations quoting whole sentences.
- ``64 sources, full 32,768-token budget``: 64 sources that together nearly fill
  ``max_context_tokens=32768`` under the default estimator; 32 facts x 8 citations, each
  quoting one of the last sentences of its source (the worst case for the quote search).

And the stream (``stream_answer_from_evidence``) over the same 64 sources, with a reply of
nearly 131,072 characters (32 facts x 8 citations of long quotes):

- its cost against ``judge(plan, response)`` on the same text: the reply streamed in
  4-character pieces, delivered in memory through the worker queue (target: at most 2x);
- how long after the piece that closes a fact its ``FactEvent`` comes: the pieces paced, as a
  fast provider sends them (target: 50 ms at p99).

Run from the workspace root::

    uv run python benchmarks/core_overhead.py [--repeat N] [--quick]

It prints the Python version and platform, then a Markdown table. Missed targets show ``NO``
in the ``met`` column; the exit code is 0 either way.
"""

import argparse
import gc
import json
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from _common import InstantModel, machine_line, p90, prose_sentence, require, run_flags

from evidence_first import (
    Evidence,
    EvidenceAnswer,
    FactEvent,
    ModelRequest,
    ModelResponse,
    answer_from_evidence,
)
from evidence_first import estimate_tokens as default_estimate_tokens
from evidence_first._engine.entry_points import judge
from evidence_first._engine.plan import AnswerPlan, plan_answer
from evidence_first._engine.streaming import stream_plan
from evidence_first._reading.ledger_stream import FactRead, LedgerScanner
from evidence_first._sending.options import AnswerOptions
from evidence_first._sending.prompt import serialize_source

QUESTION = "What do the field notes say about the survey of the northern valley?"


def grow_source(
    source_id: str, rng: random.Random, fits: Callable[[Evidence], bool]
) -> tuple[Evidence, list[str]]:
    """Append sentences while ``fits`` holds; return the source and its sentences."""
    sentences: list[str] = []
    evidence = Evidence(id=source_id, text="")
    while True:
        sentence = prose_sentence(rng)
        candidate = Evidence(id=source_id, text=" ".join([*sentences, sentence]))
        if not fits(candidate):
            return evidence, sentences
        sentences.append(sentence)
        evidence = candidate


def packed_cost(evidence: Evidence) -> int:
    """What the packer charges for a source under the default estimator."""
    return default_estimate_tokens(serialize_source(evidence)) + 2


def make_ledger(citations: list[list[tuple[str, str]]]) -> str:
    """A valid, answered ledger: one fact per list of ``(source_id, quote)`` pairs."""
    facts = [
        {
            "subject": "survey",
            "relation": f"is described in note {index}",
            "object": "the northern valley",
            "citations": [{"source_id": sid, "quote": quote} for sid, quote in pairs],
        }
        for index, pairs in enumerate(citations)
    ]
    ledger = {
        "facts": facts,
        "answer": "The survey team measured the northern valley and recorded its roads.",
        "inference": None,
        "missing_evidence": [],
    }
    return json.dumps(ledger, ensure_ascii=False)


def unique_quote(evidence: Evidence, quote: str) -> str:
    """Check that ``quote`` occurs exactly once, so the search cannot stop early."""
    require(evidence.text.find(quote) == evidence.text.rfind(quote) >= 0, "quote not unique")
    return quote


@dataclass(frozen=True)
class Scenario:
    name: str
    sources: list[Evidence]
    model: InstantModel
    options: dict[str, int]
    expected_citations: int
    target_ms: float
    repeat: int
    min_sources_tokens: int = 0

    def run_once(self) -> EvidenceAnswer:
        return answer_from_evidence(QUESTION, self.sources, self.model, **self.options)

    def check(self, answer: EvidenceAnswer) -> None:
        require(answer.status == "answered", f"{self.name}: status {answer.status}")
        require(len(answer.used_source_ids) == len(self.sources), f"{self.name}: not all sent")
        require(
            verified_citations(answer) == self.expected_citations,
            f"{self.name}: {verified_citations(answer)} citations verified",
        )
        require(
            answer.budget.sources_tokens >= self.min_sources_tokens,
            f"{self.name}: sources use only {answer.budget.sources_tokens} tokens",
        )


def small_scenario(repeat: int) -> Scenario:
    """8 sources of about 2,000 characters; 4 facts x 2 citations."""
    rng = random.Random(8)
    sources: list[Evidence] = []
    sentences: list[list[str]] = []
    for index in range(8):
        evidence, parts = grow_source(f"note-{index}", rng, lambda e: len(e.text) <= 2000)
        sources.append(evidence)
        sentences.append(parts)
    citations = [
        [
            (sources[k].id, unique_quote(sources[k], rng.choice(sentences[k])))
            for k in (2 * fact, 2 * fact + 1)
        ]
        for fact in range(4)
    ]
    return Scenario(
        name="8 x 2 KB",
        sources=sources,
        model=InstantModel(make_ledger(citations)),
        # The default 2,048-token allowance would hold only four of these sources.
        options={"max_context_tokens": 8192},
        expected_citations=8,
        target_ms=2.0,
        repeat=repeat,
    )


def large_scenario(repeat: int) -> Scenario:
    """64 sources filling a 32,768-token allowance; 32 facts x 8 citations near the ends."""
    max_context_tokens = 32_768
    per_source = max_context_tokens // 64
    rng = random.Random(64)
    sources: list[Evidence] = []
    sentences: list[list[str]] = []
    for index in range(64):
        evidence, parts = grow_source(
            f"doc-{index:02d}", rng, lambda e: packed_cost(e) <= per_source
        )
        sources.append(evidence)
        sentences.append(parts)
    # Citation n of 256 quotes source n % 64; each source's four quotes are its last sentences.
    citations = [
        [
            (sources[n % 64].id, unique_quote(sources[n % 64], sentences[n % 64][-1 - n // 64]))
            for n in range(8 * fact, 8 * fact + 8)
        ]
        for fact in range(32)
    ]
    return Scenario(
        name="64 sources, full 32,768-token budget, 32 facts x 8 citations",
        sources=sources,
        model=InstantModel(make_ledger(citations)),
        options={
            "max_context_tokens": max_context_tokens,
            "max_output_tokens": 8192,
            "max_response_chars": 131_072,
        },
        expected_citations=256,
        target_ms=20.0,
        repeat=repeat,
        min_sources_tokens=math.ceil(0.9 * max_context_tokens),
    )


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    sources_sent: int
    citations: int
    timings_ms: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.timings_ms)

    @property
    def p90(self) -> float:
        return p90(self.timings_ms)

    @property
    def met(self) -> bool:
        return self.median < self.scenario.target_ms


def measure(scenario: Scenario, warmup: int) -> Result:
    """Warm up, then time ``scenario.repeat`` calls, checking every answer outside the timing."""
    for _ in range(warmup):
        scenario.check(scenario.run_once())
    timings: list[float] = []
    answer = None
    for _ in range(scenario.repeat):
        start = time.perf_counter()
        answer = scenario.run_once()
        timings.append((time.perf_counter() - start) * 1000)
        scenario.check(answer)
    assert answer is not None
    return Result(scenario, len(answer.used_source_ids), verified_citations(answer), timings)


def verified_citations(answer: EvidenceAnswer) -> int:
    return sum(check.verdict == "verified" for check in answer.citation_checks)


def render(results: list[Result]) -> str:
    lines = [
        machine_line(),
        "",
        "| scenario | sources sent | citations verified | median ms | p90 ms | target | met |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    lines.extend(
        f"| {r.scenario.name} | {r.sources_sent} | {r.citations} | {r.median:.2f} "
        f"| {r.p90:.2f} | < {r.scenario.target_ms:g} ms | {'yes' if r.met else 'NO'} |"
        for r in results
    )
    lines.append("")
    lines.extend(
        f"{r.scenario.name}: min {min(r.timings_ms):.2f} ms over {len(r.timings_ms)} runs"
        for r in results
    )
    return "\n".join(lines)


# --- the stream ---

STREAM_PIECE_CHARS = 4
STREAM_TARGET_RATIO = 2.0
FACT_EVENT_TARGET_MS = 50.0
# A fast provider's pace for the latency run: far quicker than any model writes.
PACED_PIECE_SECONDS = 0.0002


def long_reply(sources: list[Evidence], limit: int) -> str:
    """32 facts x 8 citations of the 64 sources, each quote as long as fits under ``limit``."""
    for quote_chars in range(600, 50, -10):
        citations = [
            [
                (sources[n % 64].id, long_quote(sources[n % 64], n // 64, quote_chars))
                for n in range(8 * fact, 8 * fact + 8)
            ]
            for fact in range(32)
        ]
        reply = make_ledger(citations)
        if len(reply) <= limit:
            return reply
    raise SystemExit("no reply fits")


def long_quote(source: Evidence, index: int, chars: int) -> str:
    """The ``chars`` characters of ``source`` from its ``index``-th sentence on."""
    start = 0
    for _ in range(index):
        start = source.text.index(". ", start) + 2
    return unique_quote(source, source.text[start : start + chars].rstrip())


class PiecesModel:
    """Streams a prepared reply in pieces; paced, it notes when each piece was handed on."""

    def __init__(self, reply: str, pause: float = 0.0) -> None:
        self.pieces = [
            reply[at : at + STREAM_PIECE_CHARS] for at in range(0, len(reply), STREAM_PIECE_CHARS)
        ]
        self.pause = pause
        self.sent_at: list[float] = []
        self.reply = reply

    def generate(self, request: ModelRequest) -> str:
        return self.reply

    def stream(self, request: ModelRequest) -> object:
        if not self.pause:
            yield from self.pieces
            return
        for piece in self.pieces:
            time.sleep(self.pause)
            self.sent_at.append(time.perf_counter())
            yield piece


def closing_pieces(reply: str) -> list[int]:
    """The index of the piece that closes each fact, fact by fact."""
    scanner, closes = LedgerScanner(), []
    for index in range(0, len(reply), STREAM_PIECE_CHARS):
        items = scanner.feed(reply[index : index + STREAM_PIECE_CHARS])
        closes += [index // STREAM_PIECE_CHARS for item in items if isinstance(item, FactRead)]
    return closes


@dataclass(frozen=True)
class StreamResult:
    reply_chars: int
    judge_ms: list[float]
    stream_ms: list[float]
    fact_latency_ms: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.stream_ms) / statistics.median(self.judge_ms)

    @property
    def latency_p99(self) -> float:
        ordered = sorted(self.fact_latency_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def stream_plan_for(reply: str, sources: list[Evidence]) -> AnswerPlan:
    options = AnswerOptions(
        max_context_tokens=32_768, max_output_tokens=8192, max_response_chars=131_072
    )
    return plan_answer(options, QUESTION, sources, PiecesModel(reply))


def streamed(
    plan: AnswerPlan, model: PiecesModel
) -> tuple[EvidenceAnswer, list[tuple[int, float]]]:
    """Stream the plan; each fact event's index and arrival time, and the result."""
    arrivals: list[tuple[int, float]] = []
    final = None
    for item in stream_plan(plan, model):
        if isinstance(item, FactEvent):
            arrivals.append((item.index, time.perf_counter()))
        elif isinstance(item, EvidenceAnswer):
            final = item
    assert final is not None
    return final, arrivals


def measure_stream(repeat: int, paced_runs: int) -> StreamResult:
    """Judge against stream on the same reply, then the paced fact-event latency."""
    sources = large_scenario(1).sources
    reply = long_reply(sources, 131_072)
    plan = stream_plan_for(reply, sources)
    expected = judge(plan, ModelResponse(text=reply))
    require(expected.status == "answered", f"the long reply is {expected.status}")
    judge_ms, stream_ms = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        judge(plan, ModelResponse(text=reply))
        judge_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        final, _ = streamed(plan, PiecesModel(reply))
        stream_ms.append((time.perf_counter() - start) * 1000)
        require(final.as_dict() == expected.as_dict(), "the stream's result differs")
    closes, latency = closing_pieces(reply), []
    for _ in range(paced_runs):
        model = PiecesModel(reply, pause=PACED_PIECE_SECONDS)
        _, arrivals = streamed(plan, model)
        latency += [(at - model.sent_at[closes[index]]) * 1000 for index, at in arrivals]
    return StreamResult(len(reply), judge_ms, stream_ms, latency)


def render_stream(result: StreamResult) -> str:
    judge_ms, stream_ms = statistics.median(result.judge_ms), statistics.median(result.stream_ms)
    ratio_met = "yes" if result.ratio <= STREAM_TARGET_RATIO else "NO"
    latency_met = "yes" if result.latency_p99 <= FACT_EVENT_TARGET_MS else "NO"
    return "\n".join(
        [
            "",
            f"The stream: a {result.reply_chars:,}-character reply (32 facts x 8 citations), "
            f"{STREAM_PIECE_CHARS}-character pieces",
            "",
            "| measure | median ms | target | met |",
            "|---|---:|---|---|",
            f"| `judge(plan, response)` on the whole reply | {judge_ms:.1f} | | |",
            f"| the stream, pieces in memory through the worker queue | {stream_ms:.1f} "
            f"({result.ratio:.2f}x) | at most {STREAM_TARGET_RATIO:g}x | {ratio_met} |",
            f"| a fact's event after the piece that closes it, p99 over "
            f"{len(result.fact_latency_ms)} facts (paced) | {result.latency_p99:.2f} "
            f"| at most {FACT_EVENT_TARGET_MS:g} ms | {latency_met} |",
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return run_flags(
        argv,
        argparse.ArgumentParser(description=__doc__.splitlines()[0]),
        repeat_help="timed runs per scenario (default: 200 small, 50 large)",
        quick_help="a few runs only, as a smoke test",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    small_repeat, large_repeat, warmup = (3, 2, 1) if args.quick else (200, 50, 10)
    if args.repeat is not None:
        small_repeat = large_repeat = args.repeat
    results: list[Result] = []
    for build, repeat in ((small_scenario, small_repeat), (large_scenario, large_repeat)):
        gc.collect()
        results.append(measure(build(repeat), warmup))
    print(render(results))
    gc.collect()
    print(render_stream(measure_stream(*((2, 1) if args.quick else (15, 3)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
