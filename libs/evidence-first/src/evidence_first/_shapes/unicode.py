"""What counts as valid Unicode, as UTF-16 length, and as visible text: one definition each."""

from __future__ import annotations

import threading
import unicodedata

__all__ = [
    "UnitOffsets",
    "folded",
    "has_text",
    "is_unicode_text",
    "is_visible",
    "utf16_units",
]

_BLOCK = 16_384

# No visible character: the control, format (zero-width space, joiners, BOM, soft hyphen,
# bidi controls) and separator categories, and marks (accents, variation selectors), which
# show only on a character before them; besides whatever str.isspace() counts.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
# The default-ignorable code points of no category above (Unicode's DerivedCoreProperties:
# the Hangul fillers, reserved ones) and the blank braille cell: letters and symbols that
# draw nothing.
_INVISIBLE_CHARACTERS = frozenset("\u115f\u1160\u2065\u2800\u3164\uffa0") | frozenset(
    map(chr, [*range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)])
)


def is_unicode_text(text: str) -> bool:
    """Whether ``text`` is valid Unicode: no lone surrogates, which no encoding can carry."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf16_units(text: str) -> int | None:
    """UTF-16 code units of ``text`` (an astral character counts 2); ``None`` if not Unicode."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-16-le")) // 2
    except UnicodeEncodeError:
        return None


def is_visible(char: str) -> bool:
    """Whether one character shows by itself: not whitespace, zero-width, format or a mark.

    The one definition of "blank" (:func:`has_text`): whitespace, the control, format and
    separator categories, marks (which show only on a character before them) and the other
    default-ignorable code points (the Hangul fillers) are no visible character.
    """
    return not (
        char.isspace()
        or unicodedata.category(char) in _INVISIBLE_CATEGORIES
        or char in _INVISIBLE_CHARACTERS
    )


def folded(text: str) -> str:
    """``text`` after NFKC normalization and case folding, as every check compares words."""
    return unicodedata.normalize("NFKC", text).casefold()


def has_text(value: str | None) -> bool:
    """Whether an optional string holds at least one visible character (:func:`is_visible`).

    Blank means no visible character. ``"\u200b"``, ``"\u2060\ufeff"`` and ``"\u00ad"`` are
    blank; so is a string of only whitespace.
    """
    # Whitespace is stripped at C speed first; the first visible character ends the search.
    return value is not None and any(map(is_visible, value.strip()))


class UnitOffsets:
    """A text's UTF-16 and UTF-8 offsets at any code-point position, computed as far as asked.

    The offsets at every 16,384th position are kept once computed, so the positions of many
    spans cost one pass over the text up to the last of them, not one pass per span; and each
    position asked for is kept, so asking again (the check every answer gets on construction)
    costs nothing.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._ascii = text.isascii()
        self._marks: list[tuple[int, int]] = [(0, 0)]
        self._known: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def at(self, position: int) -> tuple[int, int]:
        """``(utf16, utf8)``: the offsets of code-point ``position``, in units and bytes."""
        if self._ascii:
            return position, position
        known = self._known.get(position)
        if known is not None:
            return known
        text, block = self._text, position // _BLOCK
        with self._lock:
            while len(self._marks) <= block:
                index = len(self._marks) - 1
                utf16, utf8 = self._marks[-1]
                self._marks.append(
                    _advanced(utf16, utf8, text[index * _BLOCK : (index + 1) * _BLOCK])
                )
            utf16, utf8 = self._marks[block]
        found = _advanced(utf16, utf8, text[block * _BLOCK : position])
        self._known[position] = found
        return found


def _advanced(utf16: int, utf8: int, part: str) -> tuple[int, int]:
    if part.isascii():
        return utf16 + len(part), utf8 + len(part)
    return utf16 + len(part.encode("utf-16-le")) // 2, utf8 + len(part.encode("utf-8"))
