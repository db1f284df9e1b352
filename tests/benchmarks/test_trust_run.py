"""The trust benchmark runs its quick configuration with no model, and its tables hold.

Also: the public sets load in their stable order, and ``quality.py --set nq-open`` plans its
questions (no model is called).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import typing
from pathlib import Path

import pytest

from evidence_first._shapes.vocabulary import CitationFlag

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

CHECKS = ["non_current_evidence", "unsupported_facts", "uncovered_question", "contested_facts"]
# Every citation flag but `contradicted_source`: no source of the sets is marked contradicted.
CITATION_FLAGS = [flag for flag in typing.get_args(CitationFlag) if flag != "contradicted_source"]
WRONG_KINDS = {"on_topic_non_answer", "distractor", "superseded_only", "object_not_cited"}
REALISTIC_KINDS = ("restated", "reformatted", "two_sentences")
RIGHT_KINDS = ("perfect", *REALISTIC_KINDS, "countered")


@pytest.fixture(scope="module")
def trust():
    """``benchmarks/trust.py`` as a module, once for the whole file."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        spec = importlib.util.spec_from_file_location("benchmark_trust", BENCHMARKS / "trust.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        patch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
        spec.loader.exec_module(module)
        yield module


@pytest.fixture(scope="module")
def ran(trust, tmp_path_factory):
    """The quick run's output and its records (one worker: no process pool in a test)."""
    path = tmp_path_factory.mktemp("trust") / "records.jsonl"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert trust.main(["--quick", "--workers", "1", "--json", str(path)]) == 0
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return printed.getvalue(), records


def test_quick_run_prints_the_machine_line_the_sets_and_every_table(ran, markdown_tables):
    output, _ = ran
    assert output.startswith("Python ")
    assert "Sets: nq-open: " in output
    assert "clapnq: " in output
    assert "the first 12 items of each" in output
    assert "Policy applied: `non_current_evidence` abstain" in output
    assert "(today's defaults)" in output
    assert "Wall time: " in output
    tables = markdown_tables(output)
    # Per split: each check, right ledgers, the countered ones against the perfect ones, the
    # gold passage first, wrong ledgers; then the ledgers built and the reason codes. The
    # quick run leaves the reader's ledgers out.
    assert len(tables) == 2 * 5 + 2
    checks, right, countered, first, wrong = tables[:5]
    assert [row[0] for row in checks[1:]] == [f"`{check}`" for check in CHECKS]
    assert checks[0][2:7] == [f"flags `{kind}`: most, where" for kind in RIGHT_KINDS]
    assert right[0] == [
        "set",
        "kind",
        "config",
        "ledgers",
        "answered",
        "invalid_response",
        *(f"flagged `{check}`" for check in CHECKS),
        "flagged by a check on",
        "withheld under the policy",
        *(f"citation flag `{flag}`" for flag in CITATION_FLAGS),
    ]
    assert {(row[0], row[1], row[2]) for row in right[1:]} == {
        (name, "perfect", config)
        for name in ("nq-open", "clapnq")
        for config in ("alone", "random", "bm25", "first")
    } | {
        (name, kind, config)
        for name in ("nq-open", "clapnq")
        for kind in REALISTIC_KINDS
        for config in ("alone", "random", "bm25")
        if (name, kind) != ("clapnq", "reformatted")
    } - {("nq-open", "reformatted", config) for config in ("alone", "random", "bm25")} | {
        (name, "countered", config)
        for name in ("nq-open", "clapnq")
        for config in ("alone", "random", "bm25")
    }
    for row in right[1:]:
        assert all(len(cell.split(" / ")) == 2 for cell in row[4:]), row  # quote / passage
    assert countered[0][-1] == "extra abstentions"
    assert {(row[0], row[1]) for row in countered[1:]} == {
        (name, config) for name in ("nq-open", "clapnq") for config in ("alone", "random", "bm25")
    }
    assert {row[-1] for row in countered[1:]} == {"0 / 0"}
    assert first[0] == [
        "set",
        "ledgers",
        "answered",
        "gold passage not sent",
        "sources sent (median)",
    ]
    assert wrong[0][:4] == ["set", "kind", "config", "ledgers"]
    assert wrong[0][-2:] == ["flagged or withheld by a check on", "withheld under the policy"]
    assert {row[1] for row in wrong[1:]} <= WRONG_KINDS | {"near_miss"}
    assert not [row for row in wrong[1:] if row[1] == "distractor" and row[2] == "alone"]
    assert not [row for row in wrong[1:] if row[2] == "first"]
    assert tables[-1] == [
        ["set", "split", "kind", "config", "mode", "reason code", "ledgers"],
        ["(none)", "", "", "", "", "", "0"],
    ]


