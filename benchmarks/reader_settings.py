"""llama.cpp settings the embedded reader could run with, on the requests it is really sent.

Each setting starts its own server (the reader's weights, or ``--model``'s, 2 threads,
temperature 0, seed 0, the parameters ``evidence_first.local._server`` sets) with a few of
llama.cpp's parameters changed (``xllamacpp.CommonParams``), sends it the system prompt once as
a new server's saved state would, then each question as the engine plans it
(``reader_latency.PLANNERS``: the demo's and the project set's report half, passage mode), one
after another, or as many at once as the setting has slots. Per setting: the median wall time
of a question, the wall time of the whole pass, prompt and output tokens per second, the draft
tokens speculative decoding proposed and the target model accepted, and how many replies are
byte for byte those of the first setting (``default``, the embedded reader's own).

Settings, each measured because it could save time without another model's answers:

- ``ngram-simple``: speculative decoding from the text already read and written (the last 3
  tokens looked up in the prompt and the reply, up to 8 following tokens drafted);
- ``ngram-mod``: llama.cpp's ``ngram-mod`` drafts;
- ``no-repack``: the weights used as stored, not repacked for the CPU's matrix kernels;
- ``ubatch-256``: half the physical batch;
- ``flash-attn-off``: attention without the fused kernel;
- ``no-fit``: no fitting of the parameters to the devices' memory at start (``-fit off``);
- ``ctx-8192``: a context of 8,192 tokens instead of 32,768 (a quarter of the KV cache to
  allocate and clear at start);
- ``no-warmup``: no empty run at start;
- ``poll-100``, ``poll-0``: llama.cpp's threads wait for each other's work by spinning
  without a pause, or by sleeping at once (the default spins a while, then sleeps);
- ``parallel-2``, ``parallel-3``: 2 or 3 slots, each with the default's context, asked that
  many questions at once: writing a token reads every weight, and one step could share that
  among the slots' questions;
- ``draft-model``: speculative decoding from a smaller model of the same tokenizer
  (``--draft-model PATH``; Qwen2.5-Coder-0.5B-Instruct for the reader), up to 8 tokens
  drafted at a time, on the same 2 threads;
- ``cache-reuse-128``: after the prefix a request shares with the cached prompt, runs of at
  least 128 tokens that the cached prompt also holds further on are moved into place (KV
  shifting, llama.cpp's ``--cache-reuse``) instead of being read again: a source sent again
  after fewer sources than before.

Each setting's start is timed too: from launching the server process to its first healthy
``/health`` answer, with the weights already assembled and in the page cache.

Run: ``uv run python benchmarks/reader_settings.py [--settings default,ngram-simple]
[--sets demo,report] [--limit N] [--model NAME] [--quick] [--json PATH] [--draft-model
PATH]``. The first setting
named is the one replies are compared with; ``--quick`` runs ``default`` and ``ngram-simple``
on the demo's first question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from _common import machine_line
from reader_latency import (
    PLANNERS,
    SETS,
    Asked,
    digests,
    identical,
    median,
    names,
    post,
    rates,
)

from evidence_first._models.profiles import profile_for_name
from evidence_first._sending.injection import DEFAULT_DEFENCES
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import DEFAULT_READER, KNOWN_MODELS, LocalModel
from evidence_first.local._process import free_port

# llama.cpp parameters by setting, as attribute paths of xllamacpp.CommonParams.
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "ngram-simple": {
        "speculative.types": ["COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE"],
        "speculative.ngram_simple.size_n": 3,
        "speculative.ngram_simple.size_m": 8,
        "speculative.draft.n_max": 8,
    },
    "ngram-mod": {"speculative.types": ["COMMON_SPECULATIVE_TYPE_NGRAM_MOD"]},
    "no-repack": {"no_extra_bufts": True},
    "ubatch-256": {"n_ubatch": 256},
    "flash-attn-off": {"flash_attn_type": 0},
    "no-fit": {"fit_params": False},
    "ctx-8192": {"n_ctx": 8192},
    "no-warmup": {"warmup": False},
    "poll-100": {"cpuparams.poll": 100, "cpuparams_batch.poll": 100},
    "poll-0": {"cpuparams.poll": 0, "cpuparams_batch.poll": 0},
    "parallel-2": {"n_parallel": 2, "n_ctx": 2 * 32768},
    "parallel-3": {"n_parallel": 3, "n_ctx": 3 * 32768},
    "cache-reuse-128": {"n_cache_reuse": 128},
    # The draft model's weights are --draft-model's (speculative.draft.mparams.path).
    "draft-model": {
        "speculative.types": ["COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE"],
        "speculative.draft.n_max": 8,
        "speculative.draft.cpuparams.n_threads": 2,
        "speculative.draft.cpuparams_batch.n_threads": 2,
    },
}

# The child: the reader's own server parameters (evidence_first.local._server), then the
# setting's. Speculative types are named by their enum member.
_CHILD = r"""
import json, sys, xllamacpp
from evidence_first.local._server import reader_params
model, port, changes = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
params = reader_params(model, port, 32768, 2, 0, None)
for path, value in changes.items():
    *parents, name = path.split(".")
    target = params
    for parent in parents:
        target = getattr(target, parent)
    if name == "types":
        value = [getattr(xllamacpp.common_speculative_type, member) for member in value]
    setattr(target, name, value)
