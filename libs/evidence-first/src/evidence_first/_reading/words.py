"""How the checks read text: folded, cut into words, word matched to word, letters by script.

The checks of :mod:`~evidence_first._reading.fact_support` compare a fact's words, a question's
words and
the cited text after Unicode NFKC normalization and case folding. They exempt a translation
(an object, or cited sources, in another script than what they are compared with) and nothing
else, so a text's script is judged over all of its letters, never a prefix, and a letter drawn
like a Latin one (a Cyrillic a, U+0430) reads as Latin in a term. Counting letters is linear
and runs in the regex engine: one pass drops what is not a letter and one counts a script's
letters; a text of ASCII alone needs no pass at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from evidence_first._shapes.unicode import folded
from evidence_first._shapes.vocabulary import FUNCTION_WORDS

__all__ = [
    "FUNCTION_WORDS",
    "LATIN",
    "MIXED",
    "WORD",
    "LetterCounts",
    "as_latin",
    "folded",
    "has_word",
    "holds_word",
    "main_script",
    "mostly_in",
    "normal",
    "run",
    "same_word",
    "term_script",
]

_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
WORD = re.compile(r"\w+")
_WORD_CHAR = re.compile(r"\w")
# Two words match when equal, when one starts with the other and the shorter has this many
# characters ("ship" and "ships"), or when the longer is the shorter and an inflection ("fix"
# and "fixed").
_SHARED_PREFIX = 4
_INFLECTIONS = frozenset({"s", "es", "d", "ed", "ing"})
_Y_INFLECTIONS = frozenset({"ies", "ied"})
# British and American spellings of one word ("armoured", "armored"; "organise", "organize";
# "centre", "center") match, in words of at least this many characters.
_SPELT = 5
_SPELLINGS = (
    (re.compile(r"our(?=[a-z]{0,4}$)"), "or"),
    (re.compile(r"is(?=(?:e|ed|es|ing|ation|ations)$)"), "iz"),
    (re.compile(r"tre(?=s?$)"), "ter"),
)


def _spelling(word: str) -> str:
    """``word`` spelt the American way, where a British spelling differs by a suffix."""
    for pattern, replacement in _SPELLINGS:
        word = pattern.sub(replacement, word)
    return word


def run(text: str) -> str:
    """``text`` folded, its curly quotes straight and each whitespace run one space."""
    return _SPACE.sub(" ", folded(text).translate(_QUOTES))


def normal(text: str) -> str:
    """:func:`run` of ``text``, without space at either end."""
    return run(text).strip()


def has_word(text: str, word: str) -> bool:
    """``word`` in ``text`` as a whole word: "15" is not in "150", nor "may" in "mayor"."""
    return re.search(r"(?<![\w])" + re.escape(word) + r"(?![\w])", text) is not None


def holds_word(text: str, word: str) -> bool:
    """Whether a word of the folded ``text`` is ``word`` as :func:`same_word` matches it.

    Found by substring search of the word's first three characters, each hit at a word start
    read whole.
    """
    probe = word[:3]
    at = text.find(probe)
    while at != -1:
        if at == 0 or not _WORD_CHAR.match(text, at - 1):
            end = WORD.match(text, at)
            if same_word(word, text[at : end.end()] if end else probe):
                return True
        at = text.find(probe, at + 1)
    return False


def same_word(word: str, other: str) -> bool:
    """Whether two words match: equal, or the longer starts with the shorter.

    The shorter must have 4 characters or more ("ship", "ships"), or the rest be an
    inflection ("fix", "fixed"); a final "y" may be an inflection's "ie" ("city", "cities"),
    and a British spelling matches an American one ("armoured", "armored").
    """
    if len(word) >= _SPELT and len(other) >= _SPELT:
        word, other = _spelling(word), _spelling(other)
    shorter, longer = sorted((word, other), key=len)
    if shorter.endswith("y") and longer[len(shorter) - 1 :] in _Y_INFLECTIONS:
        # "city" and "cities", "study" and "studied".
        return longer.startswith(shorter[:-1])
    if not longer.startswith(shorter):
        return False
    rest = longer[len(shorter) :]
    return not rest or len(shorter) >= _SHARED_PREFIX or rest in _INFLECTIONS


LATIN = "LATIN"
# Letters of a script the table below does not name: counted together, so two such scripts
# read as one (a check then compares rather than exempts).
OTHER = "OTHER"
# The script of a term whose letters are in two scripts or more: never a translation.
MIXED = "MIXED"

# The scripts most text is written in, each by the blocks of its letters (what is not a letter
# in a block is dropped before counting). Han, kana and bopomofo are one script: Japanese
# writes words in all three.
_SCRIPTS = {
    LATIN: "A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u1d00-\u1dbf"
    "\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\ufb00-\ufb06\uff21-\uff3a"
    "\uff41-\uff5a",
    "GREEK": "\u0370-\u03ff\u1f00-\u1fff",
    "CYRILLIC": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "ARMENIAN": "\u0530-\u058f\ufb13-\ufb17",
    "HEBREW": "\u0590-\u05ff\ufb1d-\ufb4f",
    "ARABIC": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "DEVANAGARI": "\u0900-\u097f\ua8e0-\ua8ff",
    "BENGALI": "\u0980-\u09ff",
    "GURMUKHI": "\u0a00-\u0a7f",
    "GUJARATI": "\u0a80-\u0aff",
    "ORIYA": "\u0b00-\u0b7f",
    "TAMIL": "\u0b80-\u0bff",
    "TELUGU": "\u0c00-\u0c7f",
    "KANNADA": "\u0c80-\u0cff",
    "MALAYALAM": "\u0d00-\u0d7f",
    "SINHALA": "\u0d80-\u0dff",
    "THAI": "\u0e00-\u0e7f",
    "LAO": "\u0e80-\u0eff",
    "TIBETAN": "\u0f00-\u0fff",
    "MYANMAR": "\u1000-\u109f",
    "GEORGIAN": "\u10a0-\u10ff\u1c90-\u1cbf\u2d00-\u2d2f",
    "HANGUL": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff",
    "ETHIOPIC": "\u1200-\u139f\u2d80-\u2ddf",
    "KHMER": "\u1780-\u17ff",
    "CJK": "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff"
    "\u3100-\u312f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f",
}
_IN_SCRIPT = {name: re.compile(f"[{blocks}]+") for name, blocks in _SCRIPTS.items()}
_NAMED = re.compile("[" + "".join(_SCRIPTS.values()) + "]+")
_NOT_LETTERS = re.compile(r"[\W\d_]+")
# Byte tables for bytes.translate: delete every byte but an ASCII letter, or but the lead byte
# of a character past ASCII in UTF-8 (one per such character).
_BUT_ASCII_LETTERS = bytes(code for code in range(256) if not chr(code).isalpha() or code > 127)
_BUT_LEAD_BYTES = bytes(range(0xC0))
# Cyrillic and Greek letters drawn like Latin ones (Unicode's confusables): Cyrillic Em, a and
# u print as "May". A term made of Latin letters and these reads as Latin.
_LOOK_ALIKES = str.maketrans(
    "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0406\u0408\u0405"
    "\u04ae\u051a\u051c\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501"
    "\u04bb\u04cf\u051b\u051d\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f"
    "\u03a1\u03a4\u03a5\u03a7\u03bf\u03bd",
    "ABEKMHOPCTXIJSYQWaeopcyxijsdhlqwABEZHIKMNOPTYXov",
)


def mostly_in(texts: Iterable[str], script: str) -> bool | None:
    """Whether at least half of the letters of ``texts``, all of them together, are in ``script``.

    ``None`` when they have no letter: they are in no script. Most texts are decided by two
    byte counts of their UTF-8 form: where their ASCII letters outnumber their characters past
    ASCII, most of their letters are Latin, whatever those characters are. The others have
    their letters counted by script.
    """
    texts = list(texts)
    bounds = [_bounds(text) for text in texts]
    if sum(plain for plain, _ in bounds) > sum(wide for _, wide in bounds):
        return script == LATIN
    held = total = 0
    for text, (plain, wide) in zip(texts, bounds, strict=True):
        part, whole = _letters(text, script) if wide else (plain if script == LATIN else 0, plain)
        held, total = held + part, total + whole
    return 2 * held >= total if total else None


def _bounds(text: str) -> tuple[int, int]:
    """How many ASCII letters ``text`` has, and how many characters past ASCII."""
    if text.isascii():
        return len(text.encode("ascii").translate(None, _BUT_ASCII_LETTERS)), 0
    encoded = text.encode("utf-8", "surrogatepass")
    return (
        len(encoded.translate(None, _BUT_ASCII_LETTERS)),
        len(encoded.translate(None, _BUT_LEAD_BYTES)),
    )


def _letters(text: str, script: str) -> tuple[int, int]:
    """How many of ``text``'s letters are in ``script``, and how many letters it has."""
    letters = _NOT_LETTERS.sub("", text)
    if script in _IN_SCRIPT:
        return len(letters) - len(_IN_SCRIPT[script].sub("", letters)), len(letters)
    return len(_NAMED.sub("", letters)), len(letters)