def test_every_ledger_verifies_and_no_perfect_ledger_is_rejected(ran):
    _, records = ran
    built = [record for record in records if record["status"] != "not_built"]
    kinds = {record["kind"] for record in built}
    assert {"perfect", "restated", "two_sentences", "countered", *WRONG_KINDS} <= kinds
    assert {record["mode"] for record in built} == {"quote", "passage"}
    assert {record["config"] for record in built} == {"alone", "random", "bm25", "first"}
    for record in built:
        assert record["status"] == "answered", record
        assert record["verified"], record
        assert record["reasons"] == [], record
    # Only the gold-first configuration leaves sources out, under the default allowance.
    assert all(r["sent"] == r["sources"] for r in built if r["config"] != "first")
    assert any(r["sent"] < r["sources"] for r in built if r["config"] == "first")
    assert {r["kind"] for r in built if r["config"] == "first"} == {"perfect"}


def test_superseded_only_is_flagged_non_current_and_object_not_cited_unsupported(ran):
    _, records = ran
    superseded = [record for record in records if record["kind"] == "superseded_only"]
    not_cited = [record for record in records if record["kind"] == "object_not_cited"]
    assert superseded
    assert not_cited
    for record in superseded:
        assert "non_current_evidence" in record["flags"], record
        assert "superseded_source" in record["citation_flags"], record
    for record in not_cited:
        assert "unsupported_facts" in record["flags"], record
        assert "object_not_cited" in record["citation_flags"], record


def test_countered_ledgers_return_their_counter_citation_flagged_and_answered(trust, ran):
    _, records = ran
    countered = [r for r in records if r["kind"] == "countered" and r["status"] != "not_built"]
    perfect = {
        (r["set"], r["item"], r["config"], r["mode"]): r for r in records if r["kind"] == "perfect"
    }
    assert {(r["set"], r["config"], r["mode"]) for r in countered} == {
        (name, config, mode)
        for name in ("nq-open", "clapnq")
        for config in ("alone", "random", "bm25")
        for mode in ("quote", "passage")
    }
    for record in countered:
        assert record["verified"], record
        assert record["counter_citations"] == 1, record
        assert "contested_facts" in record["flags"], record
        # The copy is marked superseded, but only supporting citations make evidence
        # non-current: the flag the copy's citation earns does not reach the answer.
        assert "superseded_source" in record["citation_flags"], record
        assert "non_current_evidence" not in record["flags"], record
        stored = trust.Record.from_json(record)
        assert stored.answered(trust.DEFAULT_POLICY), record
        twin = perfect[record["set"], record["item"], record["config"], record["mode"]]
        assert set(record["flags"]) - {"contested_facts"} == set(twin["flags"]), record
    assert all(r["counter_citations"] == 0 for r in records if r["kind"] != "countered")


@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_a_countered_ledger_cites_the_superseded_copy_s_other_value_against_its_fact(trust, mode):
    item = trust.load_items("nq-open")[0]
    case = next(c for c in trust.ItemCases(item).cases("random") if c.kind == "countered")
    copy = next(n for n, source in enumerate(case.sources) if source.status == "superseded")
    (claim,) = case.claims
    assert case.sources[claim.source].text == item.text
    ((against,),) = [c.against for c in case.claims]
    assert against.source == copy
    changed = case.sources[copy].text[against.span[0] : against.span[1]]
    assert against.value in changed
    assert against.value not in item.text
    sources = [
        trust.Evidence(id=trust.source_id(n), text=s.text, status=s.status)
        for n, s in enumerate(case.sources)
    ]

    def answered(scripted: typing.Any) -> typing.Any:
        return trust.answer_from_evidence(
            item.question,
            sources,
            trust.ScriptedReader(scripted, mode),
            citation_mode=mode,
            max_context_tokens=trust.MAX_CONTEXT_TOKENS,
        )

    answer = answered(case)
    assert answer.status == "answered"
    assert answer.flags == ("contested_facts",)
    (fact,) = answer.facts
    assert [c.source_id for c in fact.citations] == [trust.source_id(claim.source)]
    (counter,) = fact.counter_citations
    assert counter.source_id == trust.source_id(copy)
    assert against.value in counter.quote
    assert [check.stance for check in answer.citation_checks] == ["supports", "contradicts"]
    # The perfect ledger over the same sources is answered with no flag.
    perfect = trust.Case(
        "perfect",
        case.config,
        case.sources,
        (trust.Claim(claim.source, claim.span, claim.subject, claim.relation, claim.object),),
        case.answer,
    )
    plain = answered(perfect)
    assert plain.status == "answered"
    assert plain.flags == ()


