"""Public question sets (``data/public/``): their items, sentences and answers, and reader sets.

Every set is a list of :class:`Item`: a question, the passage it is asked over (the gold
passage, or for an unanswerable item an on-topic passage that does not answer it), its
answers and its BM25 neighbours (``data/public/make_sets.py`` builds them). ``trust.py``
scripts ledgers over them; :func:`reader_set` turns a set into the documents and questions
``quality.py --set`` asks a reader.

A sentence is a passage as passage mode cuts it (``evidence_first._sending.passages``), so a quote
of
sentences and a citation of passage labels point at the same text.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from evidence_first import Evidence
from evidence_first._sending.passages import split_passages

DATA = Path(__file__).parent / "data" / "public"

Span = tuple[int, int]
"""A half-open ``[start, end)`` range of a passage's text."""


@dataclass(frozen=True)
class PublicSet:
    """One set as the benchmarks name it: its file, its language and whether it is held out."""

    name: str
    file: str
    language: str = "en"
    heldout: bool = False
    description: str = ""


XQUAD_LANGUAGES = ("en", "de", "es", "ru", "zh", "ar", "hi")

SETS: dict[str, PublicSet] = {
    "nq-open": PublicSet("nq-open", "nq-open", description="NQ-open, Google queries"),
    "clapnq": PublicSet("clapnq", "clapnq", description="ClapNQ dev, Google queries"),
    **{
        f"xquad-{language}": PublicSet(
            f"xquad-{language}",
            "xquad",
            language,
            description=f"XQuAD ({language}), SQuAD questions"
            + ("" if language == "en" else ", translated"),
        )
        for language in XQUAD_LANGUAGES
    },
    "squad2": PublicSet(
        "squad2",
        "squad2-heldout",
        heldout=True,
        description="SQuAD 2.0 dev (held out), crowdworkers' questions",
    ),
    "boolq": PublicSet(
        "boolq",
        "boolq-heldout",
        heldout=True,
        description="BoolQ dev (held out), yes/no Google queries, no gold sentence",
    ),
    "hotpotqa": PublicSet(
        "hotpotqa",
        "hotpotqa-heldout",
        heldout=True,
        description="HotpotQA dev (held out), multi-hop over two gold paragraphs",
    ),
    "tatqa": PublicSet(
        "tatqa",
        "tatqa-heldout",
        heldout=True,
        description="TAT-QA (held out), annual-report excerpts, answers in the text",
    ),
}
"""Every set by name: the English sets that choose, XQuAD by language, and the held-out sets."""

SPLITS = ("tune", "report")
HELDOUT = "heldout"


@dataclass(frozen=True)
class Item:
    """One question of a public set, over its one passage.

    Attributes:
        set: The set's name.
        id: The item's ID (its own set's ID where it has one).
        split: ``tune`` or ``report`` (``heldout`` for the held-out sets).
        question: The question as the set asks it.
        title: The passage's title (HotpotQA's gold titles joined by `` / ``; none for BoolQ
            and TAT-QA).
        text: The gold passage, or an unanswerable item's on-topic passage. HotpotQA's is its
            two gold paragraphs, a blank line between them; TAT-QA's, the paragraphs of its
            excerpt (never the table), a blank line between each.
        answerable: Whether the passage answers the question.
        answers: The short gold answers (NQ-open, SQuAD, HotpotQA, TAT-QA; ``yes`` or ``no``
            for a yes/no item); none for ClapNQ.
        answer_start: Where the first answer stands in ``text`` (SQuAD's own offset; for
            HotpotQA and TAT-QA its first place as whole words in a supporting sentence or
            the paragraph TAT-QA names), else ``None``.
        long_answer: The answer a ledger citing the selected sentences gives: ClapNQ's
            annotated answer, HotpotQA's answer, BoolQ's ``yes`` or ``no``.
        selected: The sentences the answer rests on: ClapNQ's selected sentences, HotpotQA's
            supporting facts.
        neighbours: The IDs of the items whose passages BM25 ranks nearest, nearest first.
        yes_no: Whether the answer is ``yes`` or ``no`` (BoolQ; HotpotQA's comparisons that
            ask one): no span of the passage.
        titles: HotpotQA's gold paragraphs' titles, in the order ``text`` holds them.
        distractors: HotpotQA's own distractors: the eight paragraphs, ``(title, text)``, that
            its retriever found for the question beside the gold ones.
    """

    set: str
    id: str
    split: str
    question: str
    title: str
    text: str
    answerable: bool = True
    answers: tuple[str, ...] = ()
    answer_start: int | None = None
    long_answer: str | None = None
    selected: tuple[str, ...] = ()
    neighbours: tuple[str, ...] = ()
    yes_no: bool = False
    titles: tuple[str, ...] = ()
    distractors: tuple[tuple[str, str], ...] = ()

    @property
    def order(self) -> str:
        """The item's place in the set's stable order: the SHA-256 of its ID.

        An XQuAD item's ID is its language and the original ID (``de:56be...``); its order is
        the original ID's, so every language's items come in the same order.
        """
        original = self.id.split(":", 1)[-1]
        return hashlib.sha256(original.encode("utf-8")).hexdigest()


