"""Whether an answer's cited sources speak of what the question asks: the question-words check.

An answer whose cited sources hold fewer than :data:`QUESTION_COVERAGE` of the question's words
answers something near the question rather than the question itself ("What does a half plot
cost?" from a source that prices only full plots). It reads the question and the cited
sources, not the answer, so it fires about as often on right answers as on wrong ones over the
same passages: it is off unless asked for (``uncovered_question``). Text is read as
:mod:`~evidence_first._reading.words` reads it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from evidence_first._reading.words import (
    FUNCTION_WORDS,
    LATIN,
    WORD,
    folded,
    holds_word,
    main_script,
    mostly_in,
)

__all__ = ["QUESTION_COVERAGE", "question_is_covered"]

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