def test_a_policy_is_applied_to_stored_records_without_a_new_run(trust, ran, markdown_tables):
    _, stored = ran
    records = [trust.Record.from_json(record) for record in stored]
    only_flag = dict.fromkeys(CHECKS, "flag")
    right = markdown_tables(trust.tables(records, only_flag))[1]
    # No check abstains and every right ledger verified: every one is answered.
    assert {row[4] for row in right[1:]} == {"100.0% / 100.0%"}
    # Today's defaults withhold exactly the perfect ledgers whose flags abstain by default.
    abstaining = {check for check, policy in trust.DEFAULT_POLICY.items() if policy == "abstain"}
    withheld = {
        (record.item, record.config, record.mode)
        for record in records
        if record.kind == "perfect" and abstaining & set(record.flags)
    }
    assert withheld == {
        (record.item, record.config, record.mode)
        for record in records
        if record.kind == "perfect" and not record.answered(trust.DEFAULT_POLICY)
    }
    assert trust.DEFAULT_POLICY == {
        "non_current_evidence": "abstain",
        "unsupported_facts": "flag",
        "uncovered_question": "off",
        "contested_facts": "flag",
    }


def test_realistic_ledgers_write_the_answer_another_way(trust):
    assert trust.written_another_way("July 25, 2017") == "2017-07-25"
    assert trust.written_another_way("15 June 2026") == "2026-06-15"
    assert trust.written_another_way("on June 15") == "on 15 June"
    assert trust.written_another_way("8,420 euros") == "8420 euros"
    assert trust.written_another_way("35 minutes") == "35 min"
    assert trust.written_another_way("62%") == "62 percent"
    assert trust.written_another_way("Dana Whitfield") is None
    assert trust.restated_question("Who owns the payment provider security review?") == (
        "payment provider security review"
    )
    assert trust.restated_question("Who?") is None
    # A word that asks inside the question is not restated: the words after it are.
    question = (
        "Immanuel Lutheran School is affiliated with the denomination that has how many members?"
    )
    assert trust.restated_question(question) == "members"
    # Question words are read in English only: no restated ledger in another language.
    item = trust.load_items("xquad-de")[0]
    cases = trust.ItemCases(item)
    assert "restated" not in {case.kind for case in cases.cases("alone")}
    assert cases.not_built["restated", "alone"] == "the question is not in English"


def test_the_reader_s_stored_right_ledgers_are_judged_again_without_a_model(trust):
    records = trust.reader_records(["report"])
    assert records
    assert {record.kind for record in records} == {"reader"}
    assert {record.mode for record in records} == {"passage", "quote"}
    assert all(record.status == "answered" for record in records)
    assert all(record.confidence is not None for record in records)


def test_records_tabulate_again_as_the_run_printed_them(
    trust, ran, capsys, tmp_path, markdown_tables
):
    output, stored = ran
    path = tmp_path / "again.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in stored), encoding="utf-8")
    assert trust.main(["--records", str(path)]) == 0
    again = capsys.readouterr().out
    assert markdown_tables(again) == markdown_tables(output)


def test_items_are_seeded_so_a_rerun_gives_the_same_records(trust):
    first = trust.item_records("clapnq", trust.load_items("clapnq")[0].id, trust.CONFIGS, ["quote"])
    again = trust.item_records("clapnq", trust.load_items("clapnq")[0].id, trust.CONFIGS, ["quote"])
    assert first == again


def test_public_sets_are_split_once_and_kept_in_a_stable_order(load_benchmark):
    public_sets = load_benchmark("public_sets")
    for name in public_sets.SETS:
        items = public_sets.load_items(name)
        assert items, name
        assert [item.order for item in items] == sorted(item.order for item in items)
        splits = {item.split for item in items}
        assert splits == ({"heldout"} if public_sets.SETS[name].heldout else {"tune", "report"})
        assert all(len(item.neighbours) == 9 for item in items)
        assert all(item.id not in item.neighbours for item in items)


