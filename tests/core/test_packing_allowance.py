"""The allowance counts the sources, not the framing: the same charge in both citation modes.

``max_context_tokens`` is the estimated allowance for the serialized sources. Passage mode's
labels, structure and datamark are the prompt's framing: reported in the budget with the
question's, never charged to the caller's evidence. A model's profile may cap the allowance.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_first import Evidence, InvalidRequestError, ModelProfile, answer_from_evidence
from evidence_first._engine.plan import plan_answer
from evidence_first._models.profiles import profile_for_name
from evidence_first._sending.citing.passage import PassageStyle
from evidence_first._sending.prompt import serialize_source
from evidence_first._sending.tokens import estimate_tokens
from evidence_first.adapters import AnswerOptions
from evidence_first.local import LocalModel

_SENTENCE = (
    "In fiscal {year}, net revenues were ${now:,}.{a} million, an increase of {rise}.{b}% "
    "from ${then:,}.{c} million in fiscal {last}, primarily due to higher volumes in the "
    "Americas segment. "
)


def _finance_excerpt(chars: int) -> str:
    """Dense, number-heavy prose of exactly ``chars`` characters, like a filing's excerpt."""
    parts: list[str] = []
    for k in itertools.count():
        parts.append(
            _SENTENCE.format(
                year=2000 + k % 20,
                now=1000 + 37 * k,
                a=k % 10,
                rise=k % 13,
                b=k % 7,
                then=900 + 29 * k,
                c=(k + 3) % 10,
                last=1999 + k % 20,
            )
        )
        if sum(map(len, parts)) >= chars:
            return "".join(parts)[:chars]
    raise AssertionError  # pragma: no cover


class _Unused:
    """A model that is planned for and never called."""

    def __init__(self, profile: ModelProfile | None = None) -> None:
        if profile is not None:
            self.profile = profile

    def generate(self, request: Any) -> str:
        raise AssertionError("planning only")


def _plan(sources: list[Evidence], mode: str, **options: Any) -> Any:
    return plan_answer(
        AnswerOptions(citation_mode=mode, **options), "What were net revenues?", sources, _Unused()
    )


def test_an_excerpt_that_fits_in_quote_mode_is_sent_in_passage_mode_at_the_default_allowance(
    model,
):
    # 3,241 characters of filing prose estimate at 1,281 tokens serialized; its passage form,
    # every space datamarked and every sentence labeled, at more than the default 2,048.
    excerpt = Evidence(id="10-k-excerpt", text=_finance_excerpt(3241))
    answer = answer_from_evidence(
        "What were net revenues?", [excerpt], model, citation_mode="passage"
    )
    assert answer.model_called
    assert answer.used_source_ids == ("10-k-excerpt",)
    assert answer.omissions == {}
    assert model.calls == 1
    # Its passages are what the model reads.
    assert "10-k-excerpt#1" in model.requests[0].user


def test_the_charge_is_the_serialized_fields_whatever_the_mode_and_the_framing_is_reported():
    sources = [
        Evidence(id="notes", text="Standup, April 28. The launch moved to June 15.\nDana owns it."),
        Evidence(id="email", text="The budget review is on Friday. Priya chairs it.", speaker="P"),
    ]
    quote, passage = _plan(sources, "quote"), _plan(sources, "passage")
    defences = AnswerOptions().defences
    charged = sum(estimate_tokens(serialize_source(s, defences=defences)) + 2 for s in sources)
    assert quote.budget.sources_tokens == passage.budget.sources_tokens == charged
    style = PassageStyle()
    framing = sum(
        estimate_tokens(serialize_source(s, style.text_fields(s, style.passages(s), defences)))
        - estimate_tokens(serialize_source(s, defences=defences))
        for s in sources
    )
    assert framing > 0
    # The framing goes with the question's part, so the parts still add up to the prompt.
    assert passage.budget.question_tokens == quote.budget.question_tokens + framing
    budget = passage.budget
    assert budget.total_tokens == (
        budget.system_tokens + budget.question_tokens + budget.sources_tokens
    )
    assert budget.total_tokens >= estimate_tokens(passage.request.user)


