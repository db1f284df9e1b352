"""A streamed reply read as it arrives: the ledger's decision, each fact as it closes, the answer.

:class:`LedgerScanner` reads each piece of a reply once, in time linear in its length: it
follows the JSON's strings (their escapes), nesting and the ledger's top-level keys, with the
leniency stage 2 has (one leading ``<think>`` block, one code fence). It decides nothing: it
hands on the decision's value, each fact's JSON text once its object closes (the caller parses
it as stage 2 and 3 would, and verifies it), the answer's text as it is decoded, and where the
facts and the answer end. Whatever it cannot follow (text that is no ledger, a duplicate key,
a raw control character in a string, a lone surrogate) ends its reading: the whole reply, judged
at its end, says what it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "AnswerEnded",
    "AnswerRead",
    "DecisionRead",
    "FactRead",
    "FactsEnded",
    "LedgerScanner",
    "ScanItem",
]


@dataclass(frozen=True)
class DecisionRead:
    """The ledger's decision (its ``answerable`` value), as written."""

    value: str


@dataclass(frozen=True)
class FactRead:
    """A fact's object has closed: its JSON text, and its index in ``facts``."""

    index: int
    text: str


@dataclass(frozen=True)
class FactsEnded:
    """The ``facts`` array has closed."""


@dataclass(frozen=True)
class AnswerRead:
    """More of the answer's text, decoded from its JSON string."""

    text: str


@dataclass(frozen=True)
class AnswerEnded:
    """The answer has ended: its string closed, or it was ``null`` (``text`` is ``None``)."""

    text: str | None


ScanItem = DecisionRead | FactRead | FactsEnded | AnswerRead | AnswerEnded

_DECISION_KEY = "answerable"
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_FENCE_OPEN = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n")
_FENCE_LINE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\Z")
# Inside a string: where its plain text stops (a quote, an escape or a raw control character).
_STRING_STOP = re.compile(r'["\\\x00-\x1f]')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SCALAR = re.compile(r"[^\s,\]}]*")
# Deeper than this is no ledger (a ledger's deepest value is four levels down).
_MAX_DEPTH = 32

# What an object or an array expects next.
_KEY_OR_END, _KEY, _COLON, _VALUE, _COMMA_OR_END, _VALUE_OR_END = range(6)


@dataclass
class _Frame:
    """An open object or array: what it expects next, and what it means to the ledger."""

    array: bool
    expects: int
    role: str | None = None  # what it is to the ledger: "facts", "fact", a top-level key's
    key: str | None = None  # an object's key whose value is being read
    start: int = 0  # where it opened in the text
    items: int = 0  # an array's values so far


