"""Whether a verified citation supports its fact, as far as plain text can tell: two checks.

Both only read the ledger and the cited spans (no model, no second call), and neither changes
a verdict: they flag (``CitationCheck.flags``), and an option decides whether an answer that
rests on flagged citations abstains.

- **Evidence status.** A citation of a source the caller marked ``superseded`` or
  ``contradicted`` is flagged so. A source with no status is never flagged.
- **The fact's own words.** A fact's ``object`` must be in one of its cited spans, compared
  after Unicode NFKC normalization, case folding and collapsing whitespace (and with straight
  and curly quotes alike). If it is not, each of its numbers (a run of digits, with ``.``,
  ``,`` or ``:`` between digits) and month names (English, full or three-letter) must be
  there, as whole words; an object with neither fails. The check is skipped for a fact whose
  object is written in another script than both its cited spans and the sources they are cut
  from (a translated answer cannot match), and when the caller asked for an answer language
  (``output_language``). A span without letters is in no script: it never skips the check.

One more check reads the question (:func:`question_is_covered`): an answer whose cited sources
hold fewer than :data:`QUESTION_COVERAGE` of the question's words answers something near the
question rather than the question itself ("What does a half plot cost?" from a source that
prices only full plots).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from evidence_first._evidence import Evidence
from evidence_first._vocabulary import CitationFlag

__all__ = [
    "QUESTION_COVERAGE",
    "object_is_cited",
    "objects_are_held",
    "question_is_covered",
    "status_flags",
]

_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
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


def status_flags(source: Evidence) -> tuple[CitationFlag, ...]:
    """The flag a citation of ``source`` earns from the status the caller gave it, if any."""
    if source.status == "superseded":
        return ("superseded_source",)
    if source.status == "contradicted":
        return ("contradicted_source",)
    return ()


_VERDICTS = frozenset({"yes", "no"})


def object_is_cited(obj: str, spans: Iterable[str], sources: Sequence[str] = ()) -> bool | None:
    """Whether a fact's object, or each of its numbers and dates, is in one of its spans.

    ``None`` when the check does not apply: the object is only "yes" or "no", or its letters
    are in another script than both the spans' and their ``sources``' (the texts the spans
    are cut from). An object without letters, such as "75%", is always checked, and so is one
    cited by spans without letters ("16", "."): what a span lacks never skips the check.
    """
    return _Texts(list(spans), sources).hold(obj)


def objects_are_held(objects: Iterable[str], texts: Sequence[str]) -> bool:
    """Whether every object is in one of ``texts``, as :func:`object_is_cited` matches it.

    The texts are normalized once, however many objects are looked for.
    """
    held = _Texts(texts)
    return all(held.hold(obj) for obj in objects)


class _Texts:
    """Texts normalized once, and the scripts they and the sources they are cut from use."""

    def __init__(self, texts: Sequence[str], sources: Sequence[str] = ()) -> None:
        self.texts = texts
        self.sources = sources or texts
        self.normal = [_normal(text) for text in texts]

    @functools.cached_property
    def scripts(self) -> frozenset[str]:
        """The scripts of the texts and of their sources: none for texts without letters."""
        found = (
            _script(itertools.chain.from_iterable(self.texts)),
            _script(itertools.chain.from_iterable(self.sources)),
        )
        return frozenset(script for script in found if script is not None)

    def hold(self, obj: str) -> bool | None:
        """:func:`object_is_cited` of ``obj`` over these texts."""
        wanted = _normal(obj).rstrip(".!")
        if wanted in _VERDICTS:
            return None  # a yes or no is the fact's verdict, not words a source would hold
        if not wanted or any(_contains(text, wanted) for text in self.normal):
            return True
        script = _script(obj)
        if script is not None and self.scripts and script not in self.scripts:
            # A translated object cannot match. An object without letters (75%) can, and
            # spans and sources without letters hold none of an object's words: both checked.
            return None
        words = [_normal(word) for word in _NUMBER_OR_MONTH.findall(obj)]
        return bool(words) and any(
            all(_has_word(text, word) for word in words) for text in self.normal
        )


def _normal(text: str) -> str:
    return _SPACE.sub(" ", _folded(text).translate(_QUOTES)).strip()


def _has_word(text: str, word: str) -> bool:
    # A number or a month as a whole word: "15" is not in "150", nor "may" in "mayor".
    return re.search(r"(?<![\w])" + re.escape(word) + r"(?![\w])", text) is not None


def _contains(text: str, wanted: str) -> bool:
    """``wanted`` in ``text``, its numbers whole: "June 1" is not in "June 15"."""
    before = r"(?<!\d)" if wanted[0].isdigit() else ""
    after = r"(?!\d)" if wanted[-1].isdigit() else ""
    return re.search(before + re.escape(wanted) + after, text) is not None


def _script(text: Iterable[str]) -> str | None:
    """The script most of ``text``'s first 200 letters are written in (Latin, CJK...)."""
    letters = "".join(itertools.islice(filter(str.isalpha, text), 200))
    if not letters or max(letters) < "\u0250":
        return "LATIN" if letters else None  # the common case, without a loop in Python
    counts: dict[str, int] = {}
    for char in letters:
        script = "LATIN" if char < "\u0250" else unicodedata.name(char, "?").split(" ")[0]
        counts[script] = counts.get(script, 0) + 1
    return max(counts, key=counts.__getitem__)


