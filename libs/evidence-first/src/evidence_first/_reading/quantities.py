"""Numbers and dates read as values, so that a fact may write them another way than its source.

A reader writes "2017-07-25" for "July 25, 2017", "8420" for "8,420", "2" for "two" and "160
km/hour" for "160km/hour": each is read as the same value. A value counts only whole: "16" is
in neither "160" nor "1.16", and a date only with its own day and month, so "June 16" is not in
"Room 16 is booked in June". A date never runs across a line break, which is where the
passages of a citation that do not stand side by side in their source are joined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Stated", "Value", "object_values", "stated_values"]

_MONTHS = (
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
)
# A month's full name, or its three-letter abbreviation (four for "sept") with an optional
# full stop; never followed by a letter ("mar" is no month in "market").
_MONTH = (
    r"\b(" + "|".join(_MONTHS) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?)(?![a-z])"
)
# Whitespace within a line: a date's parts stand on one line.
_GAP = r"[^\S\n]+"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_YEAR = rf"(?:,?{_GAP}(\d{{4}})(?!\d))?"
# Each pattern and which of its groups hold the year, the month and the day (0: none).
_DATES: tuple[tuple[re.Pattern[str], tuple[int, int, int]], ...] = (
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), (1, 2, 3)),
    (re.compile(rf"{_MONTH}{_GAP}{_DAY}{_YEAR}"), (3, 1, 2)),
    (
        re.compile(rf"(?<!\d)(\d{{1,2}})(?:st|nd|rd|th)?{_GAP}(?:of{_GAP})?{_MONTH}{_YEAR}"),
        (3, 2, 1),
    ),
    (re.compile(rf"{_MONTH},?{_GAP}(\d{{4}})(?!\d)"), (2, 1, 0)),
)
# Day and month in figures: read both ways, since "05/06/2017" is May 6 in one country and
# June 5 in another.
_FIGURES = re.compile(r"(?<!\d)(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})(?![\d.])")
# A month's name alone.
_LONE_MONTH = re.compile(_MONTH)
_NUMBER = re.compile(r"(?<!\d)\d+(?:[.,:]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")
# Numbers written in words, as a cited text may state them ("two blocking bugs").
_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
_NUMBER_WORDS = {word: n for n, word in enumerate(_UNITS.split())}
_TENS = {
    word: 10 * n
    for n, word in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy"), 2)
}
_TENS.update({"eighty": 80, "ninety": 90})
_WORDED = re.compile(
    r"\b(?:("
    + "|".join(_TENS)
    + r")(?:[- ]("
    + "|".join(list(_NUMBER_WORDS)[1:10])
    + r"))?|("
    + "|".join(_NUMBER_WORDS)
    + r"))\b"
)

Date = tuple[int | None, int | None, int | None]
"""A year, a month and a day, each ``None`` where the text does not state it."""


@dataclass(frozen=True)
class Value:
    """One number or date an object states: a number's figures, or a date's readings."""

    number: str = ""
    dates: frozenset[Date] = frozenset()


@dataclass(frozen=True)
class Stated:
    """Every number and date one cited text states, each as a value."""

    numbers: frozenset[str]
    dates: frozenset[Date]

    def holds(self, value: Value) -> bool:
        """Whether the text states ``value``: a number whole, a date with each part it gives."""
        if value.number:
            return value.number in self.numbers
        return any(_within(wanted, date) for wanted in value.dates for date in self.dates)


def _within(wanted: Date, date: Date) -> bool:
    """Whether ``date`` has every part ``wanted`` gives (it may give more: a year)."""
    return all(part is None or part == other for part, other in zip(wanted, date, strict=True))


def stated_values(text: str) -> Stated:
    """Every number and date of ``text`` (folded): numbers inside dates count as numbers too."""
    dates = {date for _, found in _dates(text) for date in found}
    numbers = {figures for _, figures in _numbers(text)}
    numbers.update(_worded(text))
    return Stated(frozenset(numbers), frozenset(dates))


def object_values(text: str) -> list[Value]:
    """The numbers and dates a fact's object (folded) states, in figures, in order.

    A number that is part of a date is that date's, not a number of its own. A number the
    object writes in words is one of its words.
    """
    taken: list[tuple[int, int]] = []
    values: list[tuple[int, Value]] = []
    for (start, end), found in _dates(text):
        if not any(start < b and a < end for a, b in taken):
            taken.append((start, end))
            values.append((start, Value(dates=frozenset(found))))
    for (start, end), figures in _numbers(text):
        if not any(start < b and a < end for a, b in taken):
            values.append((start, Value(number=figures)))
    return [value for _, value in sorted(values, key=lambda pair: pair[0])]


def _dates(text: str) -> Iterator[tuple[tuple[int, int], set[Date]]]:
    """Each date of ``text``, with its place and its readings, the fullest forms first."""
    for pattern, (year, month, day) in _DATES:
        for match in pattern.finditer(text):
            date = (_group(match, year), _month(match, month), _group(match, day))
            if _valid(date):
                yield match.span(), {date}
    for match in _FIGURES.finditer(text):
        first, second, year = (int(part) for part in match.groups())
        full = year if len(match[3]) == 4 else None
        readings: set[Date] = {(full, second, first), (full, first, second)}
        found = {date for date in readings if _valid(date)}
        if found:
            yield match.span(), found
    for match in _LONE_MONTH.finditer(text):
        yield match.span(), {(None, _month(match, 1), None)}


def _group(match: re.Match[str], index: int) -> int | None:
    return int(match[index]) if index and match[index] else None


def _month(match: re.Match[str], index: int) -> int:
    """The month a group holds, in figures or by name."""
    name = match[index].rstrip(".")
    if name.isdigit():
        return int(name)
    return next(n for n, month in enumerate(_MONTHS, 1) if month.startswith(name[:3]))


def _valid(date: Date) -> bool:
    _, month, day = date
    return (month is None or 1 <= month <= 12) and (day is None or 1 <= day <= 31)


def _numbers(text: str) -> Iterator[tuple[tuple[int, int], str]]:
    """Each number of ``text`` as its figures: thousands unseparated, leading zeros dropped."""
    for match in _NUMBER.finditer(text):
        figures = match.group()
        if _THOUSANDS.fullmatch(figures):
            figures = figures.replace(",", "")
        if figures.isdigit():
            figures = str(int(figures))
        yield match.span(), figures


def _worded(text: str) -> Iterator[str]:
    """Each number ``text`` writes in words, in figures."""
    for match in _WORDED.finditer(text):
        tens, unit, alone = match.groups()
        value = _NUMBER_WORDS[alone] if alone else _TENS[tens] + _NUMBER_WORDS.get(unit or "", 0)
        yield str(value)