class LetterCounts:
    """:func:`mostly_in` of each text and script, judged once for the texts of one ledger."""

    def __init__(self) -> None:
        self._judged: dict[tuple[str, str], bool] = {}

    def written_in(self, text: str, script: str) -> bool:
        """Whether at least half of ``text``'s letters are in ``script`` (none: it is in none)."""
        key = (text, script)
        if key not in self._judged:
            self._judged[key] = mostly_in([text], script) is True
        return self._judged[key]


def main_script(text: str) -> str | None:
    """The script most of ``text``'s letters are in; ``None`` without letters."""
    if text.isascii():
        return LATIN if any(map(str.isalpha, text)) else None
    letters = _NOT_LETTERS.sub("", text)
    counts = {name: len(letters) - len(it.sub("", letters)) for name, it in _IN_SCRIPT.items()}
    counts[OTHER] = len(letters) - sum(counts.values())
    script = max(counts, key=counts.__getitem__)
    return script if counts[script] else None


def term_script(term: str) -> str | None:
    """The script a term (a fact's object, its claim) is written in.

    Latin when each of its letters is Latin or drawn like a Latin one; else the one script of
    its letters, or :data:`MIXED` for two or more; ``None`` without letters.
    """
    letters = _NOT_LETTERS.sub("", term)
    if not letters:
        return None
    if _IN_SCRIPT[LATIN].fullmatch(letters.translate(_LOOK_ALIKES)):
        return LATIN
    found = {name for name, pattern in _IN_SCRIPT.items() if pattern.search(letters)}
    if _NAMED.sub("", letters):
        found.add(OTHER)
    return found.pop() if len(found) == 1 else MIXED


def as_latin(term: str) -> str:
    """``term`` with each letter drawn like a Latin one written as that Latin letter."""
    return term.translate(_LOOK_ALIKES)
