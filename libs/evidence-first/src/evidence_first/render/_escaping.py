"""The one escaping rule every rendering prints a string under: :func:`inert`, :func:`printable`.

What the renderings show is :mod:`evidence_first.render._view`'s; this module only makes each string
safe to show, and keeps the model's bracketed numbers from reading as ours (:func:`unbracketed`).
A string the model wrote is shown in plain text by :func:`in_text`, and a text it writes piece by
piece by :class:`TextInPieces`, as :func:`in_text` shows it whole.
"""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = [
    "TextInPieces",
    "in_html",
    "in_markdown",
    "in_text",
    "inert",
    "markdown_code",
    "printable",
    "unbracketed",
]

# What no string a renderer prints may hold as itself: control characters (C0 but the tab and
# line endings, DEL, C1), the characters that open or close a bidirectional scope (embeddings,
# overrides, isolates: they would reorder the renderer's own text around the string), and the
# line and paragraph separators. Each is written as a visible escape, such as \x1b or \u202e.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def inert(text: str) -> str:
    """``text`` with every character of :data:`_UNSAFE` written as a visible escape.

    The one rule for every string the Markdown and HTML renderings print, under their own
    syntax's escaping; the terminal report escapes more (:func:`printable`).
    """
    return _UNSAFE.sub(lambda match: _escape(match.group()), text)


def printable(text: str) -> str:
    """``text`` for a terminal: every character no string may show as itself, escaped.

    :func:`inert`'s, and every other control, format (zero-width, bidi marks), surrogate,
    private-use and unassigned character, tabs, line feeds and carriage returns included: no
    string can start a line of its own, move the cursor or hide text in a report.
    """
    return "".join(_escape(char) if _invisible(char) else char for char in text)


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&])")
_LINE_ENDING = re.compile(r"\r\n|\r|\n")


def in_html(text: str) -> str:
    """A string of the answer in HTML: inert, escaped, and isolated in its own direction."""
    return f"<bdi>{html.escape(inert(text))}</bdi>"


def _one_line(text: str) -> str:
    """Every CommonMark line ending (LF, CR, CRLF) as a space: no string can end our line."""
    return _LINE_ENDING.sub(" ", text)


def in_markdown(text: str) -> str:
    """A string of the answer in Markdown: on one line, inert, Markdown and inline HTML escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", inert(_one_line(text)))


def markdown_code(text: str) -> str:
    """A code span of ``text``: on one line, inert, without the backticks that would close it."""
    return f"`{inert(_one_line(text)).replace('`', '')}`"


# A bracketed number, or list of numbers, as a model may write one: ASCII or full-width
# brackets, any script's decimal digits, spaces inside. Our own numbers are written "[n]".
_BRACKETED_NUMBER = re.compile(r"[\[\uff3b](\s*\d+(?:\s*,\s*\d+)*\s*)[\]\uff3d]")


def unbracketed(text: str) -> str:
    """``text`` with each bracketed number in parentheses, at the same length: ``(2)``.

    The renderings number each cited span ``[1]``, ``[2]``... and LlamaIndex's
    ``number_sources=True`` numbers source nodes the same way; a ``[2]``, ``[12]``,
    ``[ 2 ]``, ``[2, 3]`` or their full-width forms, written by the model, would read exactly
    like one of those. So every string the model wrote is shown through this rule, and every
    ``[n]`` is ours. ``[F1]`` (a fact marker's form) and ``[2a]`` are no numbers, and stay.
    """
    return _BRACKETED_NUMBER.sub(r"(\1)", text)


def in_text(text: str) -> str:
    """A string the model wrote, as the plain-text report shows it: unbracketed, then printable.

    On one line whatever it holds, no character of it obeyed by the terminal, and none of its
    bracketed numbers reading as a span's number (``[2]`` shows as ``(2)``).
    """
    return printable(unbracketed(text))


# The end of a text that more text could still turn into a bracketed number: an opening
# bracket followed only by what the inside of one may hold.
_OPEN_NUMBER = re.compile(r"[\[\uff3b][\s\d,]*\Z")


class TextInPieces:
    """A text the model writes piece by piece, shown as :func:`in_text` shows it whole.

    Each piece is shown as it comes, but for an end that could still become a bracketed number
    (``[``, ``[2``, ``[2,``): that is held back until the text after it settles it, so a ``[2]``
    cut across pieces still shows as ``(2)``. What each call returns, joined, is
    ``in_text(whole)``.
    """

    def __init__(self) -> None:
        self._held = ""

    def add(self, piece: str) -> str:
        """``piece``, as far as it is settled, shown; the rest is held for the next piece."""
        text = self._held + piece
        open_number = _OPEN_NUMBER.search(text)
        cut = len(text) if open_number is None else open_number.start()
        self._held = text[cut:]
        return in_text(text[:cut])

    def end(self) -> str:
        """What is held, shown: the text has ended, so it is no bracketed number."""
        held, self._held = self._held, ""
        return in_text(held)