@functools.cache
def load_items(name: str) -> tuple[Item, ...]:
    """A set's items, in its stable order (so the first N are a stable sample)."""
    spec = SETS[name]
    items = []
    with gzip.open(DATA / f"{spec.file}.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            row: dict[str, Any] = json.loads(line)
            if row.get("lang", "en") != spec.language:
                continue
            items.append(
                Item(
                    set=name,
                    id=row["id"],
                    split=row["split"],
                    question=row["question"],
                    title=row["title"],
                    text=row["text"],
                    answerable=row.get("answerable", True),
                    answers=tuple(row.get("answers", ())),
                    answer_start=row.get("answer_start"),
                    long_answer=row.get("answer"),
                    selected=tuple(row.get("selected", ())),
                    neighbours=tuple(row["neighbours"]),
                    yes_no=row.get("yes_no", False),
                    titles=tuple(row.get("titles", ())),
                    distractors=tuple((title, text) for title, text in row.get("distractors", ())),
                )
            )
    return tuple(items)


def items_by_id(name: str) -> dict[str, Item]:
    return {item.id: item for item in load_items(name)}


def in_split(items: Sequence[Item], split: str) -> list[Item]:
    """The items of a split (``all``: every item); a held-out set is always whole."""
    return [item for item in items if split in ("all", item.split) or item.split == HELDOUT]


@functools.lru_cache(maxsize=4096)
def sentences(text: str) -> tuple[Span, ...]:
    """The text's sentences: its passages as passage mode cuts them."""
    return tuple(split_passages(text))


def covering(text: str, start: int, end: int) -> Span:
    """The run of whole sentences that holds ``[start, end)``."""
    touched = [(a, b) for a, b in sentences(text) if a < end and start < b]
    if not touched:
        return start, end
    return touched[0][0], touched[-1][1]


def _whole(phrase: str) -> str:
    """A pattern for ``phrase`` as whole words where it starts or ends with a word character."""
    before = r"(?<!\w)" if re.match(r"\w", phrase) else ""
    after = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return before + re.escape(phrase) + after


def find_phrase(text: str, phrase: str) -> Span | None:
    """The first place ``phrase`` stands in ``text`` as whole words: exactly, else in any case."""
    if not phrase.strip():
        return None
    for flags in (0, re.IGNORECASE):
        match = re.search(_whole(phrase), text, flags)
        if match is not None:
            return match.start(), match.end()
    return None


def answer_span(item: Item) -> Span | None:
    """Where the item's short gold answer stands in its passage, as the passage writes it.

    SQuAD's own offset when it holds the answer; else the first gold answer found as whole
    words, exactly or else in any case. ``None`` when no answer is in the passage, and for a
    yes/no item: its ``yes`` or ``no`` is no span, though the passage may hold the word.
    """
    if item.yes_no:
        return None
    if item.answer_start is not None and item.answers:
        end = item.answer_start + len(item.answers[0])
        if item.text[item.answer_start : end] == item.answers[0]:
            return item.answer_start, end
    for answer in item.answers:
        found = find_phrase(item.text, answer)
        if found is not None:
            return found
    return None


def selected_spans(item: Item) -> tuple[list[Span], int]:
    """Where each of a ClapNQ item's selected sentences stands, and how many do not."""
    spans, missing = [], 0
    for sentence in item.selected:
        start = item.text.find(sentence)
        if start < 0:
            missing += 1
        else:
            spans.append((start, start + len(sentence)))
    return spans, missing


def gold_spans(item: Item) -> list[Span]:
    """What a perfect ledger cites: the answer's sentences, or the selected sentences.

    Empty when the answer, or any selected sentence, is not in the passage as written, and
    for a yes/no item without selected sentences (BoolQ marks none).
    """
    if item.selected:
        spans, missing = selected_spans(item)
        return [] if missing else spans
    found = answer_span(item)
    return [] if found is None else [covering(item.text, *found)]


class QuestionFields(TypedDict):
    """The fields of ``quality.Question`` that a public set fills in."""

    id: str
    kind: str
    question: str
    sources: tuple[str, ...]
    answerable: bool
    gold_answers: tuple[str, ...]
    gold_quotes: tuple[tuple[str, str], ...]
    split: str
    judged_by_citation: bool


# The sets a reader can be run on with quality.py, and how many BM25 neighbours each kind of
# question is sent beside its own passage.
READER_SETS = ("nq-open", "clapnq", "squad2")
READER_NEIGHBOURS = {True: 3, False: 2}


def reader_set(name: str) -> tuple[dict[str, Evidence], list[QuestionFields]]:
    """A public set as ``quality.py`` asks a reader: documents by ID, and its questions.

    An answerable question is sent its gold passage and its BM25 retriever's 3 nearest
    others; an unanswerable one its on-topic passage and the 2 nearest others; the passage
    takes a seeded-random place among them. A document's ID is the ID of the first item whose
    passage it is. Kinds are ``<set>-answerable`` and ``<set>-unanswerable`` (NQ-open's
    questions are all answerable: ``nq-open``). Gold quotes are the sentences a perfect
    ledger cites (:func:`gold_spans`); an answerable item with none is left out. ClapNQ's
    answers are long paraphrases, so its answered questions are judged by their citations
    alone (``judged_by_citation``). Questions come in the set's stable order.
    """
    if name not in READER_SETS:
        msg = f"no reader set named {name!r}; choose from {', '.join(READER_SETS)}"
        raise ValueError(msg)
    items = load_items(name)
    owner: dict[str, str] = {}
    for item in items:
        owner.setdefault(item.text, item.id)
    by_id = {item.id: item for item in items}
    documents: dict[str, Evidence] = {}
    questions: list[QuestionFields] = []
    for item in items:
        spans = gold_spans(item) if item.answerable else []
        if item.answerable and not spans:
            continue
        question = _reader_question(name, item, spans, owner, by_id)
        for source_id in question["sources"]:
            documents.setdefault(source_id, Evidence(id=source_id, text=by_id[source_id].text))
        questions.append(question)
    return documents, questions


def _reader_question(
    name: str, item: Item, spans: list[Span], owner: dict[str, str], by_id: dict[str, Item]
) -> QuestionFields:
    """One item as a reader is asked it: its sources by document ID, its kind and gold."""
    own = owner[item.text]
    others = [owner[by_id[n].text] for n in item.neighbours[: READER_NEIGHBOURS[item.answerable]]]
    sources = list(others)
    sources.insert(random.Random(f"quality:{name}:{item.id}").randint(0, len(others)), own)
    kind = name if name == "nq-open" else f"{name}-{'' if item.answerable else 'un'}answerable"
    return QuestionFields(
        id=item.id,
        kind=kind,
        question=item.question,
        sources=tuple(sources),
        answerable=item.answerable,
        gold_answers=(item.answers if not item.selected else (item.long_answer or "",))
        if item.answerable
        else (),
        gold_quotes=tuple((own, item.text[a:b]) for a, b in spans),
        split=item.split,
        judged_by_citation=bool(item.selected),
    )
