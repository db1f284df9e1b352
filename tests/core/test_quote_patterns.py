"""Quote mode's request schema: each source's ID paired with the quotes of its text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_first import Evidence, ModelResponse, answer_from_evidence
from evidence_first._models.dialects import DIALECTS
from evidence_first._models.writing import schema_in
from evidence_first._reading.parsing import parse_response
from evidence_first._reading.verify import verify_citations
from evidence_first._sending.citing import quote as quote_module
from evidence_first._sending.citing.quote import QuoteStyle, quote_pattern
from evidence_first._sending.passages import SentSources
from evidence_first._sending.schema import ledger_schema
from evidence_first._shapes.limits import ANCHORED_QUOTE_CHARS
from evidence_first.adapters import AnswerOptions

_UNSAFE = re.compile(r'["\\\x00-\x1f]')
_WORDS = st.text(
    alphabet=st.sampled_from(list('ab Z9_.,;:()[]|?*+$^-"\\\n\té😀')), min_size=1, max_size=60
)
# Where the pattern lets a quote start: a line's, a sentence's or a clause's first word.
_STARTS = re.compile(r"(?:^|(?<=[.!?]\s)|(?<=[,;:\u2013\u2014]\s))\w", re.MULTILINE)


def _word_end(text: str, end: int) -> bool:
    """Whether ``end`` is where a quote may end: after a word, or at its line's end."""
    at_line_end = end == len(text) or text[end] == "\n"
    return at_line_end or (
        (text[end - 1].isalnum() or text[end - 1] == "_")
        and not (text[end].isalnum() or text[end] == "_")
    )


@settings(max_examples=300, deadline=None)
@given(_WORDS, st.data())
def test_every_clean_excerpt_from_a_start_to_a_word_of_its_line_matches_its_sources_pattern(
    text, data
):
    starts = [m.start() for m in _STARTS.finditer(text)]
    if not starts:
        assert quote_pattern(text, 1000) == "^$"
        return
    start = data.draw(st.sampled_from(starts))
    line_end = text.find("\n", start) % (len(text) + 1)
    words = list(re.finditer(r"\w+", text[start:line_end]))
    # At least two words, where the line has them, and ending at a word or the line's end.
    least = start + words[min(1, len(words) - 1)].end()
    ends = [end for end in range(least, line_end + 1) if _word_end(text, end)]
    excerpt = text[start : data.draw(st.sampled_from(ends))]
    matched = re.fullmatch(quote_pattern(text, 1000), excerpt)
    assert (matched is not None) == (_UNSAFE.search(excerpt) is None)


@settings(max_examples=300, deadline=None)
@given(_WORDS, st.integers(1, 80), st.data())
def test_every_quote_a_pattern_allows_is_an_excerpt_of_its_text_within_the_bound(text, most, data):
    pattern = quote_pattern(text, most)
    quote = data.draw(st.from_regex(pattern, fullmatch=True))
    assert len(quote) <= most
    if pattern == "^$":
        assert quote == ""
        return
    assert _UNSAFE.search(quote) is None
    assert "\n" not in quote
    assert any(text.startswith(quote, m.start()) for m in _STARTS.finditer(text))


def test_a_quote_is_its_words_exactly_as_written_from_a_start_and_nothing_with_a_quote_mark():
    pattern = quote_pattern('The launch said "go" (at 50%). Then, at noon: lunch.', 1000)
    for quote in ("The launch", "The launch said", "Then, at noon", "at noon: lunch.", "lunch."):
        assert re.fullmatch(pattern, quote), quote
    # A lower-case "the", a mid-sentence or mid-word start, a double quote, a backslash and two
    # places of the text joined are never written.
    for quote in (
        "the launch",
        "launch said",
        "aunch said",
        'The launch said "go"',
        "Then\\",
        "The launch at noon",
        "The",
    ):
        assert not re.fullmatch(pattern, quote), quote


def test_a_quote_stays_within_its_line_and_the_anchored_bound():
    text = "First line ends here.\nSecond line. " + "word " * 100
    pattern = quote_pattern(text, 1000)
    assert re.fullmatch(pattern, "First line ends here.")
    assert not re.fullmatch(pattern, "First line ends here.\nSecond line.")
    second = text[text.index("Second") :].strip()
    assert len(second) > ANCHORED_QUOTE_CHARS
    # The longest quote from "Second" ends at the last word within the bound.
    within = second[: ANCHORED_QUOTE_CHARS + 1].rsplit(" ", 1)[0]
    assert re.fullmatch(pattern, within)
    assert not re.fullmatch(pattern, within + " word")


