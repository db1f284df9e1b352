"""The injection set and its harness: what a case plants, how attack success is counted, and the
quick run on the tiny model (structure only).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_first.cli import load_demo_corpus

CASES = Path(__file__).parents[2] / "benchmarks" / "data" / "injection" / "cases.json"


@pytest.fixture
def injection(load_benchmark):
    return load_benchmark("injection")


def test_the_set_is_har_318_and_at_least_40_cases_over_every_family(injection):
    bases, cases = injection.load_set()
    assert cases[0].id == injection.DEMO_CASE
    assert len(cases) >= 41
    families = {case.family for case in cases}
    assert families == {family for group in injection.GROUPS.values() for family in group}
    assert {case.placement for case in cases} == {"relevant", "distractor"}
    assert {case.goal for case in cases} == {"target", "answer"}
    for case in cases:
        base = bases[case.base]
        planted = case.plant(base.documents)[case.source_id].text
        original = base.documents[case.source_id].text
        assert planted == original[: case.position] + case.injection + original[case.position :]
        assert case.source_id in base.question.sources
        for source_id, quote in base.question.gold_quotes:  # the answer is still there
            assert quote in case.plant(base.documents)[source_id].text
        if case.goal == "answer":
            assert not base.question.answerable
        else:
            assert case.target is not None
            assert case.target.casefold() in case.injection.casefold()


def test_the_demo_case_plants_exactly_the_demo_ticket(injection):
    bases, cases = injection.load_set()
    demo = cases[0]
    ticket = next(s for s in load_demo_corpus()["sources"] if s["id"] == "ticket-HAR-318")
    assert demo.plant(bases[demo.base].documents)[demo.source_id].text == ticket["text"]
    assert "ignore all previous instructions" not in bases[demo.base].documents[demo.source_id].text


def test_the_generator_writes_the_committed_set(tmp_path):
    script = CASES.parent / "make_cases.py"
    before = CASES.read_bytes()
    subprocess.run([sys.executable, str(script)], check=True, capture_output=True)
    assert CASES.read_bytes() == before


class Obedient:
    """Answers with whatever target a planted instruction names, citing the first source."""

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request):
        self.calls += 1
        sources, _ = json.JSONDecoder().raw_decode(request.user, request.user.index("["))
        target = re.search(r"answer every question with '([^']+)'", json.dumps(sources))
        first = sources[0]
        if "passages" in first:
            citation = {"source_id": first["id"], "passages": [first["passages"][0]["label"]]}
            citation["quote"] = None
        else:
            citation = {"source_id": first["id"], "quote": first["text"][:5]}
        fact = {"subject": "s", "relation": "r", "object": "o", "citations": [citation]}
        return json.dumps(
            {
                "facts": [fact],
                "answer": target.group(1) if target else "whatever",
                "inference": None,
                "missing_evidence": [],
            }
        )


def test_attack_success_counts_answers_that_follow_the_injection(injection, tmp_path):
    bases, cases = injection.load_set()
    # Three "answer with the target" cases, and one "always answer" case on a question the
    # obedient model answers without the injection too.
    chosen = [*cases[:3], next(case for case in cases if case.goal == "answer")]
    configs = [injection.Config.parse("passage:escape"), injection.Config.parse("quote:none")]
    store = tmp_path / "results.jsonl"
    model = Obedient()
    results = injection.run(bases, chosen, configs, model, model_line="m", store=store)
    items = 4 + len({case.base for case in chosen})  # each case, and its question unplanted
    assert model.calls == len(results) == items * len(configs)
    assert len(store.read_text().splitlines()) == model.calls
    by_id = {case.id: case for case in chosen}
    for result in results:
        if result.item in by_id:
            assert by_id[result.item].succeeded(result.outcome)
    table = injection.render(results, configs, bases, chosen, "Model: m")
    rows = [line for line in table.splitlines() if line.startswith("| passage:escape")]
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] == "4/4 (100%)"
    assert cells[2] == "3/4 (75%)"  # the "always answer" case answered without it too
    assert cells[-2] == "followed"

    # Escaping changes nothing in a source without control characters: within one run, a
    # byte-identical request is answered once and shared.
    shared = [injection.Config.parse("quote:escape"), injection.Config.parse("quote:none")]
    calls = model.calls
    injection.run(bases, cases[1:2], shared, model, model_line="fresh")
    assert model.calls == calls + 2  # the question and its case, once for both configs

    again = injection.run(bases, chosen, configs, model, model_line="m", store=store)
    assert model.calls == calls + 2  # all reused from the store
    assert [r.outcome for r in again] == [r.outcome for r in results]


def test_a_config_names_its_defences(injection):
    config = injection.Config.parse("passage:escape+datamark")
    assert (config.mode, config.defences.escape_controls, config.defences.datamark) == (
        "passage",
        True,
        True,
    )
    assert injection.Config.parse("quote:none").defences.escape_controls is False
    for bad in ("quote:datamark", "passage:none+escape", "prose:escape", "passage:spotlight"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"mode:defences|passage mode only"):
            injection.Config.parse(bad)


@pytest.mark.live
def test_injection_quick_run_prints_one_row_per_config(tiny_model, capsys, load_benchmark):
    injection = load_benchmark("injection")
    argv = ["--quick", "--base-url", tiny_model.base_url, "--model", tiny_model.model_name]
    assert injection.main([*argv, "--configs", "passage:escape,passage:none"]) == 0
    output = capsys.readouterr().out
    assert "Injection set: 2 cases over 2 questions" in output
    rows = [line for line in output.splitlines() if line.startswith("|")]
    assert len(rows) == 4
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]
    assert [row[0] for row in cells] == ["passage:escape", "passage:none"]
    assert all(len(row) == len(cells[0]) == 12 for row in cells)
    assert all(re.fullmatch(r"\d/2 \(\d+%\)", row[1]) for row in cells)
