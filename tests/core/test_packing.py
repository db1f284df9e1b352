"""Packing takes sources in order, omits whole sources that do not fit, and says why."""

from __future__ import annotations

from evidence_first import Evidence, answer_from_evidence


def _count_words(text: str) -> int:
    return len(text.split())


def test_oversized_source_is_omitted_whole_and_later_smaller_one_fits(model):
    sources = [
        Evidence(id="small-1", text="one two three"),
        Evidence(id="large", text="word " * 200),
        Evidence(id="small-2", text="four five"),
    ]
    answer = answer_from_evidence(
        "q?", sources, model, max_context_tokens=40, token_counter=_count_words
    )
    assert answer.used_source_ids == ("small-1", "small-2")
    assert answer.omitted_source_ids == ("large",)
    assert answer.omissions == {"large": "over_budget"}
    sent = model.requests[0].user
    assert "word word" not in sent  # never truncated into the prompt


def test_sources_are_considered_in_the_order_given(model):
    sources = [Evidence(id=f"s{i}", text="alpha beta gamma") for i in range(5)]
    answer = answer_from_evidence(
        "q?", sources, model, max_context_tokens=16, token_counter=_count_words
    )
    # Each serialized source, {"id": "s0", "text": "alpha beta gamma"}, is 6 words; the
    # separator adds 2.
    assert answer.used_source_ids == ("s0", "s1")
    assert answer.omitted_source_ids == ("s2", "s3", "s4")
    assert model.requests[0].user.index('"s0"') < model.requests[0].user.index('"s1"')


def test_each_omitted_source_carries_its_reason(model):
    sources = [
        Evidence(id="other-team", text="t", metadata={"scope": "b"}, score=0.9),
        Evidence(id="weak", text="t", metadata={"scope": "a"}, score=0.1),
        Evidence(id="unscored", text="t", metadata={"scope": "a"}),
        Evidence(id="blank", text="  \n ", metadata={"scope": "a"}, score=0.9),
        Evidence(id="no-scope", text="t", score=0.9),
        Evidence(id="huge", text="x " * 5000, metadata={"scope": "a"}, score=0.9),
        Evidence(id="kept", text="fine", metadata={"scope": "a"}, score=0.8),
    ]
    answer = answer_from_evidence(
        "q?", sources, model, min_score=0.5, scope={"a"}, max_context_tokens=100
    )
    assert answer.used_source_ids == ("kept",)
    assert answer.omissions == {
        "other-team": "out_of_scope",
        "weak": "below_min_score",
        "unscored": "below_min_score",
        "blank": "empty",
        "no-scope": "out_of_scope",
        "huge": "over_budget",
    }
    assert answer.omitted_source_ids == tuple(answer.omissions)


def test_scope_key_selects_the_metadata_key(model):
    sources = [
        Evidence(id="mine", text="t", metadata={"tenant": "acme"}),
        Evidence(id="theirs", text="t", metadata={"tenant": "globex"}),
    ]
    answer = answer_from_evidence("q?", sources, model, scope=["acme"], scope_key="tenant")
    assert answer.used_source_ids == ("mine",)
    assert answer.omissions == {"theirs": "out_of_scope"}


def test_fewer_than_min_evidence_packed_sources_abstain_without_a_model_call(model):
    sources = [
        Evidence(id="a", text="fits"),
        Evidence(id="b", text="word " * 500),
    ]
    answer = answer_from_evidence("q?", sources, model, min_evidence=2, max_context_tokens=50)
    assert answer.status == "insufficient_evidence"
    assert answer.model_called is False
    assert model.calls == 0
    assert answer.missing_evidence == ()
    assert answer.answer is None
    assert answer.diagnostic is not None
    assert "min_evidence is 2" in answer.diagnostic
    assert answer.raw_response is None
    assert answer.used_source_ids == ("a",)


def test_no_sources_abstain_without_a_model_call(model):
    answer = answer_from_evidence("q?", [], model)
    assert answer.status == "insufficient_evidence"
    assert answer.model_called is False
    assert model.calls == 0
    assert answer.diagnostic == "no sources were supplied"
    assert answer.citations_verified is False


def test_only_unusable_sources_abstain_without_a_model_call(model):
    answer = answer_from_evidence("q?", [Evidence(id="a", text="")], model)
    assert answer.model_called is False
    assert answer.omissions == {"a": "empty"}
    assert model.calls == 0


def test_budget_reports_the_whole_prompt(model):
    answer = answer_from_evidence("When?", [Evidence(id="a", text="June 15.")], model)
    budget = answer.budget
    assert budget.system_tokens > 0
    assert budget.question_tokens > 0
    assert budget.sources_tokens > 0
    assert budget.total_tokens == (
        budget.system_tokens + budget.question_tokens + budget.sources_tokens
    )
    assert budget.sources_tokens <= budget.max_context_tokens == 2048
    assert budget.max_output_tokens == 2048


def test_packing_is_deterministic(scripted, make_ledger):
    sources = [Evidence(id=f"s{i}", text="text " * (i * 37 % 90 + 1)) for i in range(40)]
    first = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    second = scripted(make_ledger(answer=None, missing_evidence=["m"]))
    a = answer_from_evidence("q?", sources, first, max_context_tokens=500)
    b = answer_from_evidence("q?", sources, second, max_context_tokens=500)
    assert a.used_source_ids == b.used_source_ids
    assert first.requests[0].user == second.requests[0].user


def test_confidence_is_the_strongest_score_among_sent_sources(model):
    sources = [
        Evidence(id="a", text="t", score=0.4),
        Evidence(id="b", text="t", score=0.7),
        Evidence(id="c", text="x " * 5000, score=0.99),  # omitted: does not count
        Evidence(id="d", text="t"),
    ]
    answer = answer_from_evidence("q?", sources, model, max_context_tokens=200)
    assert answer.omissions == {"c": "over_budget"}
    assert answer.confidence == 0.7


def test_confidence_is_none_without_scores(model):
    answer = answer_from_evidence("q?", [Evidence(id="a", text="t")], model)
    assert answer.confidence is None
