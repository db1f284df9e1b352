"""The quality harness runs its quick configuration on the local model (structure only)."""

from __future__ import annotations

import json

import pytest

MODES = ["quote", "passage"]
METRICS = [
    "questions",
    "answered",
    "insufficient_evidence",
    "invalid_response",
    "model errors (timeout, failed call)",
    "answered accuracy (answerable questions)",
    "abstention: not answered (unanswerable questions)",
    "abstention: insufficient_evidence (unanswerable questions)",
    "citation validity (verified / produced)",
    "citation support (verified citations overlapping gold)",
    "median output tokens",
    "median latency per question (s)",
]


def _tables(output: str) -> list[list[list[str]]]:
    """Every Markdown table in ``output``: its rows (header first) as lists of cells."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*output.splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    for table in tables:
        assert set("".join(table[1])) <= set("-:"), table[1]
    return [[table[0], *table[2:]] for table in tables]


@pytest.mark.live
def test_quality_quick_run_prints_both_modes_side_by_side(
    tiny_model, capsys, tmp_path, load_benchmark
):
    results = tmp_path / "results.json"
    argv = ["--quick", "--base-url", tiny_model.base_url, "--model", tiny_model.model_name]
    assert load_benchmark("quality").main([*argv, "--json", str(results)]) == 0

    output = capsys.readouterr().out
    assert output.startswith("Python ")
    assert f"Model: {tiny_model.model_name} at {tiny_model.base_url}" in output
    metrics, codes, kinds = _tables(output)

    assert metrics[0] == ["metric", *MODES]
    rows = {row[0]: row[1:] for row in metrics[1:]}
    assert list(rows) == METRICS
    assert rows["questions"] == ["4", "4"]
    for column in range(len(MODES)):
        outcomes = METRICS[1:5]
        assert sum(int(rows[name][column]) for name in outcomes) == 4

    assert codes[0] == ["invalid_response reason code", *MODES]
    assert all(len(row) == 1 + len(MODES) for row in codes[1:])
    assert [row[0] for row in kinds[1:]] == [
        "single",
        "two-source",
        "superseded",
        "contradicted",
        "unanswerable",
    ]

    records = json.loads(results.read_text(encoding="utf-8"))
    assert sorted((r["mode"], r["id"]) for r in records) == sorted(
        (mode, f"q0{n}") for mode in MODES for n in range(1, 5)
    )
    for record in records:
        assert record["status"] in {
            "answered",
            "insufficient_evidence",
            "invalid_response",
            "model_error",
        }
        assert all(c["verdict"] in {"verified", "rejected"} for c in record["citations"])