# The share of a question's words its cited sources must hold. Chosen on the tune half of the
# quality set (benchmarks/results/quality-tune-qwen2.5-coder-1.5b.jsonl) among 1/2 to 1, with
# the embedded reader's floors chosen again for each: 2/3 kept the most right answers at the
# floors in both citation modes together (31 of 66, tied with 0.6 and 0.75), then the best
# precision, then the lowest share.
QUESTION_COVERAGE = 2 / 3

# English function words, and the heads of question phrases ("how long", "what time", "which
# day"): what a question asks with, not what it asks about. The check reads English questions
# only: one with fewer than two of these words is not checked.
_FUNCTION_WORDS = frozenset(
    """
    a about after again already all also am an and any are as at be been before being both but
    by can could date day days did do does doing done down during each either ever for from get
    gets got had has have having he her him his how i if in into is it its just long many may
    me might more most much must my no nor not now of on once one ones only or other others our
    out over own per same shall she should since so some still such than that the their them
    then there these they this those through time to too under until up us very was we were
    what when where whether which while who whom whose why will with would year years yet you
    your
    """.split()  # noqa: SIM905 (a word list reads best as words)
)
# Function words of English that are also function words of German, Spanish, French or Dutch
# ("Was war in ...", "Wie viele ... am ..."): a question needs one other English function word
# to read as English. On XQuAD's questions this kept 236 of 240 English ones and let 5 of 240
# German ones through (16 before), with NQ-open's English questions 2,631 of 2,655 (2,635).
_SHARED_FUNCTION_WORDS = frozenset(
    {"was", "in", "an", "am", "so", "also", "will", "no", "me", "on", "or"}
)
_WORD = re.compile(r"\w+")
_WORD_CHAR = re.compile(r"\w")
# A question's word and a source's word match when equal, when one starts with the other and
# the shorter has this many characters ("ship" and "ships"), or when the longer is the shorter
# and an inflection ("fix" and "fixed").
_SHARED_PREFIX = 4
_INFLECTIONS = frozenset({"s", "es", "d", "ed", "ing"})


def question_is_covered(
    question: str, cited: Sequence[str], others: Sequence[str] = ()
) -> bool | None:
    """Whether the ``cited`` texts hold at least :data:`QUESTION_COVERAGE` of the question's words.

    The question's words are its distinct words of two characters or more, after Unicode NFKC
    normalization and case folding, less English function words; each is looked for as a word
    of the texts normalized alike (:func:`_same_word`). A word the cited texts lack but one of
    ``others`` (the other sources sent) holds is left out: it names what the sources are about,
    such as a project a cited note does not repeat. ``None`` when the check does not apply: the
    question has fewer than two English function words, or only ones German, Spanish, French
    or Dutch share ("was", "in"...), so it is not English or too short to tell; or it has no
    other word; or the cited texts are written in another script than the question (a
    question cannot share words with a translation). The texts are read a piece at
    a time, and no further than needed: an answer whose cited texts hold the question's words
    early is decided on their first piece.
    """
    asked = _asked_words(question)
    if not asked:
        return None
    written_in = _script(itertools.chain.from_iterable(cited))
    if written_in is not None and written_in != _script(question):
        return None
    lacking = set(asked)
    for piece in _pieces(cited):
        lacking = {word for word in lacking if not _holds_word(piece, word)}
        if len(asked) - len(lacking) >= QUESTION_COVERAGE * len(asked):
            return True
    held = len(asked) - len(lacking)
    for piece in _pieces(others):
        if not lacking:
            break
        lacking = {word for word in lacking if not _holds_word(piece, word)}
    return held >= QUESTION_COVERAGE * (held + len(lacking))


def _asked_words(question: str) -> list[str]:
    """The question's words the check looks for, in order; none when it is not read as English."""
    words = [word for word in _WORD.findall(_folded(question)) if len(word) > 1]
    function_words = [word for word in words if word in _FUNCTION_WORDS]
    if len(function_words) < 2 or _SHARED_FUNCTION_WORDS.issuperset(function_words):
        return []
    return list(dict.fromkeys(word for word in words if word not in _FUNCTION_WORDS))


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


# Texts are folded and searched in pieces of about this many characters, cut after whitespace.
_PIECE = 1 << 16


def _pieces(texts: Sequence[str]) -> Iterator[str]:
    """Each text folded (:func:`_folded`) a piece at a time, each piece ending at whitespace."""
    for text in texts:
        start = 0
        while start < len(text):
            end = start + _PIECE
            if end < len(text):
                cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
                end = cut + 1 if cut > start else end
            yield _folded(text[start:end])
            start = end


def _holds_word(text: str, word: str) -> bool:
    """Whether a word of ``text`` is ``word`` as :func:`_same_word` matches it.

    Found by substring search of the word's first three characters, each hit at a word start
    read whole.
    """
    probe = word[:3]
    at = text.find(probe)
    while at != -1:
        if at == 0 or not _WORD_CHAR.match(text, at - 1):
            end = _WORD.match(text, at)
            if _same_word(word, text[at : end.end()] if end else probe):
                return True
        at = text.find(probe, at + 1)
    return False


def _same_word(word: str, other: str) -> bool:
    """Whether two words match: equal, or the longer starts with the shorter.

    The shorter must have 4 characters or more ("ship", "ships"), or the rest be an
    inflection ("fix", "fixed").
    """
    shorter, longer = sorted((word, other), key=len)
    if not longer.startswith(shorter):
        return False
    rest = longer[len(shorter) :]
    return not rest or len(shorter) >= _SHARED_PREFIX or rest in _INFLECTIONS