server = xllamacpp.Server(params)
sys.stdin.read()
"""


@dataclass(frozen=True)
class Reply:
    setting: str
    set_name: str
    label: str
    wall_s: float
    read_tokens: int
    prompt_s: float
    output_tokens: int
    output_s: float
    drafted: int
    accepted: int
    reply_sha256: str
    start_s: float
    pass_s: float  # the whole pass over the questions, on this setting's server


@contextmanager
def serving(model: str, changes: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """A server of ``model`` with ``changes``; yields its API root and its start's seconds."""
    path = LocalModel(model).model_path()
    port = free_port()
    launched = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(port), json.dumps(changes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if child.poll() is not None or time.monotonic() > deadline:
                msg = f"the {model} server with {changes} did not start"
                raise RuntimeError(msg)
            try:
                with urllib.request.urlopen(f"{root}/health", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        yield f"{root}/v1", time.perf_counter() - launched
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def measured(
    model: str, setting: str, asked: Sequence[Asked], draft: str | None = None
) -> list[Reply]:
    """Every request of ``asked`` on a fresh server of ``model`` run with ``setting``.

    The requests are sent as many at a time as the server has slots (``n_parallel``);
    ``draft`` is the draft model's GGUF file for ``draft-model``.
    """
    profile = profile_for_name(model)
    changes = dict(SETTINGS[setting])
    if setting == "draft-model":
        if draft is None:
            raise ValueError("the draft-model setting needs --draft-model")
        changes["speculative.draft.mparams.path"] = draft
    slots = changes.get("n_parallel", 1)
    with serving(model, changes) as (base_url, start_s):
        client = ChatCompletionsModel(base_url, model=model, seed=0, profile=profile)
        # As a new server restoring the saved system prompt: it is read before any question.
        system = [{"role": "system", "content": asked[0].request.system}]
        post(base_url, {"messages": [*system, {"role": "user", "content": ""}], "max_tokens": 1})

        def ask(one: Asked) -> tuple[Asked, float, dict[str, Any]]:
            wall, payload = post(base_url, client.body(one.request))
            print(f"{setting} {one.label[:40]}: {wall:.1f} s", file=sys.stderr, flush=True)
            return one, wall, payload

        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=slots) as pool:
            answered = list(pool.map(ask, asked))
        pass_s = time.perf_counter() - began
    replies = []
    for one, wall, payload in answered:
        timings = payload["timings"]
        text = payload["choices"][0]["message"]["content"] or ""
        replies.append(
            Reply(
                setting=setting,
                set_name=one.set_name,
                label=one.label,
                wall_s=wall,
                read_tokens=timings["prompt_n"],
                prompt_s=timings["prompt_ms"] / 1000,
                output_tokens=timings["predicted_n"],
                output_s=timings["predicted_ms"] / 1000,
                drafted=timings.get("draft_n", 0),
                accepted=timings.get("draft_n_accepted", 0),
                reply_sha256=hashlib.sha256(text.encode()).hexdigest(),
                start_s=start_s,
                pass_s=pass_s,
            )
        )
    return replies


def table(replies: list[Reply], settings: Sequence[str]) -> str:
    lines = [
        "| setting | start (s) | questions | median wall (s) | pass wall (s) "
        "| prompt tokens read /s | output tokens /s | draft tokens accepted / drafted "
        f"| replies identical to {settings[0]} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    first = digests(r for r in replies if r.setting == settings[0])
    for setting in settings:
        runs = [r for r in replies if r.setting == setting]
        read, wrote = rates(runs)
        lines.append(
            f"| {setting} | {runs[0].start_s:.1f} | {len(runs)} "
            f"| {median([r.wall_s for r in runs]):.1f} "
            f"| {runs[0].pass_s:.0f} | {read:.0f} | {wrote:.1f} "
            f"| {sum(r.accepted for r in runs)} / {sum(r.drafted for r in runs)} "
            f"| {identical(runs, first)} |"
        )
    return "\n".join(lines)


class _Planner:
    """Declares a model's profile to the planner; never called."""

    def __init__(self, model: str) -> None:
        self.profile = profile_for_name(model)

    def generate(self, request: Any) -> Any:
        raise AssertionError("planning only")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, ``settings`` and ``sets`` split into names and checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--settings",
        default=",".join(name for name in SETTINGS if name != "draft-model"),
        help=f"from {', '.join(SETTINGS)}",
    )
    parser.add_argument("--sets", default=",".join(SETS), help="demo, report or both")
    parser.add_argument("--limit", type=int, default=None, help="the first N of each set")
    parser.add_argument("--model", default=DEFAULT_READER, choices=sorted(KNOWN_MODELS))
    parser.add_argument("--quick", action="store_true", help="2 settings, 1 demo question")
    parser.add_argument("--json", default=None, help="append each reply's timing here")
    parser.add_argument("--draft-model", default=None, help="GGUF file: draft-model's drafter")
    args = parser.parse_args(argv)
    if args.quick:
        args.settings, args.sets, args.limit = "default,ngram-simple", "demo", 1
    args.settings = names(args.settings)
    args.sets = names(args.sets)
    if not args.settings or not set(args.settings) <= set(SETTINGS):
        parser.error(f"--settings takes names from {', '.join(SETTINGS)}")
    if not args.sets or not set(args.sets) <= set(SETS):
        parser.error(f"--sets takes names from {', '.join(SETS)}")
    if "draft-model" in args.settings and args.draft_model is None:
        parser.error("the draft-model setting needs --draft-model PATH")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    planner = _Planner(args.model)
    asked = [
        one
        for set_name in args.sets
        for one in PLANNERS[set_name](planner, DEFAULT_DEFENCES)[: args.limit]
    ]
    print(machine_line())
    replies: list[Reply] = []
    for setting in args.settings:
        for reply in measured(args.model, setting, asked, args.draft_model):
            replies.append(reply)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(asdict(reply)) + "\n")
    print(f"Model: {KNOWN_MODELS[args.model].title}, llama.cpp, 2 threads")
    print()
    print(table(replies, args.settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