class LedgerScanner:
    """Reads a reply's ledger in pieces; :meth:`feed` returns what each piece settled."""

    def __init__(self) -> None:
        self._text = ""
        self._at = 0
        self._phase = "prelude"  # then "json", and "done" once the ledger closes or reading stops
        self._stack: list[_Frame] = []
        self._keys: set[str] = set()
        self._string: _OpenString | None = None
        self._items: list[ScanItem] = []
        self._past_think = False
        self._fenced = False
        self._start = 0

    @property
    def reading(self) -> bool:
        """Whether the scanner still follows the reply: not past the ledger, or what it cannot."""
        return self._phase != "done"

    @property
    def ledger_start(self) -> int:
        """Where the ledger's object opens in the reply (0 until it does)."""
        return self._start

    def feed(self, piece: str) -> list[ScanItem]:
        """Read the next piece of the reply; return what it settled, in order."""
        self._text += piece
        while self._phase != "done":
            before = self._at
            if self._phase == "prelude":
                self._prelude()
            elif self._string is not None:
                self._read_string()
            else:
                self._read_structure()
            if self._at == before and self._phase != "done":
                break  # the rest waits for more text
        items, self._items = self._items, []
        return items

    def _stop(self) -> None:
        self._phase = "done"
        self._string = None

    # --- before the ledger: one think block, one code fence, whitespace ---

    def _prelude(self) -> None:
        """Before the ledger: one leading think block, then one code fence line, whitespace."""
        text = self._text
        at = self._skip_space(self._at)
        rest = text[at:]
        if not rest:
            return
        if not self._past_think:
            if rest.startswith(_THINK_OPEN):
                end = text.find(_THINK_CLOSE, at)
                if end >= 0:
                    self._at, self._past_think = end + len(_THINK_CLOSE), True
                return  # its end may come in a later piece
            if _THINK_OPEN.startswith(rest):
                return  # maybe a think block: wait
            self._past_think = True
        if not self._fenced:
            fence = _FENCE_OPEN.match(text, at)
            if fence is not None:
                self._at, self._fenced = fence.end(), True
                return
            if rest.startswith("```") or "```".startswith(rest):
                return  # a fence line not yet ended: wait
        if rest.startswith("{"):
            self._phase, self._start = "json", at
            self._stack.append(_Frame(array=False, expects=_KEY_OR_END, start=at))
            self._at = at + 1
        else:
            self._stop()

    def _skip_space(self, at: int) -> int:
        text = self._text
        while at < len(text) and text[at].isspace():
            at += 1
        return at

    # --- the JSON's structure ---

    def _read_structure(self) -> None:
        text = self._text
        at = self._skip_space(self._at)
        self._at = at
        if at >= len(text):
            return
        frame = self._stack[-1]
        char = text[at]
        if frame.expects in (_KEY_OR_END, _KEY):
            self._expect_key(frame, char)
        elif frame.expects == _COLON:
            self._expect(char == ":", frame, _VALUE)
        elif frame.expects in (_VALUE, _VALUE_OR_END):
            self._expect_value(frame, char)
        else:
            self._expect_comma_or_end(frame, char)

    def _expect(self, ok: bool, frame: _Frame, then: int) -> None:
        if not ok:
            self._stop()
            return
        frame.expects = then
        self._at += 1

    def _expect_key(self, frame: _Frame, char: str) -> None:
        if char == "}" and frame.expects == _KEY_OR_END:
            self._close(frame)
        elif char == '"':
            self._open_string(role="key")
        else:
            self._stop()

    def _expect_comma_or_end(self, frame: _Frame, char: str) -> None:
        if char == ",":
            frame.expects = _VALUE if frame.array else _KEY
            self._at += 1
        elif char == ("]" if frame.array else "}"):
            self._close(frame)
        else:
            self._stop()

    def _expect_value(self, frame: _Frame, char: str) -> None:
        if char == "]" and frame.array and frame.expects == _VALUE_OR_END:
            self._close(frame)
            return
        role = self._role(frame)
        if char == '"':
            self._open_string(role=role)
        elif char in "{[":
            if len(self._stack) >= _MAX_DEPTH:
                self._stop()
                return
            frame.expects = _COMMA_OR_END
            array = char == "["
            expects = _VALUE_OR_END if array else _KEY_OR_END
            self._stack.append(_Frame(array=array, expects=expects, role=role, start=self._at))
            self._at += 1
        else:
            self._scalar(frame, role)

    def _role(self, frame: _Frame) -> str | None:
        """What the value about to be read is to the ledger: a top-level key's, or a fact."""
        depth = len(self._stack)
        if depth == 1:
            return frame.key
        if depth == 2 and frame.array and frame.role == "facts":
            return "fact"
        return None

    def _scalar(self, frame: _Frame, role: str | None) -> None:
        match = _SCALAR.match(self._text, self._at)
        assert match is not None
        if match.end() == len(self._text):
            return  # it may go on: wait
        if role == "answer" and match.group() == "null":
            self._items.append(AnswerEnded(None))
        if not match.group():
            self._stop()
            return
        self._at = match.end()
        self._value_done(frame)

    def _value_done(self, frame: _Frame) -> None:
        frame.expects = _COMMA_OR_END
        if frame.array:
            frame.items += 1

    def _close(self, frame: _Frame) -> None:
        self._stack.pop()
        self._at += 1
        if not self._stack:
            self._phase = "done"  # the ledger's object closed: what follows is not read
            return
        parent = self._stack[-1]
        if frame.role == "fact":
            self._items.append(FactRead(parent.items, self._text[frame.start : self._at]))
        elif frame.role == "facts" and len(self._stack) == 1:
            self._items.append(FactsEnded())
        self._value_done(parent)

    # --- strings ---

    def _open_string(self, role: str | None) -> None:
        frame = self._stack[-1]
        self._string = _OpenString(role=role, key=frame.expects in (_KEY_OR_END, _KEY))
        self._at += 1

    def _read_string(self) -> None:
        string = self._string
        assert string is not None
        text, at = self._text, self._at
        stop = _STRING_STOP.search(text, at)
        if stop is None:
            string.add(text[at:])
            self._at = len(text)
            self._flush(string)
            return
        string.add(text[at : stop.start()])
        char = stop.group()
        if char == '"':
            self._at = stop.end()
            self._string_done(string)
        elif char == "\\":
            self._escape(string, stop.start())
        else:
            self._stop()  # a raw control character: not JSON

    def _escape(self, string: _OpenString, at: int) -> None:
        text = self._text
        if at + 1 >= len(text):
            self._at = at
            self._flush(string)
            return  # the escape goes on in the next piece
        code = text[at + 1]
        if code in _ESCAPES:
            string.add(_ESCAPES[code])
            self._at = at + 2
            return
        digits = text[at + 2 : at + 6]
        if code != "u" or (len(digits) == 4 and not _is_hex(digits)):
            self._stop()
            return
        if len(digits) < 4:
            self._at = at
            self._flush(string)
            return
        string.add_unit(int(digits, 16))
        self._at = at + 6
        if string.broken:
            self._stop()

    def _flush(self, string: _OpenString) -> None:
        if string.role == "answer" and not string.key:
            piece = string.take()
            if piece:
                self._items.append(AnswerRead(piece))

    def _string_done(self, string: _OpenString) -> None:
        self._string = None
        if string.broken or not string.finish():
            self._stop()
            return
        frame = self._stack[-1]
        if string.key:
            name = string.value()
            if len(self._stack) == 1:
                if name in self._keys:
                    self._stop()  # a duplicate key: the whole reply is not one JSON object
                    return
                self._keys.add(name)
            frame.key = name
            frame.expects = _COLON
            return
        if string.role == _DECISION_KEY:
            self._items.append(DecisionRead(string.value()))
        elif string.role == "answer":
            self._flush(string)
            self._items.append(AnswerEnded(string.value()))
        self._value_done(frame)