def test_a_retrievers_ten_paragraphs_are_sent_whole_in_both_modes_as_they_are_in_quote_mode():
    paragraph = (
        "The Harbor project migrated billing to the new provider in three waves, each one "
        "reviewed by the security team before the next began, and the last wave ended in June."
    )
    sources = [Evidence(id=f"p{n}", text=f"{paragraph} Paragraph {n}. " * 3) for n in range(10)]
    quote, passage = _plan(sources, "quote"), _plan(sources, "passage")
    assert len(quote.packed.sent) == len(passage.packed.sent) == 10
    # Their passage form alone would have been more than the default allowance.
    assert passage.budget.sources_tokens + passage.packed.framing_tokens > 2048


_TEXT = st.text(
    alphabet=st.sampled_from([*"ab Z9.,;:!?\"'<>[]\\\n\t", "\u3000", "\xa0", "é", "漢", "。", "ˆ"]),
    max_size=120,
)
_IDS = st.text(alphabet=st.sampled_from([*"ab9#-_ <>", "é"]), min_size=1, max_size=12)


@st.composite
def _sources(draw: st.DrawFn) -> list[Evidence]:
    ids = draw(st.lists(_IDS, min_size=1, max_size=6, unique=True))
    return [
        Evidence(
            id=source_id,
            text=draw(_TEXT),
            speaker=draw(st.none() | st.sampled_from(["Priya", "<bot>"])),
            status=draw(st.sampled_from([None, "current", "superseded", "contradicted"])),
            observed_at=draw(st.none() | st.just(datetime(2026, 4, 28, tzinfo=UTC))),
        )
        for source_id in ids
    ]


@settings(max_examples=150, deadline=None)
@given(_sources(), st.integers(1, 400), st.booleans())
def test_whatever_fits_in_quote_mode_fits_in_passage_mode_for_the_same_charge(
    sources, allowance, by_length
):
    options: dict[str, Any] = {"max_context_tokens": allowance}
    if by_length:
        options["token_counter"] = len
    quote, passage = _plan(sources, "quote", **options), _plan(sources, "passage", **options)
    assert [s.id for s in passage.packed.sent] == [s.id for s in quote.packed.sent]
    assert passage.omissions == quote.omissions
    assert passage.budget.sources_tokens == quote.budget.sources_tokens <= allowance


def test_the_embedded_models_cap_the_allowance_with_an_error_naming_the_field_and_the_cap():
    reader = _Unused(profile_for_name("qwen2.5-coder-1.5b"))
    sources = [Evidence(id="a", text="The launch moved to June 15.")]
    with pytest.raises(InvalidRequestError) as raised:
        answer_from_evidence("When?", sources, reader, max_context_tokens=8193)
    assert raised.value.field == "max_context_tokens"
    assert "at most 8192" in str(raised.value)
    assert "8193" in str(raised.value)
    plan = plan_answer(AnswerOptions(max_context_tokens=8192), "When?", sources, reader)
    assert plan.request is not None
    assert LocalModel().profile.max_context_tokens == 8192
    assert LocalModel("gemma-3-270m").profile.max_context_tokens == 8192


def test_a_profile_without_a_cap_takes_the_options_whole_range():
    sources = [Evidence(id="a", text="The launch moved to June 15.")]
    plan = plan_answer(AnswerOptions(max_context_tokens=32_768), "When?", sources, _Unused())
    assert plan.budget.max_context_tokens == 32_768


def test_the_readers_profile_sets_its_timeout_where_the_caller_sets_none():
    reader = _Unused(profile_for_name("qwen2.5-coder-1.5b"))
    sources = [Evidence(id="a", text="The launch moved to June 15.")]
    assert plan_answer(AnswerOptions(), "When?", sources, reader).request.timeout == 300.0
    mine = plan_answer(AnswerOptions(timeout=60), "When?", sources, reader)
    assert mine.request.timeout == 60.0
    assert plan_answer(AnswerOptions(), "When?", sources, _Unused()).request.timeout == 60.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_context_tokens", 0),
        ("max_context_tokens", 32_769),
        ("max_context_tokens", True),
        ("max_context_tokens", 8192.0),
        ("timeout", 0),
        ("timeout", 300.5),
        ("timeout", float("nan")),
        ("timeout", False),
    ],
)
def test_a_profiles_cap_and_timeout_are_checked_like_the_options(field, value):
    with pytest.raises(InvalidRequestError) as raised:
        ModelProfile(**{field: value})
    assert raised.value.field == f"profile.{field}"
