"""Whether a verified citation supports its fact, as far as plain text can tell: two checks.

Both only read the ledger and the cited spans (no model, no second call), and neither changes
a verdict: they flag (``CitationCheck.flags``), and an option decides whether an answer that
rests on flagged citations abstains. Text is read as :mod:`~evidence_first._reading.words` reads it.

- **Evidence status.** A citation of a source the caller marked ``superseded`` or
  ``contradicted`` is flagged so. A source with no status is never flagged. An answer resting
  only on such sources agrees with the current ones only where they hold what its cited spans
  say of each fact's object (:func:`current_sources_agree`).
- **The fact's own words.** A fact's ``object`` must be in one of its cited spans, compared
  after Unicode NFKC normalization, case folding and collapsing whitespace (and with straight
  and curly quotes alike). If it is not, each of its numbers (a run of digits, with ``.``,
  ``,`` or ``:`` between digits) and month names (English, full or three-letter, in Latin
  letters or letters drawn like them) must be there, as whole words; an object with neither
  fails. An object that is only "yes" or "no" is checked by its claim, the fact's subject and
  relation: one span must hold each of the claim's numbers and month names and at least one
  of its other words. The check is skipped for a translation, an object (or claim) whose
  letters are all in one script in which none of its cited spans nor the sources they are cut
  from is written, and when the caller asked for an answer language (``output_language``). A
  span without letters is in no script: it never skips the check.

One more check reads the question (:func:`question_is_covered`): an answer whose cited sources
hold fewer than :data:`QUESTION_COVERAGE` of the question's words answers something near the
question rather than the question itself ("What does a half plot cost?" from a source that
prices only full plots).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from evidence_first._reading.words import (
    FUNCTION_WORDS,
    LATIN,
    MIXED,
    WORD,
    LetterCounts,
    as_latin,
    folded,
    has_word,
    holds_word,
    main_script,
    mostly_in,
    normal,
    run,
    same_word,
    term_script,
)
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.parts import Fact
from evidence_first._shapes.vocabulary import CitationFlag

__all__ = [
    "QUESTION_COVERAGE",
    "current_sources_agree",
    "object_is_cited",
    "question_is_covered",
    "status_flags",
]

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_NUMBER_OR_MONTH = re.compile(
    r"\d+(?:[.,:]\d+)*|\b(?:" + "|".join(m[:3] + f"(?:{m[3:]})?" for m in _MONTHS) + r")\b",
    re.IGNORECASE,
)
_VERDICTS = frozenset({"yes", "no"})


def status_flags(source: Evidence) -> tuple[CitationFlag, ...]:
    """The flag a citation of ``source`` earns from the status the caller gave it, if any."""
    if source.status == "superseded":
        return ("superseded_source",)
    if source.status == "contradicted":
        return ("contradicted_source",)
    return ()


def object_is_cited(
    obj: str,
    spans: Iterable[str],
    sources: Sequence[str] = (),
    *,
    claim: str = "",
    counts: LetterCounts | None = None,
) -> bool | None:
    """Whether a fact's object, or each of its numbers and dates, is in one of its spans.

    An object that is only "yes" or "no" is the fact's verdict: its ``claim`` (the fact's
    subject and relation) is looked for instead, each of its numbers and month names and at
    least one of its other words in one span. An object with neither a letter nor a digit
    states nothing a span could hold. ``None`` when the check does not apply: the object (or
    the claim) is a translation, its letters all in one script in which none of the spans nor
    their ``sources`` (the texts the spans are cut from) is written, by at least half of its
    letters. An object without letters, such as "75%", is always checked, and so is one cited
    by spans without letters ("16", "."): what a span lacks never skips the check. ``counts``
    keeps the letters counted in each source for the other facts of a ledger.
    """
    return _Texts(list(spans), sources, counts).hold(obj, claim)


class _Texts:
    """Texts normalized once, and the sources they are cut from."""

    def __init__(
        self, texts: Sequence[str], sources: Sequence[str] = (), counts: LetterCounts | None = None
    ) -> None:
        self.texts = texts
        self.sources = sources or texts
        self.normal = [normal(text) for text in texts]
        self.counts = counts or LetterCounts()

    def hold(self, obj: str, claim: str = "") -> bool | None:
        """:func:`object_is_cited` of ``obj`` (and its fact's ``claim``) over these texts."""
        wanted = normal(obj).rstrip(".!")
        if wanted in _VERDICTS:
            return self._holds_claim(claim)
        if any(map(str.isalnum, wanted)) and any(_contains(text, wanted) for text in self.normal):
            return True
        words = [normal(word) for word in _NUMBER_OR_MONTH.findall(as_latin(obj))]
        if words and any(all(has_word(text, word) for word in words) for text in self.normal):
            return True
        return None if self._translated(obj) else False

    def _holds_claim(self, claim: str) -> bool | None:
        """Whether one text holds each number and month of ``claim`` and one of its other words."""
        numbers = [normal(word) for word in _NUMBER_OR_MONTH.findall(as_latin(claim))]
        words = [word for word in WORD.findall(normal(claim)) if _tells(word)]
        if any(
            all(has_word(text, number) for number in numbers)
            and any(holds_word(text, word) for word in words)
            for text in self.normal
        ):
            return True
        return None if self._translated(claim) else False

    def _translated(self, term: str) -> bool:
        """Whether ``term`` is in one script and none of the texts nor their sources is."""
        script = term_script(term)
        if script is None or script == MIXED:
            return False
        written = self.counts.written_in
        return not any(written(text, script) for text in (*self.texts, *self.sources))


def _contains(text: str, wanted: str) -> bool:
    """``wanted`` in ``text``, its numbers whole: "June 1" is not in "June 15"."""
    before = r"(?<!\d)" if wanted[0].isdigit() else ""
    after = r"(?!\d)" if wanted[-1].isdigit() else ""
    return re.search(before + re.escape(wanted) + after, text) is not None


def current_sources_agree(
    question: str, facts: Iterable[Fact], sources: Mapping[str, Evidence], current: Sequence[str]
) -> bool:
    """Whether the ``current`` texts hold what each fact's cited spans say of its object.

    What a span says of an object is the object where the span holds it, with the words of
    its source around it, on each side up to the nearest word that is neither an English
    function word nor one of the ``question``'s, within the sentence (:func:`_statements`):
    "15" cited from "The launch moved to June 15." is looked for as "june 15". An object made
    only of function words, punctuation or the question's own words, a yes or a no, or one its
    spans do not hold, says nothing a current source could agree with.
    """
    asked = WORD.findall(folded(question))
    said = [set(_statements(fact, sources, asked)) for fact in facts]
    if not all(said):
        return False
    held = [normal(text) for text in current]
    return all(
        any(_holds_phrase(text, phrase) for phrase in found for text in held) for found in said
    )


# How far on each side of a cited span, in characters, the words around an object are read,
# and at how many of its places in one span.
_AROUND = 256
_PLACES = 4
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|[\u3002\uff01\uff1f]")


def _statements(fact: Fact, sources: Mapping[str, Evidence], asked: Sequence[str]) -> Iterator[str]:
    """What each span of ``fact`` says of its object: the object and the words around it."""
    wanted = normal(fact.object).rstrip(".!")
    if wanted in _VERDICTS or not any(_tells(word, asked) for word in WORD.findall(wanted)):
        return
    for citation in fact.citations:
        text = sources[citation.source_id].text
        for span in citation.evidence_spans:
            start, end = span.char_start, span.char_end
            before = run(text[max(0, start - _AROUND) : start])
            inside = run(text[start:end])
            after = run(text[end : end + _AROUND])
            at = inside.find(wanted)
            for _ in range(_PLACES):
                if at == -1:
                    break
                left = _words_before((before + inside[:at])[-_AROUND:], asked)
                right = _words_after((inside[at + len(wanted) :] + after)[:_AROUND], asked)
                yield normal(left + wanted + right)
                at = inside.find(wanted, at + 1)


def _words_before(text: str, asked: Sequence[str]) -> str:
    """The end of ``text``, back to the nearest telling word or its sentence's start."""
    ends = list(_SENTENCE_END.finditer(text))
    start = ends[-1].end() if ends else 0
    for word in reversed(list(WORD.finditer(text, start))):
        if _tells(word.group(), asked):
            return text[word.start() :]
    return text[start:]


def _words_after(text: str, asked: Sequence[str]) -> str:
    """The start of ``text``, on to the nearest telling word or its sentence's end."""
    found = _SENTENCE_END.search(text)
    end = found.start() if found else len(text)
    for word in WORD.finditer(text, 0, end):
        if _tells(word.group(), asked):
            return text[: word.end()]
    return text[:end]


def _tells(word: str, asked: Sequence[str] = ()) -> bool:
    """Whether a folded word says something: a number or a longer word, none of those asked.

    A function word says nothing, and neither does a word of ``asked`` (the question's).
    """
    return (
        (len(word) > 1 or word.isdigit())
        and word not in FUNCTION_WORDS
        and not any(same_word(word, other) for other in asked)
    )


def _holds_phrase(text: str, phrase: str) -> bool:
    """``phrase`` in ``text``, neither end inside a longer word."""
    at = text.find(phrase)
    while at != -1:
        end = at + len(phrase)
        if not (
            (at and WORD.match(phrase) and WORD.match(text, at - 1))
            or (WORD.match(phrase[-1]) and WORD.match(text, end))
        ):
            return True
        at = text.find(phrase, at + 1)
    return False


# The share of a question's words its cited sources must hold. Chosen on the tune half of the
# quality set (benchmarks/results/quality-tune-qwen2.5-coder-1.5b.jsonl) among 1/2 to 1, with
# the embedded reader's floors chosen again for each: 2/3 kept the most right answers at the
# floors in both citation modes together (31 of 66, tied with 0.6 and 0.75), then the best
# precision, then the lowest share.
QUESTION_COVERAGE = 2 / 3

# The check reads English questions only: one with fewer than two function words
# (:data:`~evidence_first._reading.words.FUNCTION_WORDS`) is not checked. These are function words
# of
# English that are also function words of German, Spanish, French or Dutch ("Was war in ...",
# "Wie viele ... am ..."): a question needs one other English function word to read as
# English. On XQuAD's questions this kept 236 of 240 English ones and let 5 of 240 German ones
# through (16 before), with NQ-open's English questions 2,631 of 2,655 (2,635).
_SHARED_FUNCTION_WORDS = frozenset(
    {"was", "in", "an", "am", "so", "also", "will", "no", "me", "on", "or"}
)


def question_is_covered(
    question: str, cited: Sequence[str], others: Sequence[str] = ()
) -> bool | None:
    """Whether the ``cited`` texts hold at least :data:`QUESTION_COVERAGE` of the question's words.

    The question's words are its distinct words of two characters or more, after Unicode NFKC
    normalization and case folding, less English function words; each is looked for as a word
    of the texts normalized alike (:func:`~evidence_first._reading.words.same_word`). A word the
    cited
    texts lack but one of ``others`` (the other sources sent) holds is left out: it names what
    the sources are about, such as a project a cited note does not repeat. ``None`` when the
    check does not apply: the question has fewer than two English function words, or only ones
    German, Spanish, French or Dutch share ("was", "in"...), so it is not English or too short
    to tell; or it has no other word; or more than half of the cited texts' letters, counted
    over all of them, are in another script than most of the question's (a question cannot
    share words with a translation; :func:`~evidence_first._reading.words.mostly_in`). The texts are
    read a piece at a time, and no further than needed: an answer whose cited texts hold the
    question's words early is decided on their first piece, and their letters are counted only
    for an answer that would be flagged.
    """
    asked = _asked_words(question)
    if not asked:
        return None
    lacking = set(asked)
    for piece in _pieces(cited):
        lacking = {word for word in lacking if not holds_word(piece, word)}
        if len(asked) - len(lacking) >= QUESTION_COVERAGE * len(asked):
            return True
    found = len(asked) - len(lacking)
    for piece in _pieces(others):
        if not lacking:
            break
        lacking = {word for word in lacking if not holds_word(piece, word)}
    if found >= QUESTION_COVERAGE * (found + len(lacking)):
        return True
    # Counting letters by script costs a pass over the cited texts: only for an answer the
    # check would flag.
    return None if mostly_in(cited, main_script(question) or LATIN) is False else False


def _asked_words(question: str) -> list[str]:
    """The question's words the check looks for, in order; none when it is not read as English."""
    words = [word for word in WORD.findall(folded(question)) if len(word) > 1]
    function_words = [word for word in words if word in FUNCTION_WORDS]
    if len(function_words) < 2 or _SHARED_FUNCTION_WORDS.issuperset(function_words):
        return []
    return list(dict.fromkeys(word for word in words if word not in FUNCTION_WORDS))


# Texts are folded and searched in pieces of about this many characters, cut after whitespace.
_PIECE = 1 << 16


def _pieces(texts: Sequence[str]) -> Iterator[str]:
    """Each text folded a piece at a time, each piece ending at whitespace."""
    for text in texts:
        start = 0
        while start < len(text):
            end = start + _PIECE
            if end < len(text):
                cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
                end = cut + 1 if cut > start else end
            yield folded(text[start:end])
            start = end