def _citation_items(sources: list[Evidence], **options: object) -> dict:
    schema = ledger_schema(
        QuoteStyle().shape(SentSources(tuple(sources))), AnswerOptions(**options)
    )
    return schema["properties"]["facts"]["items"]["properties"]["citations"]["items"]


SOURCES = [
    Evidence(id="notes", text="The launch moved to June 15."),
    Evidence(id="mail", text="Budget review is Friday."),
]


def test_each_source_sent_is_a_choice_of_its_id_and_its_quotes():
    items = _citation_items(SOURCES, max_output_tokens=512)
    for source, choice in zip(SOURCES, items["anyOf"], strict=True):
        assert list(choice["properties"]) == ["quote", "source_id", "stance"] == choice["required"]
        assert choice["properties"]["source_id"]["enum"] == [source.id]
        assert re.fullmatch(choice["properties"]["quote"]["pattern"], source.text)
        other = next(s for s in SOURCES if s is not source)
        assert not re.fullmatch(choice["properties"]["quote"]["pattern"], other.text)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_dialect_without_patterns_gets_one_citation_object_with_every_id(dialect):
    schema = ledger_schema(
        QuoteStyle().shape(SentSources(tuple(SOURCES))), AnswerOptions(max_output_tokens=512)
    )
    written = schema_in(schema, dialect)
    citations = written.get("anyOf", [written])[0]["properties"]["facts"]["items"]
    items = citations["properties"]["citations"]["items"]
    if DIALECTS[dialect].reads_patterns:
        assert [c["properties"]["source_id"]["enum"] for c in items["anyOf"]] == [
            ["notes"],
            ["mail"],
        ]
    else:
        assert "anyOf" not in items
        assert items["properties"]["source_id"]["enum"] == ["notes", "mail"]
        assert "pattern" not in items["properties"]["quote"]


def test_past_the_pattern_budget_the_citation_is_one_object_with_every_id(monkeypatch):
    monkeypatch.setattr(quote_module, "MAX_ANCHOR_PATTERN_CHARS", 40)
    items = _citation_items(SOURCES, max_output_tokens=512)
    assert "anyOf" not in items
    assert items["properties"]["source_id"]["enum"] == ["notes", "mail"]
    assert "pattern" not in items["properties"]["quote"]


def test_verification_still_rejects_a_quote_cited_under_another_sources_id():
    ledger = (
        '{"answerable": "yes", "facts": [{"subject": "launch", "relation": "moved to", '
        '"object": "June 15", "citations": [{"quote": "The launch moved to June 15.", '
        '"source_id": "mail"}]}], "answer": "June 15 [F1]", "inference": null, '
        '"missing_evidence": []}'
    )
    parsed = parse_response(
        ModelResponse(text=ledger),
        max_response_chars=10_000,
        citation_model=QuoteStyle.citation_model,
    )
    assert parsed.ledger is not None
    verdict = verify_citations(parsed.ledger, SentSources(tuple(SOURCES)), QuoteStyle())
    assert [check.code for check in verdict.checks] == ["quote_not_in_source"]


class _Declaring:
    """A model that declares a dialect and abstains."""

    def __init__(self, dialect: str | None) -> None:
        self.dialect = dialect
        self.requests: list = []

    def generate(self, request):
        self.requests.append(request)
        return (
            '{"answerable": "no", "facts": [], "answer": null, "inference": null, '
            '"missing_evidence": ["x"]}'
        )


@pytest.mark.parametrize("dialect", [None, "json-schema", "openai", "full"])
def test_patterns_are_built_only_for_a_model_whose_provider_reads_them(dialect):
    model = _Declaring(dialect)
    answer_from_evidence("When is the launch?", SOURCES, model)
    schema = model.requests[0].json_schema
    citations = schema.get("anyOf", [schema])[0]["properties"]["facts"]["items"]
    items = citations["properties"]["citations"]["items"]
    if dialect == "full":
        assert [c["properties"]["source_id"]["enum"] for c in items["anyOf"]] == [
            ["notes"],
            ["mail"],
        ]
        assert all("pattern" in c["properties"]["quote"] for c in items["anyOf"])
    else:
        assert "anyOf" not in items
        assert items["properties"]["source_id"]["enum"] == ["notes", "mail"]
        assert "pattern" not in items["properties"]["quote"]
