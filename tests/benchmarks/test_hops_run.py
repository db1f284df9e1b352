"""The follow-up retrieval benchmark runs its quick configuration on the tiny model."""

from __future__ import annotations

import json

import pytest


@pytest.mark.live
def test_hops_quick_run_compares_single_shot_with_follow_up(
    tiny_model, capsys, tmp_path, load_benchmark
):
    results = tmp_path / "runs.jsonl"
    argv = ["--quick", "--base-url", tiny_model.base_url, "--model", tiny_model.model_name]
    assert load_benchmark("hops").main([*argv, "--json", str(results)]) == 0

    output = capsys.readouterr().out
    assert output.startswith("Python ")
    assert "3 two-source questions, BM25 top-1" in output
    rows = [line for line in output.splitlines() if line.startswith("| ") and "(max_hops" in line]
    assert [row.split("|")[1].strip() for row in rows] == [
        "single-shot (max_hops=0)",
        "follow-up (max_hops=2)",
    ]
    runs = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert len(runs) == 6
    for run in runs:
        bound = 1 if run["config"].startswith("single") else 3
        assert 0 <= run["model_calls"] <= bound
        assert run["hops"] <= bound
