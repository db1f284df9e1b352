"""Whether a verified citation supports its fact, as far as plain text can tell: two checks.

Both only read the ledger and the cited spans (no model, no second call), and neither changes
a verdict: they flag (``CitationCheck.flags``), and an option decides whether an answer that
rests on flagged citations abstains. Text is read as :mod:`~evidence_first._reading.words`
reads it.

- **Evidence status.** A citation of a source the caller marked ``superseded`` or
  ``contradicted`` is flagged so. A source with no status is never flagged. An answer resting
  only on such sources agrees with the current ones only where they hold what its cited spans
  say of each fact's object (:func:`current_sources_agree`).
- **The fact's own words** (:func:`object_is_cited`). An object that states numbers or dates
  must have each of them in one citation, read as values
  (:mod:`~evidence_first._reading.quantities`): "2017-07-25" is "July 25, 2017", but "June 16"
  is not in "Room 16 is booked". Any other object must be in a citation whole (after Unicode
  NFKC normalization, case folding, collapsed whitespace, straight and curly quotes alike), or
  each of its words must be: a word of the cited text
  (:func:`~evidence_first._reading.words.same_word`), or one of the question's own words that
  the source holds around the cited spans. An object made only of the question's words
  restates the question: its fact's subject must then be held the same way, or, for a yes-or-no
  question, its claim, as a "yes" or a "no" is checked by its claim (the fact's subject and
  relation: one span must hold each of the claim's numbers and dates, read as values, and at
  least one of its other words). The check is skipped for a translation, an object (or claim)
  whose letters are all in one script in which none of its cited spans nor the sources they
  are cut from is written, when the caller asked for an answer language
  (``output_language``), and under ``unsupported_facts="off"``. A span without letters is in
  no script: it never skips the check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from evidence_first._reading.quantities import object_values, stated_values
from evidence_first._reading.words import (
    FUNCTION_WORDS,
    MIXED,
    WORD,
    LetterCounts,
    as_latin,
    folded,
    holds_word,
    normal,
    run,
    same_word,
    term_script,
)
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.parts import EvidenceSpan, Fact
from evidence_first._shapes.vocabulary import CitationFlag

__all__ = [
    "cited_around",
    "current_sources_agree",
    "object_is_cited",
    "status_flags",
]

_VERDICTS = frozenset({"yes", "no"})
# A question asked to be answered yes or no opens with an auxiliary verb.
_YES_OR_NO = re.compile(
    r"\s*(?:is|are|was|were|am|has|have|had|do|does|did|can|could|will|would|shall|should"
    r"|may|might|must)\b"
)


def status_flags(source: Evidence) -> tuple[CitationFlag, ...]:
    """The flag a citation of ``source`` earns from the status the caller gave it, if any."""
    if source.status == "superseded":
        return ("superseded_source",)
    if source.status == "contradicted":
        return ("contradicted_source",)
    return ()


def object_is_cited(
    obj: str,
    citations: Iterable[str],
    sources: Sequence[str] = (),
    *,
    subject: str = "",
    relation: str = "",
    question: str = "",
    around: Sequence[str] = (),
    counts: LetterCounts | None = None,
) -> bool | None:
    """Whether a fact's object is in its cited text, as the module says.

    ``citations`` holds each citation's text: its spans as they stand in the source, groups of
    passages apart joined by a line break, which no date runs across. ``around`` holds the
    text of each citation's source around its spans (:func:`cited_around`), where the
    ``question``'s own words count. The fact's ``subject`` and ``relation`` are its claim, read
    for an object that is a verdict ("yes", "no") or that restates the question. An object with
    neither a letter nor a digit states nothing a span could hold. ``None`` when the check does
    not apply: the object (or the claim) is a translation, its letters all in one script in
    which none of the spans nor their ``sources`` (the texts the spans are cut from) is
    written, by at least half of its letters. An object without letters, such as "75%", is
    always checked, and so is one cited by spans without letters ("16", "."): what a span
    lacks never skips the check. ``counts`` keeps the letters counted in each source for the
    other facts of a ledger.
    """
    texts = list(citations)
    read = _Texts(texts, sources, counts, question=question, around=around)
    return read.hold(obj, subject, relation)


class _Texts:
    """Texts normalized once, and the sources they are cut from."""

    def __init__(
        self,
        texts: Sequence[str],
        sources: Sequence[str] = (),
        counts: LetterCounts | None = None,
        *,
        question: str = "",
        around: Sequence[str] = (),
    ) -> None:
        self.texts = texts
        self.sources = sources or texts
        self.normal = [normal(text) for text in texts]
        self.counts = counts or LetterCounts()
        self.question = question
        self.around = around

    def hold(self, obj: str, subject: str = "", relation: str = "") -> bool | None:
        """:func:`object_is_cited` of ``obj`` (and its fact's claim) over these texts."""
        wanted = normal(obj).rstrip(".!")
        if wanted in _VERDICTS:
            return self._holds_claim(f"{subject} {relation}")
        latin = folded(as_latin(obj))
        values = object_values(latin)
        if values:
            # Its numbers and dates are what it states: each read as a value, never across a
            # line break, whatever the object's other words.
            stated = [stated_values(folded(text)) for text in self.texts]
            held = all(any(found.holds(value) for found in stated) for value in values)
        else:
            held = any(map(str.isalnum, wanted)) and self._holds_words(wanted, subject, relation)
        if held:
            return True
        return None if self._translated(obj) else False

    def _holds_words(self, obj: str, subject: str, relation: str) -> bool:
        """Whether ``obj`` is cited whole, or each of its words that says something is held.

        A word is held where a cited text holds it, or where it is one of the question's own
        words and the text around the spans holds it. An object all of whose words are the
        question's own restates the question and says nothing of its answer: the fact's
        ``subject`` is held in its place, or, for a yes-or-no question, its claim, as a
        verdict's is; and one of its words at least must be held, so that the cited text
        speaks of what the question asks.
        """
        question = folded(self.question)
        asked = [word for word in WORD.findall(question) if _tells(word)]
        words = self._telling(obj, asked)
        if words and all(own for _, own in words):
            # A restatement: what the fact says is in its subject, or, asked yes or no, in its
            # subject and relation together; the cited text must still speak of the object.
            if not any(self._held(word, own) for word, own in words):
                return False
            if _YES_OR_NO.match(question):
                return self._holds_claim(f"{subject} {relation}") is True
            named = self._telling(folded(subject), asked)
            return bool(named) and all(self._held(word, own) for word, own in named)
        if any(_contains(text, obj) for text in self.normal):
            return True
        return bool(words) and all(self._held(word, own) for word, own in words)

    @staticmethod
    def _telling(term: str, asked: Sequence[str]) -> list[tuple[str, bool]]:
        """The words of ``term`` that say something, each with whether the question asks it."""
        return [
            (word, any(same_word(word, other) for other in asked))
            for word in WORD.findall(term)
            if _tells(word)
        ]

    def _held(self, word: str, asked: bool) -> bool:
        """Whether a cited text holds ``word``, or, ``asked`` by the question, the text around."""
        if any(holds_word(text, word) for text in self.normal):
            return True
        return asked and any(holds_word(normal(text), word) for text in self.around)

    def _holds_claim(self, claim: str) -> bool | None:
        """Whether one text holds each number and date of ``claim`` and one of its other words.

        Numbers and dates are read as values, as an object's are: "the 5 boroughs" is held by
        "five boroughs", and still only whole and within one cited text.
        """
        values = object_values(folded(as_latin(claim)))
        words = [word for word in WORD.findall(normal(claim)) if _tells(word)]
        if any(
            all(stated_values(folded(text)).holds(value) for value in values)
            and any(holds_word(norm, word) for word in words)
            for text, norm in zip(self.texts, self.normal, strict=True)
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


# How far on each side of a citation's spans, in characters, the question's own words count:
# about two sentences ("Dana owns the security review." after the one naming the provider).
_ASKED_AROUND = 256


def cited_around(text: str, spans: Sequence[EvidenceSpan]) -> str:
    """The text of a citation's source around its spans, where the question's words count."""
    if not spans:
        return ""
    start = min(span.char_start for span in spans)
    end = max(span.char_end for span in spans)
    return text[max(0, start - _ASKED_AROUND) : end + _ASKED_AROUND]


def _contains(text: str, wanted: str) -> bool:
    """``wanted`` in ``text``, its numbers whole: "June 1" is not in "June 15"."""
    before = r"(?<!\d)" if wanted[0].isdigit() else ""
    after = r"(?!\d)" if wanted[-1].isdigit() else ""
    return re.search(before + re.escape(wanted) + after, text) is not None


def current_sources_agree(
    question: str, facts: Iterable[Fact], sources: Mapping[str, str], current: Sequence[str]
) -> bool:
    """Whether the ``current`` texts hold what each fact's cited spans say of its object.

    What a span says of an object is the object where the span holds it, with the words of
    its source around it, on each side up to the nearest word that is neither an English
    function word nor one of the ``question``'s, within the sentence (:func:`_statements`;
    ``sources`` are the sent sources' texts as the model read them, by ID):
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


def _statements(fact: Fact, sources: Mapping[str, str], asked: Sequence[str]) -> Iterator[str]:
    """What each span of ``fact`` says of its object: the object and the words around it."""
    wanted = normal(fact.object).rstrip(".!")
    if wanted in _VERDICTS or not any(_tells(word, asked) for word in WORD.findall(wanted)):
        return
    for citation in fact.citations:
        text = sources[citation.source_id]
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
