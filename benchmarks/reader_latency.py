"""Where the embedded reader's time goes, question by question.

Each question's exact request, planned by the engine as ``evidence-first demo`` and
``benchmarks/quality.py`` plan it, is posted to the reader's llama.cpp server. Per question:

- prompt tokens, split into those reused from llama.cpp's prompt cache and those read, and the
  time to read them (llama.cpp's ``prompt_ms``: the time to the first token);
- output tokens and the time to write them (``predicted_ms``);
- the rest of the wall time: HTTP, the grammar's set-up, the reply's JSON;
- whether the reply is byte for byte the reply of the request as sent.

Variants isolate one cost each, on a freshly started server per variant so that every pass
meets the same cache: ``sent`` (the request as the engine sends it), ``no-logprobs`` (without
``logprobs``/``top_logprobs``, which the reader's confidence is read from), ``no-schema``
(without ``grammar`` or ``response_format``: no grammar), ``bare`` (neither). As
``LocalModel.generate`` does, a new server restores the system prompt's saved state before
its first question (``local._prompts``). The questions are the demo's (passage mode,
``--min-score`` and output limit as the demo sends them) and the project set's report half
(``--sets``). Server start is timed apart: the weights' check as a start makes it (a record
beside the file vouches for it while it is unchanged), the full SHA-256 a start makes after
assembly or a change, and the load until ``/health``. A last table counts what the
model reads in its own tokens: the system prompt, and each user message with and without the
passages' datamark.

Run: ``uv run python benchmarks/reader_latency.py [--sets demo,report] [--variants
sent,no-logprobs] [--threads N] [--json PATH]``. It prints the machine line and Markdown tables;
``--json`` appends one line per question and variant (timings, token counts, reply digest).
``--compare RUN.jsonl ...`` runs nothing: it sets stored runs' ``sent`` rows side by side (the
code before a change and after it, say, measured one after the other), with each run's replies
compared byte for byte with the first run's. ``--reuse-table 0,64,128`` answers nothing: it
counts, in the model's tokens, the prompt tokens a pass over ``--sets`` (``tune``, the project
set's tune half, included) would read with only the shared prefix reused from the server's
cache (0), and with llama.cpp's chunk reuse (``--cache-reuse``) at each size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from _common import machine_line
from quality import MAX_CONTEXT_TOKENS, load_set, plan_one

from evidence_first import (
    AnswerTextEvent,
    Evidence,
    EvidenceAnswer,
    FactEvent,
    ModelDelta,
    ModelRequest,
    ModelResponse,
)
from evidence_first._engine.plan import AnswerPlan, plan_answer
from evidence_first._engine.streaming import stream_plan
from evidence_first._sending.injection import DEFAULT_DEFENCES, Defences
from evidence_first.adapters import AnswerOptions
from evidence_first.cli import DEMO_MIN_SCORE, RECOMMENDED_MODE, load_demo_corpus
from evidence_first.local import DEFAULT_READER, KNOWN_MODELS, LocalModel
from evidence_first.local._weights import _is_intact, _sha256_of

DEMO_OUTPUT_TOKENS = 512  # the demo's and `ask`'s output limit (cli._CLI_DEFAULTS)
SETS = ("demo", "report")


def _without(*keys: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(body: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in body.items() if key not in keys}

    return edit


VARIANTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "sent": dict,
    "no-logprobs": _without("logprobs", "top_logprobs"),
    "no-schema": _without("response_format", "grammar"),
    "bare": _without("logprobs", "top_logprobs", "response_format", "grammar"),
}


@dataclass(frozen=True)
class Asked:
    """One question's request, as the engine plans it, and its plan."""

    set_name: str
    label: str
    request: ModelRequest
    plan: AnswerPlan | None = None


@dataclass(frozen=True)
class Timing:
    set_name: str
    label: str
    variant: str
    wall_s: float
    cached_tokens: int
    read_tokens: int
    prompt_s: float
    output_tokens: int
    output_s: float
    reply_sha256: str

    @property
    def rest_s(self) -> float:
        return self.wall_s - self.prompt_s - self.output_s


