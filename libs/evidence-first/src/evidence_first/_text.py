"""What counts as valid Unicode, as UTF-16 length, and as visible text: one definition each."""

from __future__ import annotations

import unicodedata

__all__ = ["has_text", "is_unicode_text", "utf16_units"]

# No visible character: control, format (zero-width space, joiners, BOM) and separator
# categories, besides whatever str.isspace() counts.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


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


def has_text(value: str | None) -> bool:
    """Whether an optional answer field holds at least one visible character.

    Blank means no visible character: whitespace, zero-width and other format characters,
    by Unicode category. ``"\u200b"`` is blank.
    """
    return value is not None and any(
        not (char.isspace() or unicodedata.category(char) in _INVISIBLE_CATEGORIES)
        for char in value
    )