class _OpenString:
    """A JSON string being read: its decoded text, and whether it is a key or the answer."""

    def __init__(self, role: str | None, key: bool) -> None:
        self.role = role
        self.key = key
        self.broken = False
        self._kept = role in ("answer", _DECISION_KEY) or key
        self._parts: list[str] = []
        self._taken = 0
        self._high: int | None = None  # a high surrogate escape waiting for its low half

    def add(self, text: str) -> None:
        if not text:
            return
        if self._high is not None:
            self.broken = True  # a lone high surrogate: not valid Unicode
            return
        if self._kept:
            self._parts.append(text)

    def add_unit(self, unit: int) -> None:
        if self._high is not None:
            if 0xDC00 <= unit <= 0xDFFF:
                high, self._high = self._high, None
                self.add(chr(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)))
            else:
                self.broken = True
        elif 0xD800 <= unit <= 0xDBFF:
            self._high = unit
        elif 0xDC00 <= unit <= 0xDFFF:
            self.broken = True
        else:
            self.add(chr(unit))

    def finish(self) -> bool:
        return self._high is None

    def value(self) -> str:
        return "".join(self._parts)

    def take(self) -> str:
        """The text decoded since the last take."""
        piece = "".join(self._parts[self._taken :])
        self._taken = len(self._parts)
        return piece


def _is_hex(digits: str) -> bool:
    return all(char in "0123456789abcdefABCDEF" for char in digits)