class _Planner:
    """A reader stand-in that declares the reader's profile and is never called."""

    def __init__(self, local: LocalModel) -> None:
        self.profile = local.profile

    def generate(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("planning only")


def demo_questions(local: LocalModel, defences: Defences = DEFAULT_DEFENCES) -> list[Asked]:
    """The demo's model-answered questions, planned as `evidence-first demo` sends them."""
    corpus = load_demo_corpus()
    by_id = {source["id"]: source for source in corpus["sources"]}
    asked = []
    for item in corpus["questions"]:
        if item.get("tiny"):
            continue
        sources = [{**by_id[hit["id"]], "score": hit["score"]} for hit in item["retrieved"]]
        options = AnswerOptions(
            citation_mode=RECOMMENDED_MODE,
            min_score=DEMO_MIN_SCORE,
            max_output_tokens=DEMO_OUTPUT_TOKENS,
            timeout=300.0,
            defences=defences,
        )
        plan = plan_answer(options, item["question"], sources, _Planner(local))
        if plan.request is not None:  # a question with no source left is not sent
            asked.append(Asked("demo", item["question"], plan.request, plan))
    return asked


def project_questions(split: str) -> Callable[[LocalModel, Defences], list[Asked]]:
    """One half of the project set, planned as `quality.py --modes passage` sends it."""

    def planned(local: LocalModel, defences: Defences = DEFAULT_DEFENCES) -> list[Asked]:
        documents: dict[str, Evidence]
        documents, questions = load_set("project")
        asked = []
        for question in questions:
            if question.split != split:
                continue
            plan = plan_one(
                question,
                RECOMMENDED_MODE,
                documents,
                _Planner(local),
                defences=defences,
                max_context_tokens=MAX_CONTEXT_TOKENS,
            )
            assert plan.request is not None
            asked.append(Asked(split, question.id, plan.request, plan))
        return asked

    return planned


def post(base_url: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Post a chat-completions body; the wall time and the server's reply."""
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=900) as reply:
        payload: dict[str, Any] = json.loads(reply.read())
    return time.perf_counter() - started, payload


def timed(local: LocalModel, asked: Asked, variant: str) -> Timing:
    body = VARIANTS[variant](local.reader.body(asked.request))
    # As LocalModel.generate does: a new server first restores the system prompt's saved
    # state, and saves it after its first answer when none was (untimed).
    prompts = local._prompts
    if prompts is not None:
        prompts.before(asked.request.system)
    wall, payload = post(local.base_url, body)
    if prompts is not None:
        prompts.after(asked.request.system)
    timings = payload["timings"]
    reply = payload["choices"][0]["message"]["content"] or ""
    return Timing(
        set_name=asked.set_name,
        label=asked.label,
        variant=variant,
        wall_s=wall,
        cached_tokens=timings.get("cache_n", 0),
        read_tokens=timings["prompt_n"],
        prompt_s=timings["prompt_ms"] / 1000,
        output_tokens=timings["predicted_n"],
        output_s=timings["predicted_ms"] / 1000,
        reply_sha256=hashlib.sha256(reply.encode()).hexdigest(),
    )


@dataclass(frozen=True)
class Start:
    hash_s: float  # the full SHA-256 of the weights: a start after assembly or a change
    check_s: float  # the check a start makes (its record vouches for an unchanged file)
    load_s: float


@contextmanager
def started(name: str, threads: int | None) -> Iterator[tuple[LocalModel, Start]]:
    """A fresh server, its start split into the weights' check and the load until ready."""
    local = LocalModel(name, threads=threads)
    assert local.known is not None
    path = local.model_path()  # assembled, and checked once, before anything is timed
    began = time.perf_counter()
    assert _sha256_of(path) == local.known.sha256
    hashed = time.perf_counter()
    assert _is_intact(path, local.known)
    checked = time.perf_counter()
    with local:
        ready = time.perf_counter()
        # The start checks the weights once more: the load is what is left.
        check = checked - hashed
        yield local, Start(hashed - began, check, (ready - checked) - check)


PLANNERS: dict[str, Callable[[LocalModel, Defences], list[Asked]]] = {
    "demo": demo_questions,
    "report": project_questions("report"),
    "tune": project_questions("tune"),
}


def sent_form_table(local: LocalModel, sets: Sequence[str]) -> str:
    """What the model reads, in the reader's own tokens: the prompt and the datamark's share."""
    lines = [
        "| questions | system prompt tokens | user message tokens (median) | the same "
        "without the datamark (median) | request schema (characters, median) |",
        "|---|---:|---:|---:|---:|",
    ]
    unmarked = Defences(datamark=False)
    for set_name in sets:
        marked = PLANNERS[set_name](local, DEFAULT_DEFENCES)
        plain = PLANNERS[set_name](local, unmarked)
        system = len(local.tokenize(marked[0].request.system))
        users = [len(local.tokenize(asked.request.user)) for asked in marked]
        bare = [len(local.tokenize(asked.request.user)) for asked in plain]
        schema = [len(json.dumps(asked.request.json_schema)) for asked in marked]
        lines.append(
            f"| {set_name} ({len(marked)}) | {system} | {median(users):.0f} "
            f"| {median(bare):.0f} | {median(schema):,.0f} |"
        )
    return "\n".join(lines)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Replied(Protocol):
    """A reply's question and the digest of its text."""

    @property
    def set_name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def reply_sha256(self) -> str: ...


Digests = dict[tuple[str, str], str]


def digests(runs: Iterable[Replied]) -> Digests:
    """Each question's reply digest, by set and label."""
    return {(r.set_name, r.label): r.reply_sha256 for r in runs}


def identical(runs: Sequence[Replied], reference: Digests) -> str:
    """How many of ``runs`` replied byte for byte as ``reference`` did, as "N/M"."""
    same = sum(reference.get((r.set_name, r.label)) == r.reply_sha256 for r in runs)
    return f"{same}/{len(runs)}"


def breakdown_table(rows: list[Timing], variants: Sequence[str]) -> str:
    lines = [
        "| questions | variant | median wall (s) | total wall (s) | prompt tokens: cached "
        "/ read (median) | reading (s, median) | output tokens (median) | writing (s, median) "
        "| rest (s, median) | replies identical to sent |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    sent = digests(r for r in rows if r.variant == "sent")
    for set_name in dict.fromkeys(r.set_name for r in rows):
        for variant in variants:
            runs = [r for r in rows if r.set_name == set_name and r.variant == variant]
            if runs:
                lines.append(breakdown_row(set_name, variant, runs, sent))
    return "\n".join(lines)


def breakdown_row(set_name: str, variant: str, runs: Sequence[Timing], sent: Digests) -> str:
    """One set's questions in one variant: where the time went, and the replies kept."""
    return (
        f"| {set_name} ({len(runs)}) | {variant} | {wall_and_prompt(runs)} "
        f"| {median([r.prompt_s for r in runs]):.1f} "
        f"| {median([r.output_tokens for r in runs]):.0f} "
        f"| {median([r.output_s for r in runs]):.1f} "
        f"| {median([r.rest_s for r in runs]):.2f} | {identical(runs, sent)} |"
    )


def wall_and_prompt(runs: Sequence[Timing]) -> str:
    """The cells a row opens with: median and total wall time, prompt tokens cached / read."""
    return (
        f"{median([r.wall_s for r in runs]):.1f} | {sum(r.wall_s for r in runs):.0f} "
        f"| {median([r.cached_tokens for r in runs]):.0f} / "
        f"{median([r.read_tokens for r in runs]):.0f}"
    )


class Counted(Protocol):
    """A reply's token counts and llama.cpp's times for them."""

    @property
    def read_tokens(self) -> int: ...
    @property
    def prompt_s(self) -> float: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def output_s(self) -> float: ...


def rates(runs: Sequence[Counted]) -> tuple[float, float]:
    """Prompt tokens read and output tokens written per second, over all of ``runs``."""
    read = sum(r.read_tokens for r in runs) / max(sum(r.prompt_s for r in runs), 1e-9)
    wrote = sum(r.output_tokens for r in runs) / max(sum(r.output_s for r in runs), 1e-9)
    return read, wrote


def speed_table(rows: list[Timing], variants: Sequence[str]) -> str:
    lines = [
        "| variant | prompt tokens read /s | output tokens /s |",
        "|---|---:|---:|",
    ]
    for variant in variants:
        runs = [r for r in rows if r.variant == variant]
        read, wrote = rates(runs)
        lines.append(f"| {variant} | {read:.0f} | {wrote:.1f} |")
    return "\n".join(lines)


def compare_table(runs: dict[str, list[Timing]]) -> str:
    """Stored runs' ``sent`` rows side by side, set by set; replies compared with the first."""
    lines = [
        "| questions | run | median wall (s) | total wall (s) | prompt tokens: cached / read "
        "(median) | output tokens (median) | prompt tokens read /s | output tokens /s "
        "| replies identical to the first run |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    sent = {name: [r for r in rows if r.variant == "sent"] for name, rows in runs.items()}
    reference = digests(next(iter(sent.values())))
    for set_name in dict.fromkeys(r.set_name for rows in sent.values() for r in rows):
        for name, rows in sent.items():
            these = [r for r in rows if r.set_name == set_name]
            if these:
                lines.append(compare_row(set_name, name, these, reference))
    return "\n".join(lines)


def compare_row(set_name: str, name: str, runs: Sequence[Timing], reference: Digests) -> str:
    """One set's questions in one stored run: times, speeds, and replies as the first run's."""
    read, wrote = rates(runs)
    return (
        f"| {set_name} ({len(runs)}) | {name} | {wall_and_prompt(runs)} "
        f"| {median([r.output_tokens for r in runs]):.0f} | {read:.0f} | {wrote:.1f} "
        f"| {identical(runs, reference)} |"
    )


def prompt_tokens(local: LocalModel, system: str, user: str | None) -> list[int]:
    """A chat prompt as the server reads it: its chat template applied, then tokenized."""
    messages = [{"role": "system", "content": system}]
    if user is not None:
        messages.append({"role": "user", "content": user})
    body = json.dumps({"messages": messages}).encode("utf-8")
    templated: str = local._post("/apply-template", body)["prompt"]
    return local.tokenize(templated)


def shared_prefix(cached: Sequence[int], prompt: Sequence[int]) -> int:
    count = 0
    for old, new in zip(cached, prompt, strict=False):
        if old != new:
            break
        count += 1
    return count


def reused(cached: Sequence[int], prompt: Sequence[int], chunk: int) -> int:
    """The tokens of ``prompt`` the server takes from ``cached`` instead of reading them.

    The shared prefix, then, with ``chunk`` > 0, llama.cpp's ``--cache-reuse`` scan: from the
    end of the prefix on, each run of at least ``chunk`` tokens that ``cached`` holds at its
    scan position is moved into place, and the scan of ``cached`` skips a token where none
    starts.
    """
    head_c = head_p = taken = shared_prefix(cached, prompt)
    while chunk > 0 and head_c < len(cached) and head_p < len(prompt):
        run = shared_prefix(cached[head_c:], prompt[head_p:])
        if run >= chunk:
            taken += run
            head_c += run
            head_p += run
        else:
            head_c += 1
    return min(taken, len(prompt) - 1)  # the server always reads the last token


def reuse_table(local: LocalModel, sets: Sequence[str], chunks: Sequence[int]) -> str:
    """Prompt tokens a pass would read, with the prefix alone or with chunks reused.

    Each question's prompt is matched, as the server's host-memory prompt cache does, against
    the earlier prompt of the pass that shares the longest prefix with it (the first against
    the system prompt alone, a new server's saved state); then the chunk scan of ``reused``.
    """
    lines = [
        "| questions | chunk (tokens) | prompt tokens read (median) | read in the pass "
        "| prompts with a moved run |",
        "|---|---:|---:|---:|---:|",
    ]
    for set_name in sets:
        asked = PLANNERS[set_name](local, DEFAULT_DEFENCES)
        prompts = [prompt_tokens(local, a.request.system, a.request.user) for a in asked]
        seed = prompt_tokens(local, asked[0].request.system, None)
        for chunk in chunks:
            reads, moved = [], 0
            for index, prompt in enumerate(prompts):
                earlier = [seed, *prompts[:index]]
                best = max(reversed(earlier), key=lambda old: shared_prefix(old, prompt))
                taken = reused(best, prompt, chunk)
                moved += taken > min(shared_prefix(best, prompt), len(prompt) - 1)
                reads.append(len(prompt) - taken)
            lines.append(
                f"| {set_name} ({len(prompts)}) | {chunk or 'prefix only'} "
                f"| {median(reads):.0f} | {sum(reads):,} | {moved} |"
            )
    return "\n".join(lines)


# --- the stream: when verified facts and the answer's text reach a reader ---

FIRST_FACT_TARGET_S = 4.0
AHEAD_TARGET_S = 2.0


@dataclass(frozen=True)
class Streamed:
    """One question streamed: when each thing came, counted from the request."""

    set_name: str
    label: str
    status: str
    first_token_s: float | None
    first_fact_s: float | None
    first_text_s: float | None
    full_s: float
    output_tokens: int
    tokens_before_first_fact: int | None
    stopped_early: bool


class _Clocked:
    """The reader's stream, each piece's arrival time and the output tokens so far noted."""

    def __init__(self, local: LocalModel) -> None:
        self._local = local
        self.profile = local.profile
        self.marks: list[tuple[float, int]] = []
        self.read_to_end = False  # False when the engine stopped reading the reply early

    def generate(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("streamed only")

    def stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
        tokens = 0
        for delta in self._local.stream(request):
            tokens += len(delta.logprobs) if delta.logprobs else int(bool(delta.text))
            self.marks.append((time.perf_counter(), tokens))
            yield delta
        self.read_to_end = True


@dataclass
class _Events:
    """When the first verified fact and the answer's first character came, and the result."""

    first_fact: float | None = None
    first_text: float | None = None
    final: EvidenceAnswer | None = None

    def note(self, item: object, now: float) -> None:
        if isinstance(item, FactEvent) and item.fact is not None:
            self.first_fact = self.first_fact if self.first_fact is not None else now
        elif isinstance(item, AnswerTextEvent) and item.text:
            self.first_text = self.first_text if self.first_text is not None else now
        elif isinstance(item, EvidenceAnswer):
            self.final = item


def streamed(local: LocalModel, asked: Asked) -> Streamed:
    """Stream one planned question through the engine, timing its events."""
    assert asked.plan is not None
    clocked = _Clocked(local)
    events = _Events()
    began = time.perf_counter()
    for item in stream_plan(asked.plan, clocked):
        events.note(item, time.perf_counter() - began)
    assert events.final is not None
    marks = [(at - began, tokens) for at, tokens in clocked.marks]
    before = None
    if events.first_fact is not None:
        before = max((tokens for at, tokens in marks if at <= events.first_fact), default=0)
    return Streamed(
        set_name=asked.set_name,
        label=asked.label,
        status=events.final.status,
        first_token_s=marks[0][0] if marks else None,
        first_fact_s=events.first_fact,
        first_text_s=events.first_text,
        full_s=time.perf_counter() - began,
        output_tokens=marks[-1][1] if marks else 0,
        tokens_before_first_fact=before,
        stopped_early=not clocked.read_to_end,
    )


def stream_pass(args: argparse.Namespace) -> tuple[list[Streamed], int | None]:
    """Each set's questions streamed on one fresh server."""
    rows: list[Streamed] = []
    with started(args.model, args.threads) as (local, _):
        for set_name in args.sets:
            for asked in PLANNERS[set_name](local, DEFAULT_DEFENCES)[: args.limit]:
                row = streamed(local, asked)
                print(
                    f"stream {row.set_name} {row.label[:40]}: {row.full_s:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                if args.json is not None:
                    with args.json.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(asdict(row)) + "\n")
                rows.append(row)
        threads = local.threads
    return rows, threads


def stream_table(rows: Sequence[Streamed], stored: dict[str, int] | None = None) -> str:
    """The stream's figures by set, and the targets on the first fact."""
    lines = [
        "| questions | with a verified fact | first token to first verified fact (median s) "
        "| first verified fact ahead of the full result (median s) | first token to the "
        "answer's first character (median s) | full result (median s) | output tokens before "
        "the first fact (median) | early stops | output tokens they spared |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for set_name in dict.fromkeys(row.set_name for row in rows):
        lines.append(stream_row(set_name, [r for r in rows if r.set_name == set_name], stored))
    return "\n".join(lines)


def stream_row(set_name: str, runs: Sequence[Streamed], stored: dict[str, int] | None) -> str:
    with_fact = [r for r in runs if r.first_fact_s is not None and r.first_token_s is not None]
    to_fact = [_since(r.first_fact_s, r.first_token_s) for r in with_fact]
    ahead = [_since(r.full_s, r.first_fact_s) for r in with_fact]
    texts = [_since(r.first_text_s, r.first_token_s) for r in runs if r.first_text_s is not None]
    before = [r.tokens_before_first_fact or 0 for r in with_fact]
    early = [r for r in runs if r.stopped_early]
    return (
        f"| {set_name}: {len(runs)} | {len(with_fact)} "
        f"| {_s(to_fact)} ({_target(to_fact, at_most=FIRST_FACT_TARGET_S)}) "
        f"| {_s(ahead)} ({_target(ahead, at_least=AHEAD_TARGET_S)}) | {_s(texts)} "
        f"| {_s([r.full_s for r in runs])} | {median(before) if before else '-'} "
        f"| {len(early)} | {_spared(early, stored)} |"
    )


def _since(at: float | None, start: float | None) -> float:
    assert at is not None
    assert start is not None
    return at - start


def _target(values: Sequence[float], *, at_most: float = 0, at_least: float = 0) -> str:
    """A median's target, and whether it is met."""
    if at_most:
        met = bool(values) and median(values) <= at_most
        return f"target at most {at_most:g}: {'yes' if met else 'NO'}"
    met = bool(values) and median(values) >= at_least
    return f"target at least {at_least:g}: {'yes' if met else 'NO'}"


def _spared(early: Sequence[Streamed], stored: dict[str, int] | None) -> str:
    """The output tokens the early stops spared, against a stored run of whole replies."""
    if stored is None:
        return "-"
    return str(sum(max(0, stored.get(r.label, r.output_tokens) - r.output_tokens) for r in early))


def _s(values: Sequence[float]) -> str:
    return f"{median(values):.1f}" if values else "-"


def stored_output_tokens(path: Path | None) -> dict[str, int] | None:
    """Each question's output tokens in a stored run of the request as sent (whole replies)."""
    if path is None:
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {row["label"]: row["output_tokens"] for row in rows if row.get("variant") == "sent"}


def load_runs(paths: Sequence[Path]) -> dict[str, list[Timing]]:
    """Stored runs (``--json`` files) by file name, without the extension."""
    return {
        path.stem: [Timing(**json.loads(line)) for line in path.read_text().splitlines() if line]
        for path in paths
    }


def names(value: str) -> list[str]:
    """A comma-separated list's names, blanks left out."""
    return [name.strip() for name in value.split(",") if name.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, ``sets`` and ``variants`` split into names and checked.

    ``--compare`` reads nothing else. ``--reuse-table`` runs no variant: its sizes, as
    ``chunks``, are checked instead of the variants.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets", default=",".join(SETS), help=f"from {', '.join(PLANNERS)}; default: demo, report"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"from {', '.join(VARIANTS)}"
    )
    parser.add_argument("--model", default=DEFAULT_READER, choices=sorted(KNOWN_MODELS))
    parser.add_argument("--threads", type=int, default=None, help="default: idle cores")
    parser.add_argument("--limit", type=int, default=None, help="the first N of each set")
    parser.add_argument("--json", type=Path, default=None, help="append each timing here")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="stream each question through the engine: when its first verified fact and the "
        "answer's first character come, against the full result",
    )
    parser.add_argument(
        "--whole-run",
        type=Path,
        default=None,
        help="with --stream: a stored run of whole replies, to count the output tokens early "
        "stops spared",
    )
    parser.add_argument(
        "--compare", type=Path, nargs="+", default=None, help="stored runs to set side by side"
    )
    parser.add_argument(
        "--reuse-table",
        default=None,
        help="chunk sizes, 0 for the prefix alone: the prompt tokens each would read",
    )
    args = parser.parse_args(argv)
    if args.compare:
        return args
    args.sets = names(args.sets)
    args.variants = names(args.variants)
    if not args.sets or not set(args.sets) <= set(PLANNERS):
        parser.error(f"--sets takes names from {', '.join(PLANNERS)}")
    if args.reuse_table is not None:
        sizes = [size.strip() for size in args.reuse_table.split(",")]
        if not all(size.isdigit() for size in sizes):
            parser.error("--reuse-table takes chunk sizes: whole numbers, 0 or more")
        args.chunks = [int(size) for size in sizes]
    elif not args.variants or not set(args.variants) <= set(VARIANTS):
        parser.error(f"--variants takes names from {', '.join(VARIANTS)}")
    return args


def passes(args: argparse.Namespace) -> tuple[list[Timing], list[Start], str, int | None]:
    """Each variant's pass over the sets, on a fresh server each.

    Returns the timings, the servers' starts, the sent-form table (the first server's) and the
    threads the servers ran with.
    """
    rows: list[Timing] = []
    starts: list[Start] = []
    sent_form = ""
    threads = None
    for variant in args.variants:
        with started(args.model, args.threads) as (local, start):
            starts.append(start)
            sent_form = sent_form or sent_form_table(local, args.sets)
            for set_name in args.sets:
                for asked in PLANNERS[set_name](local, DEFAULT_DEFENCES)[: args.limit]:
                    rows.append(logged(timed(local, asked, variant), args.json))
        threads = local.threads
    return rows, starts, sent_form, threads


def logged(row: Timing, store: Path | None) -> Timing:
    """``row``, reported on stderr and appended to ``store`` as a JSON line if there is one."""
    print(
        f"{row.variant} {row.set_name} {row.label[:40]}: {row.wall_s:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    if store is not None:
        with store.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(row)) + "\n")
    return row


def start_line(starts: Sequence[Start]) -> str:
    hashed = median([s.hash_s for s in starts])
    check = median([s.check_s for s in starts])
    load = median([s.load_s for s in starts])
    return (
        f"Server start (median of {len(starts)}): the weights' check {check:.2f} s "
        f"({hashed:.1f} s to hash them, after assembly or a change), load {load:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare:
        print(compare_table(load_runs(args.compare)))
        return 0
    if args.reuse_table is not None:
        with LocalModel(args.model, threads=args.threads) as local:
            print(reuse_table(local, args.sets, args.chunks))
        return 0
    print(machine_line())
    if args.stream:
        streams, threads = stream_pass(args)
        print(f"Model: {KNOWN_MODELS[args.model].title}, llama.cpp, {threads} threads, streamed")
        print("")
        print(stream_table(streams, stored_output_tokens(args.whole_run)))
        return 0
    rows, starts, sent_form, threads = passes(args)
    report = [
        f"Model: {KNOWN_MODELS[args.model].title}, llama.cpp, {threads} threads",
        "",
        breakdown_table(rows, args.variants),
        "",
        speed_table(rows, args.variants),
        "",
        sent_form,
        "",
        start_line(starts),
    ]
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
