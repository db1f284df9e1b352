"""The embedded local models on this machine: start time, reading and writing speed, memory.

For each known model (``evidence_first.local.KNOWN_MODELS``) in turn, one server at a time:

- start: seconds from ``LocalModel.start()`` (checking the cached GGUF file against its pinned
  SHA-256, loading it) until the server answers ``/health``; the first start after install
  also assembles the file, which this does not time;
- prompt and output tokens/s: llama.cpp's own ``timings`` for one demo question answered in
  passage mode (median of the runs), with the prompt cache cleared first so the whole prompt is
  read; and the prompt tokens the cache saved on the next, different question, which shares the
  fixed system prompt;
- peak memory: the server process's peak resident set (``VmHWM``), which includes the mapped
  weights.

Run: ``uv run python benchmarks/local_model.py [--models NAME,...] [--threads N] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import machine_line

from evidence_first import answer_from_evidence
from evidence_first.cli import RECOMMENDED_MODE, load_demo_corpus
from evidence_first.local import KNOWN_MODELS, LocalModel


@dataclass(frozen=True)
class Row:
    model: str
    threads: int
    start_s: float
    prompt_tokens: int
    prompt_tps: float
    output_tps: float
    cached_next: int
    peak_mib: float


def _post(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as reply:
        payload: dict[str, Any] = json.loads(reply.read())
    return payload


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _body(local: LocalModel, item: dict[str, Any], sources: dict[str, Any]) -> dict[str, Any]:
    """The exact request the engine sends for a demo question, built by the engine."""
    captured: list[Any] = []

    class Capture:
        def generate(self, request: Any) -> str:
            captured.append(request)
            return "{}"

    evidence = [sources[hit["id"]] for hit in item["retrieved"]]
    answer_from_evidence(
        item["question"], evidence, Capture(), citation_mode=RECOMMENDED_MODE, max_output_tokens=512
    )
    (request,) = captured
    body: dict[str, Any] = local.reader.body(request)
    return body


def measure(name: str, threads: int | None, repeat: int) -> Row:
    corpus = load_demo_corpus()
    sources = {source["id"]: source for source in corpus["sources"]}
    first, second = corpus["questions"][0], corpus["questions"][1]
    model = LocalModel(name, threads=threads)
    started = time.perf_counter()
    with model as local:
        start_s = time.perf_counter() - started
        pid = local.pid
        assert pid is not None
        prompt_tps, output_tps, prompt_tokens = [], [], 0
        for _ in range(repeat):
            body = {**_body(local, first, sources), "cache_prompt": False}
            timings = _post(local.base_url, body)["timings"]
            prompt_tokens = timings["prompt_n"]
            prompt_tps.append(timings["prompt_per_second"])
            output_tps.append(timings["predicted_per_second"])
        _post(local.base_url, _body(local, first, sources))  # fills the cache
        cached = _post(local.base_url, _body(local, second, sources))["timings"]["cache_n"]
        peak = _peak_mib(pid)
    return Row(
        model=KNOWN_MODELS[name].title,
        threads=model.threads,
        start_s=start_s,
        prompt_tokens=prompt_tokens,
        prompt_tps=statistics.median(prompt_tps),
        output_tps=statistics.median(output_tps),
        cached_next=cached,
        peak_mib=peak,
    )


def render(rows: list[Row]) -> str:
    lines = [
        "| model | threads | start (s) | prompt tokens | prompt tokens/s | output tokens/s "
        "| next question's prompt tokens from cache | peak memory (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r.model} | {r.threads} | {r.start_s:.1f} | {r.prompt_tokens} | {r.prompt_tps:.0f} "
        f"| {r.output_tps:.1f} | {r.cached_next} | {r.peak_mib:,.0f} |"
        for r in rows
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        default=",".join(KNOWN_MODELS),
        help=f"comma-separated, from {', '.join(KNOWN_MODELS)} (default: all)",
    )
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--repeat", type=int, default=3, help="timed answers per model")
    parser.add_argument("--quick", action="store_true", help="one timed answer per model")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in names if name not in KNOWN_MODELS]
    if unknown or not names:
        parser.error(f"--models takes names from {', '.join(KNOWN_MODELS)}")
    repeat = 1 if args.quick else args.repeat
    print(machine_line())
    rows = []
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        rows.append(measure(name, args.threads, repeat))
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
