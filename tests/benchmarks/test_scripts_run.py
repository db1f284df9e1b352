"""Each benchmark script runs in its quick configuration and prints its table (structure only)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest


def _table_rows(output: str) -> list[list[str]]:
    lines = [line for line in output.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, output
    assert set(lines[1].replace("|", "").replace("-", "").replace(":", "").strip()) == set()
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_core_overhead_prints_its_tables(capsys, load_benchmark):
    assert load_benchmark("core_overhead").main(["--quick"]) == 0
    out = capsys.readouterr().out
    rows = _table_rows(out)
    assert [row[0] for row in rows[:2]] == [
        "8 x 2 KB",
        "64 sources, full 32,768-token budget, 32 facts x 8 citations",
    ]
    assert [row[1] for row in rows[:2]] == ["8", "64"]
    assert rows[1][2] == "256"
    streamed = _table_rows(out.split("The stream:", 1)[1])
    starts = ("`judge(plan, response)`", "the stream,", "a fact's event after")
    assert len(streamed) == len(starts)
    assert all(row[0].startswith(start) for row, start in zip(streamed, starts, strict=True))


@pytest.mark.live
def test_token_estimate_prints_its_table(no_model_server, capsys, load_benchmark):
    assert load_benchmark("token_estimate").main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["English prose", "Python code", "Chinese text"]
    assert all(row[-1] == "yes" for row in rows)


def test_peers_prints_one_row_per_system_and_chunk_count(capsys, load_benchmark):
    peers = load_benchmark("peers")
    assert peers.main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [(row[0], row[1]) for row in rows] == [
        (system, str(count)) for count in (8, 32, 64) for system in peers.SYSTEMS
    ]
    assert all(len(row) == 10 for row in rows)
    ours = [row for row in rows if row[0] in peers.OURS]
    assert [row[4] for row in ours] == ["1"] * 6  # one model call per answer
    assert all(row[6].startswith("yes") for row in rows)  # every system sent every chunk
    # The target is judged for our rows at 64 chunks only.
    assert [row[-1] in {"yes", "NO"} for row in ours] == [False, False] * 2 + [True, True]


def test_concurrency_prints_one_row_per_system(capsys, load_benchmark):
    concurrency = load_benchmark("concurrency")
    assert concurrency.main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == list(concurrency.CLIENTS)
    assert all(len(row) == 11 for row in rows)
    assert [(row[1], row[2], row[3], row[7]) for row in rows] == [("4", "8", "50", "100")] * 3
    assert all(row[-1] in {"yes", "NO"} for row in rows)


# Ray Data copies its context for each execution, setting every field, the deprecated ones too.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
def test_ray_scaling_prints_one_row_per_worker_count(capsys, load_benchmark):
    assert load_benchmark("ray_scaling").main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [row[:5] for row in rows] == [["1", "4", "4", "16", "50"], ["2", "4", "4", "16", "50"]]
    assert all(len(row) == 13 for row in rows)
    # Peak in flight: one worker's threads all at once; two workers overlap as far as their
    # processes' start times allow on a busy machine, never beyond every thread of both.
    assert rows[0][5] == "4"
    assert 4 <= int(rows[1][5]) <= 8
    assert rows[0][-2:] == ["-", "-"]  # the target is judged at 2 workers only
    assert rows[1][-1] in {"yes", "NO"}


def test_scale_prints_the_pack_and_verify_scenarios(capsys, load_benchmark):
    assert load_benchmark("scale").main(["--quick"]) == 0
    rows = _table_rows(capsys.readouterr().out)
    assert [(row[0], row[1]) for row in rows] == [
        ("a: check, estimate and pack", "ASCII prose"),
        ("a: check, estimate and pack", "mixed-script text"),
        ("a: the same, passage mode", "ASCII prose"),
        ("a: the same, passage mode", "mixed-script text"),
        ("b: verify the ledger", "ASCII prose"),
        ("b: verify the ledger", "mixed-script text"),
        ("c: verify, maximum-size sources", "ASCII prose"),
        ("c: verify, maximum-size sources", "mixed-script text"),
        ("d: a whitespace run in a source", "a run of spaces"),
        ("d: a whitespace run in a source", "a run of U+3000"),
        ("d: the same, passage mode", "a run of spaces"),
        ("d: the same, passage mode", "a run of U+3000"),
        ("d: a whitespace run in the answer", "a run of spaces"),
        ("d: a whitespace run in the answer", "a run of U+3000"),
    ]
    assert all(len(row) == 14 for row in rows)
    # (a) offers sources larger than the budget: all omitted. (b) and (c) send all and verify
    # all: (c) at the size limit, one fact per source. (d) sends its one source and verifies
    # the one citation.
    assert [row[2:6] for row in rows] == (
        [["4", "0", "4", "0"]] * 4
        + [["8", "8", "0", "32"]] * 2
        + [["4", "4", "0", "32"]] * 2
        + [["1", "1", "0", "1"]] * 6
    )
    # The event-loop stall is measured where an async entry is timed: (a), (c) and (d).
    assert all(float(row[11]) >= 0 for row in [*rows[:4], *rows[6:]])
    assert [row[11] for row in rows[4:6]] == ["-", "-"]
    assert all(row[-1] in {"yes", "NO"} for row in rows)


@pytest.mark.live
def test_local_model_prints_one_row_per_model(no_model_server, capsys, load_benchmark):
    assert load_benchmark("local_model").main(["--quick", "--models", "gemma-3-270m"]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Python ")
    (row,) = [line for line in output.splitlines() if line.startswith("| Gemma")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert len(cells) == 8
    assert float(cells[2]) > 0  # start seconds
    assert int(cells[3]) > 100  # the whole prompt was read
    assert float(cells[4]) > 0
    assert float(cells[5]) > 0
    assert int(cells[6]) > 100  # the next question reused the cached system prompt


@pytest.mark.live
def test_reader_latency_breaks_each_answer_down(no_model_server, capsys, load_benchmark):
    benchmark = load_benchmark("reader_latency")
    argv = ["--model", "gemma-3-270m", "--sets", "demo", "--limit", "2"]
    assert benchmark.main([*argv, "--variants", "sent,no-logprobs"]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Python ")
    rows = [line for line in output.splitlines() if line.startswith("| demo (2)")]
    assert [row.split("|")[2].strip() for row in rows] == ["sent", "no-logprobs"]
    sent = [cell.strip() for cell in rows[0].strip("|").split("|")]
    _cached, read = (int(n) for n in sent[4].split(" / "))
    assert read > 100  # the first question reads its whole prompt
    assert float(sent[5]) > 0  # reading
    assert int(sent[6]) > 0  # output tokens
    assert float(sent[7]) > 0  # writing
    assert sent[9] == "2/2"  # the request as sent is its own reference
    assert "Server start (median of 2): the weights' check" in output


def test_reader_latency_compares_stored_runs_with_the_first(tmp_path, capsys, load_benchmark):
    benchmark = load_benchmark("reader_latency")

    def row(label: str, wall: float, digest: str, variant: str = "sent") -> str:
        timing = benchmark.Timing("report", label, variant, wall, 500, 400, 5.0, 100, 4.0, digest)
        return json.dumps(asdict(timing))

    before = tmp_path / "before.jsonl"
    after = tmp_path / "after.jsonl"
    before.write_text(row("q1", 10.0, "a") + "\n" + row("q2", 12.0, "b") + "\n")
    # The other variant's row is left out; q2's reply differs from the first run's.
    after.write_text(
        row("q1", 6.0, "a") + "\n" + row("q2", 8.0, "c") + "\n" + row("q1", 1.0, "a", "bare")
    )
    assert benchmark.main(["--compare", str(before), str(after)]) == 0
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| report")
    ]
    assert [(r[0], r[1], r[2], r[3], r[7], r[8]) for r in rows] == [
        ("report (2)", "before", "11.0", "22", "25.0", "2/2"),
        ("report (2)", "after", "7.0", "14", "25.0", "1/2"),
    ]


def test_reader_latency_reuses_what_llama_cpps_chunk_scan_reuses(load_benchmark):
    reused = load_benchmark("reader_latency").reused
    cached = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # The prefix alone: the prompt leaves out 4 and 5.
    assert reused(cached, [1, 2, 3, 6, 7, 8, 9, 10], 0) == 3
    # Chunks of 3: after the prefix, 6 7 8 9 is found further on in the cache and moved.
    assert reused(cached, [1, 2, 3, 6, 7, 8, 9, 10], 3) == 7
    # A run shorter than the chunk is read again, and so is all that follows it.
    assert reused(cached, [1, 2, 3, 6, 7, 10, 8, 9], 3) == 3
    # The scan only moves forward: a source sent before the cached ones stops it.
    assert reused(cached, [1, 2, 3, 0, 4, 5, 6, 7], 2) == 3
    # The last token is always read, even of a prompt the cache holds whole.
    assert reused(cached, cached, 3) == len(cached) - 1


@pytest.mark.parametrize("sizes", ["64,x", "-1", "16,,64"])
def test_reader_latency_refuses_a_chunk_size_that_is_not_a_count(sizes, capsys, load_benchmark):
    with pytest.raises(SystemExit) as stopped:
        load_benchmark("reader_latency").main(["--reuse-table", sizes])
    assert stopped.value.code == 2  # a usage error, before any server starts
    assert "--reuse-table takes chunk sizes" in capsys.readouterr().err


@pytest.mark.live
def test_reader_latency_counts_what_chunk_reuse_would_spare(
    no_model_server, capsys, load_benchmark
):
    benchmark = load_benchmark("reader_latency")
    argv = ["--model", "gemma-3-270m", "--sets", "demo", "--reuse-table", "0,16"]
    assert benchmark.main(argv) == 0
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| demo (")
    ]
    assert [row[1] for row in rows] == ["prefix only", "16"]
    prefix, chunked = (int(row[3].replace(",", "")) for row in rows)
    assert 0 < chunked <= prefix  # moving runs into place never reads more
    assert rows[0][4] == "0"  # the prefix alone moves nothing


@pytest.mark.live
def test_reader_settings_compares_each_setting_with_the_default(
    no_model_server, capsys, load_benchmark
):
    benchmark = load_benchmark("reader_settings")
    assert benchmark.main(["--model", "gemma-3-270m", "--quick"]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Python ")
    rows = {
        cells[0]: cells
        for line in output.splitlines()
        if line.startswith(("| default |", "| ngram-simple |"))
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    assert set(rows) == {"default", "ngram-simple"}
    assert float(rows["default"][1]) > 0  # the start was timed
    assert rows["default"][2] == "1"  # one question
    assert rows["default"][8] == "1/1"  # the default is its own reference
    assert rows["default"][7] == "0 / 0"  # no draft without speculative decoding


def test_compression_prints_its_tables(capsys, tmp_path, load_benchmark, markdown_tables):
    figures = tmp_path / "compression.json"
    compression = load_benchmark("compression")
    assert compression.main(["--quick", "--json", str(figures)]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Python ")
    half, rescue, plan = markdown_tables(output)
    quick = str(compression.QUICK_QUESTIONS)
    assert [(row[0], row[1]) for row in half[1:]] == [
        ("nq-open", quick),
        ("clapnq", quick),
        ("pooled", str(2 * compression.QUICK_QUESTIONS)),
    ]
    assert [row[0] for row in rescue[1:]] == ["nq-open", "clapnq", "pooled"]
    assert all(row[-1] in {"yes", "NO", "-"} for row in [*half[1:], *rescue[1:]])
    count, sizes = compression.QUICK_PLAN
    assert [(row[0], row[1]) for row in plan[1:]] == [(str(count), f"{n:,}") for n in sizes]
    # Every source is over the default allowance, so compression is what sends any of them.
    assert all(int(row[5]) > 0 for row in plan[1:])
    # No embedder is a dependency: without one the table says so instead.
    assert "The same with an embedder: not installed" in output
    stored = json.loads(figures.read_text(encoding="utf-8"))
    assert stored["half_budget_bm25"]["pooled"]["questions"] == 2 * compression.QUICK_QUESTIONS
    assert set(stored["rescue_default_budget"]) == {"nq-open", "clapnq", "pooled"}


def test_compression_long_source_moves_the_gold_spans_with_the_gold_passage(load_benchmark):
    compression = load_benchmark("compression")
    public_sets = load_benchmark("public_sets")
    for name in compression.SETS:
        by_id = public_sets.items_by_id(name)
        for item in compression.questions_of(name, 20):
            long = compression.long_source(item, by_id, "chunk", gold=True)
            text = long.evidence.text
            assert item.text in text
            assert text.count(compression.JOIN) >= compression.NEIGHBOURS
            spans = public_sets.gold_spans(item)
            assert [text[a:b] for a, b in long.gold] == [item.text[a:b] for a, b in spans]
            # A distractor built without this passage holds it nowhere.
            other = by_id[item.neighbours[0]]
            distractor = compression.long_source(other, by_id, "x", gold=False, without=item.text)
            assert item.text not in distractor.evidence.text
            assert distractor.gold == ()


def test_compression_rescue_sources_are_each_over_the_default_allowance_alone(load_benchmark):
    compression = load_benchmark("compression")
    public_sets = load_benchmark("public_sets")
    by_id = public_sets.items_by_id("nq-open")
    for item in compression.questions_of("nq-open", 5, "tune"):
        sources, own = compression.rescue_sources(item, by_id)
        assert len(sources) == compression.LONG_SOURCES
        assert all(compression.charge(s) > compression.DEFAULT_ALLOWANCE for s in sources)
        text = own.evidence.text
        assert [text[a:b] for a, b in own.gold] == [
            item.text[a:b] for a, b in public_sets.gold_spans(item)
        ]
        # Nine neighbours alone fit the allowance: more passages were added at the end.
        assert text.count(compression.JOIN) > compression.NEIGHBOURS