def test_quality_set_nq_open_plans_its_questions_without_a_model_call(load_benchmark):
    quality = load_benchmark("quality")

    class NoCall:
        def generate(self, request):
            raise AssertionError("planning must not call the model")

    args = quality.parse_args(["--set", "nq-open", "--split", "tune", "--limit", "5"])
    assert args.set_name == "nq-open"
    documents, questions = quality.load_set(args.set_name)
    tune = [question for question in questions if question.split == "tune"]
    assert len(tune) > 1000
    # The same first questions on every load: the set's stable order.
    assert [q.id for q in tune[:5]] == [
        q.id for q in quality.load_set("nq-open")[1] if q.split == "tune"
    ][:5]
    for question in tune[: args.limit]:
        assert question.kind == "nq-open"
        assert question.answerable
        assert len(question.sources) == 4
        assert question.gold_answers
        assert quality.gold_spans(question, documents)
        for mode in quality.MODES:
            plan = quality.plan_one(
                question,
                mode,
                documents,
                NoCall(),
                max_context_tokens=quality.context_tokens(args.set_name),
            )
            assert [source.id for source in plan.packed.sent] == list(question.sources)
    assert quality.parse_args([]).set_name == "project"


def test_a_yes_or_no_item_gets_a_verdict_ledger_citing_its_best_sentence(trust):
    item = trust.load_items("boolq")[0]
    assert item.yes_no
    assert trust.verdict_claim("does new york city include the 5 boroughs") == (
        "new york city include the 5 boroughs",
        "does",
    )
    assert trust.verdict_claim("Ethanol is a fuel") == ("Ethanol is a fuel", "is")
    cases = trust.ItemCases(item)
    built = {case.kind: case for case in cases.cases("bm25")}
    assert set(built) == {"perfect", "two_sentences", "distractor"}
    perfect = built["perfect"]
    (claim,) = perfect.claims
    assert claim.object == perfect.answer == item.long_answer
    assert (claim.subject, claim.relation) == trust.verdict_claim(item.question)
    assert perfect.sources[claim.source].text == item.text
    assert claim.span in trust.sentences(item.text)
    assert claim.span == trust.verdict_sentence(item.text, item.question)
    assert built["distractor"].claims[0].source != claim.source
    # The kinds that need a span of the answer are counted as not built, with why.
    assert {kind for kind, _ in cases.not_built} == set(trust.VERDICT_NOT_BUILT)
    assert "no words check" in cases.not_built["object_not_cited", "bm25"]
    records = trust.item_records("boolq", item.id, ["alone"], ["quote", "passage"])
    perfect_records = [r for r in records if r.kind == "perfect"]
    assert [r.status for r in perfect_records] == ["answered", "answered"]
    assert all(r.verified for r in perfect_records)


def test_the_sentence_cited_for_a_verdict_holds_the_question_s_numbers_first(trust):
    text = "The show has run for years. Its 5 seasons aired on TV. The show was renewed."
    span = trust.verdict_sentence(text, "will the show be renewed for season 5")
    assert text[span[0] : span[1]] == "Its 5 seasons aired on TV."
    span = trust.verdict_sentence(text, "was the show renewed")
    assert text[span[0] : span[1]] == "The show was renewed."


def test_hotpotqa_is_sent_beside_its_own_distractors_and_cites_its_gold_paragraphs(trust):
    item = trust.load_items("hotpotqa")[0]
    distractors = {text for _, text in item.distractors}
    assert distractors
    for config in ("bm25", "first"):
        sent = trust.configuration(item, config, trust.rng_for(item, config))
        others = [s.text for n, s in enumerate(sent.sources) if n != sent.gold]
        assert others
        assert set(others) <= distractors
        assert sent.sources[sent.gold].text == item.text
    perfect = next(c for c in trust.ItemCases(item).cases("bm25") if c.kind == "perfect")
    cited = {item.text[c.span[0] : c.span[1]] for c in perfect.claims}
    assert cited == set(item.selected)
    assert {perfect.sources[c.source].text for c in perfect.claims} == {item.text}


def test_the_summary_gives_each_check_and_one_row_per_set(trust, ran, markdown_tables):
    _, stored = ran
    records = [trust.Record.from_json(record) for record in stored]
    tables = markdown_tables(trust.summary(records))
    # Each check per split, then right and wrong ledgers by set, ledgers built, reason codes.
    assert len(tables) == 2 + 4
    right, wrong = tables[2], tables[3]
    rows = {(row[0], row[1]) for row in right[1:]}
    assert rows == {(name, split) for name in ("nq-open", "clapnq") for split in ("tune", "report")}
    assert {(row[0], row[1]) for row in wrong[1:]} == rows
    # The quick run's right ledgers are all answered: nothing withheld, every gold first sent.
    withheld = right[0].index("right ledgers withheld under the policy")
    assert {row[withheld] for row in right[1:]} == {"0.0% / 0.0%"}
    assert {row[-1] for row in right[1:]} == {"100.0% / 100.0%"}
    # Every object_not_cited ledger is caught, as the full table counts it.
    caught = wrong[0].index("`object_not_cited` caught")
    assert {row[caught] for row in wrong[1:]} == {"100.0% / 100.0%"}
