"""Trust on public questions, with no model: every answer-level check, measured at scale.

Each item of a public set (``public_sets.py``: NQ-open, ClapNQ, XQuAD by language and, held
out, SQuAD 2.0, BoolQ, HotpotQA and TAT-QA) is answered by the real engine
(``answer_from_evidence``) with a scripted reader that replies with a prepared ledger: a
**perfect** one (what a perfect reader writes: the gold answer, citing exactly the gold
sentence; for a yes-or-no question, the verdict as the object of the question's claim,
citing the gold passage's sentence that best matches the question), a **realistic** right one
(the question's words restated, a date or number written another way, two sentences cited),
a **countered** right one (the perfect ledger, sent beside the ``superseded`` copy that
``superseded_only`` cites, with the copy's changed sentence cited ``contradicts`` after its
first fact's supporting citation: one verified contradicting citation, which the defaults
must not withhold), or a **wrong** one of five kinds:

- ``on_topic_non_answer``: an unanswerable item (ClapNQ, SQuAD 2.0): its on-topic passage's
  sentence sharing most words with the question, cited as the answer;
- ``distractor``: the best-overlapping sentence of the top other passage sent (the first
  random one, or the retriever's nearest), cited as the answer;
- ``superseded_only``: the gold passage sent as ``current`` beside a ``superseded`` copy in
  which the short answer is replaced by another item's; the ledger cites the copy, with the
  replaced answer as object and answer;
- ``object_not_cited``: the perfect ledger with its (first) fact's object, and the answer,
  replaced by another item's answer that the cited text lacks;
- ``near_miss``: an item whose short answer holds a number, and whose gold passage holds
  another: that other number, citing its sentence.

Each is sent in three configurations: the gold passage ``alone``; with 2-4 ``random`` other
items' passages; with a BM25 retriever's 3-9 nearest others (``bm25``, precomputed by
``data/public/make_sets.py``; HotpotQA's own distractor paragraphs, which its retriever found
for the question). A perfect ledger is also sent with the gold passage ranked ``first`` among
9 of those neighbours under the default allowance. Counts, the gold passage's place and the
other answers drawn are seeded by the item's ID, and source IDs are a retriever's
(``doc-1``...). A yes-or-no item has no ledger of the kinds that need a span of its answer
(:data:`VERDICT_NOT_BUILT` says why). Both citation modes:
in passage mode the reader cites the labels of the passages holding its sentence, read from
the request it receives.

Every check runs with the policy ``flag`` and no confidence floor, so one run gives each
check's flags: the share of ledgers a check flags is the share it withholds when it abstains.
The tables apply a policy to those flags, the engine's rule (an answer carrying a flag whose
policy is ``abstain`` is withheld): today's defaults unless ``--policy`` says otherwise.

Run from the workspace root::

    uv run python benchmarks/trust.py [--sets nq-open,clapnq,...] [--split tune|report|all]
        [--modes quote,passage] [--configs alone,random,bm25] [--limit N] [--quick]
        [--json PATH] [--records PATH] [--policy CHECK=flag|abstain,...] [--summary]
        [--workers N]

It prints the machine line, then Markdown tables, then the wall time. ``--json`` writes one
record per ledger judged (and per ledger that could not be built); ``--records`` tabulates
stored records again, under any ``--policy``, without running anything (:func:`tables`);
``--summary`` prints each check's table and one row per set (:func:`summary`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast, get_args

from _common import machine_line, require
from public_sets import (
    HELDOUT,
    SETS,
    SPLITS,
    Item,
    Span,
    answer_span,
    covering,
    find_phrase,
    gold_spans,
    in_split,
    items_by_id,
    load_items,
    sentences,
)

from evidence_first import (
    CitationMode,
    Evidence,
    EvidenceStatus,
    ModelRequest,
    answer_from_evidence,
)
from evidence_first._sending.injection import DATAMARK
from evidence_first._shapes.limits import MAX_PASSAGES_PER_CITATION
from evidence_first._shapes.vocabulary import AnswerFlag, CitationFlag, FlagPolicy
from evidence_first.adapters import AnswerOptionFields

CHECKS: tuple[AnswerFlag, ...] = get_args(AnswerFlag)
DEFAULT_POLICY: dict[str, FlagPolicy] = {
    check: AnswerOptionFields.model_fields[check].default for check in CHECKS
}
"""Today's default policy of each check, from the options' declaration."""
# The citation flags a ledger here can earn; ``contradicted_source`` takes the same path as
# ``superseded_source`` and no source here is marked contradicted.
CITATION_FLAGS: tuple[CitationFlag, ...] = tuple(
    flag for flag in get_args(CitationFlag) if flag != "contradicted_source"
)
MODES: tuple[CitationMode, ...] = get_args(CitationMode)
CONFIGS = ("alone", "random", "bm25", "first")
# The gold passage ranked first among its retriever's neighbours, under the default allowance:
# only a perfect ledger, and the sources that do not fit are left out as the engine packs them.
FIRST = "first"
PERFECT = "perfect"
# Right ledgers as readers write them: the question's words restated in the object, a date or
# a number written another way, an object drawn from two cited sentences.
REALISTIC_KINDS = ("restated", "reformatted", "two_sentences")
# The perfect ledger with one verified contradicting citation added to its first fact: the
# sentence of a ``superseded`` copy of the gold passage that gives another value.
COUNTERED = "countered"
RIGHT_KINDS = (PERFECT, *REALISTIC_KINDS, COUNTERED)
WRONG_KINDS = (
    "on_topic_non_answer",
    "distractor",
    "superseded_only",
    "object_not_cited",
    "near_miss",
)
KINDS = (*RIGHT_KINDS, *WRONG_KINDS)
# The embedded reader's ledgers its stored runs judged right (reader_policies.py).
READER = "reader"
NOT_BUILT = "not_built"
RANDOM_OTHERS = (2, 4)
BM25_OTHERS = (3, 9)
FIRST_OTHERS = 9
# Every source must be sent: the allowance holds 11 passages of any set here.
MAX_CONTEXT_TOKENS = 32_768
# An object drawn from a sentence: its last words, at most this many.
OBJECT_WORDS = 12
QUICK_SETS = ("nq-open", "clapnq")
QUICK_LIMIT = 12
# Draws of another item's answer before a wrong ledger is counted as not buildable.
DRAWS = 50

_STOPWORDS = frozenset(
    """
    a about an and are as at be by can did do does for from had has have how i in is it its
    of on or that the their there they this to was were what when where which who whom whose
    why will with
    """.split()  # noqa: SIM905 (a word list reads best as words)
)
# A number: digits, with ".", "," or ":" between digits, standing apart from letters and digits
# (a Han or kana character stands apart: Chinese writes "308分").
_APART = r"[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]"
_NUMBER = re.compile(rf"(?<!{_APART})\d+(?:[.,:]\d+)*(?!{_APART})")
_MONTH = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b",
    re.IGNORECASE,
)


# ---------------------------------------------------------------------------------------
# What is sent and what the scripted reader states


@dataclass(frozen=True)
class Source:
    """One source as a case sends it."""

    text: str
    title: str
    status: EvidenceStatus | None = None


@dataclass(frozen=True)
class Against:
    """A citation a fact's ledger marks ``contradicts``: ``span`` of source ``source``.

    ``value`` is the other value it gives, which passage mode keeps within one citation.
    """

    source: int
    span: Span
    value: str


@dataclass(frozen=True)
class Claim:
    """One fact of a scripted ledger: it cites ``span`` of source ``source`` (an index).

    Its contradicting citations (``against``) follow its supporting one.
    """

    source: int
    span: Span
    subject: str
    relation: str
    object: str
    against: tuple[Against, ...] = ()


@dataclass(frozen=True)
class Case:
    """One ledger of one kind, over the sources of one configuration, in the order sent."""

    kind: str
    config: str
    sources: tuple[Source, ...]
    claims: tuple[Claim, ...]
    answer: str


@dataclass(frozen=True)
class Sent:
    """A configuration's sources: where the gold passage is, and the top other passage."""

    sources: tuple[Source, ...]
    gold: int
    top_other: int | None


def source_id(index: int) -> str:
    return f"doc-{index + 1}"


def sent_passages(request: ModelRequest, texts: Mapping[str, str]) -> dict[str, list[Any]]:
    """Each source's passages as the request sent them: ``(label, span)`` in its text.

    Read from the user message's JSON array of sources. A passage is an exact span of its
    source; the whitespace between passages belongs to none, and datamarking changes
    characters one for one, so each span follows from the passage's length.
    """
    user = request.user
    sent, _ = json.JSONDecoder().raw_decode(user, user.index("["))
    found: dict[str, list[Any]] = {}
    for source in sent:
        text = texts[source["id"]]
        at, spans = 0, []
        for passage in source["passages"]:
            while at < len(text) and text[at].isspace():
                at += 1
            piece = passage["text"]
            end = at + len(piece)
            require(
                piece.replace(DATAMARK, " ") == text[at:end].replace(DATAMARK, " "),
                f"passage {passage['label']} is not the next span of its source",
            )
            spans.append((passage["label"], (at, end)))
            at = end
        found[source["id"]] = spans
    return found


def label_groups(touched: Sequence[tuple[str, Span]], held: Span | None) -> list[list[str]]:
    """The labels of a fact's passages, at most four a citation, as a careful reader cites them.

    The passages that hold the object (``held``) make one citation when they are four or
    fewer, so that one cited span holds the whole object; the passages before and after it
    make citations of up to four.
    """
    most = MAX_PASSAGES_PER_CITATION

    def chunks(labels: list[str]) -> list[list[str]]:
        return [labels[n : n + most] for n in range(0, len(labels), most)]

    labels = [label for label, _ in touched]
    if held is None:
        return chunks(labels)
    inside = [n for n, (_, (a, b)) in enumerate(touched) if a < held[1] and held[0] < b]
    if not inside or len(inside) > most:
        return chunks(labels)
    first, last = inside[0], inside[-1] + 1
    return [*chunks(labels[:first]), labels[first:last], *chunks(labels[last:])]


def sent_ids(request: ModelRequest) -> set[str]:
    """The IDs of the sources a request sent, read from the user message's JSON array."""
    user = request.user
    sent, _ = json.JSONDecoder().raw_decode(user, user.index("["))
    return {source["id"] for source in sent}


# What a perfect reader replies when the passage that holds the answer was not sent.
NOT_SENT = {
    "answerable": "no",
    "facts": [],
    "answer": None,
    "inference": None,
    "missing_evidence": ["the passage that states the answer"],
}


def cited_as(
    source: int,
    span: Span,
    value: str,
    texts: Mapping[str, str],
    labels: Mapping[str, list[Any]],
) -> list[dict[str, Any]]:
    """A span's citations: its exact text (quote mode), or the labels of its passages.

    In passage mode (``labels`` given) the passages holding ``value`` make one citation when
    they are four or fewer (:func:`label_groups`).
    """
    cited = source_id(source)
    start, end = span
    if not labels:
        return [{"quote": texts[cited][start:end], "source_id": cited}]
    touched = [(label, at) for label, at in labels[cited] if at[0] < end and start < at[1]]
    found = texts[cited].find(value, start, end)
    held = None if found < 0 else (found, found + len(value))
    return [
        {"source_id": cited, "passages": group, "quote": None}
        for group in label_groups(touched, held)
    ]


def counter_cited(
    against: Against, texts: Mapping[str, str], labels: Mapping[str, list[Any]]
) -> list[dict[str, Any]]:
    """A contradicting citation: in passage mode, only the passages that hold its value."""
    citations = cited_as(against.source, against.span, against.value, texts, labels)
    if labels:
        found = texts[source_id(against.source)].find(against.value, *against.span)
        holding = {
            label
            for label, (a, b) in labels[source_id(against.source)]
            if a < found + len(against.value) and found < b
        }
        citations = [c for c in citations if holding & set(c["passages"])]
    return [{**citation, "stance": "contradicts"} for citation in citations]


def ledger_json(case: Case, mode: CitationMode, request: ModelRequest) -> str:
    """The case's ledger as a reader writes it: quotes, or the labels of its passages.

    A reader sent none of the passages it would cite says that the sources lack the answer.
    A supporting citation leaves ``stance`` out (it then means ``supports``); a contradicting
    one writes it.
    """
    texts = {source_id(n): source.text for n, source in enumerate(case.sources)}
    cited = {claim.source for claim in case.claims}
    cited |= {against.source for claim in case.claims for against in claim.against}
    if not {source_id(n) for n in cited} <= sent_ids(request):
        return json.dumps(NOT_SENT)
    labels = sent_passages(request, texts) if mode == "passage" else {}
    facts = []
    for claim in case.claims:
        citations = cited_as(claim.source, claim.span, claim.object, texts, labels)
        for against in claim.against:
            citations += counter_cited(against, texts, labels)
        facts.append(
            {
                "subject": claim.subject,
                "relation": claim.relation,
                "object": claim.object,
                "citations": citations,
            }
        )
    ledger = {
        "answerable": "yes",
        "facts": facts,
        "answer": case.answer,
        "inference": None,
        "missing_evidence": [],
    }
    return json.dumps(ledger, ensure_ascii=False)


class ScriptedReader:
    """A reader that replies with a prepared ledger, citing what the request sent."""

    def __init__(self, case: Case, mode: CitationMode) -> None:
        self.case = case
        self.mode = mode

    def generate(self, request: ModelRequest) -> str:
        return ledger_json(self.case, self.mode, request)


# ---------------------------------------------------------------------------------------
# Building the cases of one item


def content_words(text: str) -> set[str]:
    """The text's words of two characters or more, case-folded, less common English ones."""
    return {
        word
        for word in re.findall(r"\w+", text.casefold())
        if len(word) > 1 and word not in _STOPWORDS
    }


def best_sentence(text: str, question: str) -> Span:
    """The sentence sharing most words with the question (the first of equals)."""
    asked = content_words(question)
    return max(
        sentences(text) or ((0, len(text)),),
        key=lambda span: len(asked & content_words(text[span[0] : span[1]])),
    )


def _trimmable(char: str) -> bool:
    return char.isspace() or unicodedata.category(char)[0] in "PS"


def tail_phrase(text: str, span: Span) -> Span:
    """The span's last words (at most :data:`OBJECT_WORDS`), trailing punctuation trimmed."""
    start, end = span
    while end > start and _trimmable(text[end - 1]):
        end -= 1
    found = list(re.finditer(r"\S+", text[start:end]))
    if not found:
        return span
    return start + found[max(0, len(found) - OBJECT_WORDS)].start(), end


def absent(phrase: str, text: str) -> bool:
    """Whether the text lacks ``phrase`` as the fact-words check reads it (independently).

    Case-folded with whitespace collapsed, the phrase is not in the text, nor are all of its
    numbers and month names (when it has any) as whole words.
    """
    folded = " ".join(text.casefold().split())
    if " ".join(phrase.casefold().split()) in folded:
        return False
    parts = [m.group().casefold() for m in (*_NUMBER.finditer(phrase), *_MONTH.finditer(phrase))]
    return not parts or not all(
        re.search(rf"(?<!\w){re.escape(part)}(?!\w)", folded) for part in parts
    )


@dataclass(frozen=True)
class Pool:
    """What one set offers every item: its passages and its short answers."""

    by_id: dict[str, Item]
    passages: tuple[Item, ...]  # the first item of each distinct passage
    answers: tuple[tuple[str, str], ...]  # (item ID, its short answer) for every item with one


def short_answer(item: Item) -> Span | None:
    """The item's short answer in its passage: the gold answer, or ClapNQ's first object."""
    if item.selected:
        spans = gold_spans(item)
        return tail_phrase(item.text, spans[0]) if spans else None
    return answer_span(item) if item.answerable else None


@functools.cache
def pool(name: str) -> Pool:
    items = load_items(name)
    distinct: dict[str, Item] = {}
    answers = []
    for item in items:
        distinct.setdefault(item.text, item)
        found = short_answer(item)
        if found is not None:
            answers.append((item.id, item.text[found[0] : found[1]]))
    return Pool(items_by_id(name), tuple(distinct.values()), tuple(answers))


def rng_for(item: Item, purpose: str) -> random.Random:
    """A generator seeded by the set, the item's ID and what it draws for (stable anywhere)."""
    return random.Random(f"trust:{item.set}:{item.id}:{purpose}")


def retrieved(item: Item) -> list[Source]:
    """What a retriever sends beside the item's passage, nearest first.

    HotpotQA's own distractors where the set has them: the paragraphs its retriever found
    for the question, each a source as a retriever sends it. Else the BM25 neighbours' passages.
    """
    if item.distractors:
        return [Source(text, title) for title, text in item.distractors]
    by_id = pool(item.set).by_id
    return [Source(by_id[n].text, by_id[n].title) for n in item.neighbours]


def configuration(item: Item, config: str, rng: random.Random) -> Sent:
    """The sources of one configuration, the gold passage at a seeded-random place."""
    gold = Source(item.text, item.title)
    sources: list[Source] = []
    if config == "random":
        count = rng.randint(*RANDOM_OTHERS)
        # One more than needed, so that leaving out the item's own passage leaves enough.
        drawn = rng.sample(pool(item.set).passages, count + 1)
        others = [other for other in drawn if other.text != item.text][:count]
        sources = [Source(other.text, other.title) for other in others]
    elif config == "bm25":
        sources = retrieved(item)[: rng.randint(*BM25_OTHERS)]
    elif config == FIRST:
        sources = retrieved(item)[:FIRST_OTHERS]
    place = 0 if config == FIRST else rng.randint(0, len(sources))
    sources.insert(place, gold)
    top = None if len(sources) == 1 else (0 if place > 0 else 1)
    return Sent(tuple(sources), place, top)


def other_answer(item: Item, *texts: str) -> str | None:
    """Another item's short answer that each of ``texts`` lacks, drawn with a seed."""
    own = short_answer(item)
    mine = "" if own is None else item.text[own[0] : own[1]].casefold()
    answers = pool(item.set).answers
    rng = rng_for(item, "other answer")
    for _ in range(DRAWS):
        owner, answer = answers[rng.randrange(len(answers))]
        if owner == item.id or not answer.strip() or (mine and mine in answer.casefold()):
            continue
        if all(absent(answer, text) for text in texts):
            return answer
    return None


def near_miss_number(item: Item, answer: Span) -> Span | None:
    """Another number of the gold passage than the answer's: same length first."""
    text = item.text
    numbers = [m.group() for m in _NUMBER.finditer(text[answer[0] : answer[1]])]
    if not numbers:
        return None
    found = [
        (m.start(), m.end())
        for m in _NUMBER.finditer(text)
        if (m.end() <= answer[0] or m.start() >= answer[1]) and m.group() not in numbers
    ]
    same = [span for span in found if span[1] - span[0] == len(numbers[0])]
    return next(iter(same or found), None)


def applicable_kinds(item: Item) -> tuple[str, ...]:
    """The ledger kinds an item is meant to have (some may still not be buildable)."""
    if not item.answerable:
        return ("on_topic_non_answer",)
    kinds = (*RIGHT_KINDS, "distractor", "superseded_only", "object_not_cited")
    return (*kinds, "near_miss") if item.answers else kinds


def built_in(kind: str, config: str) -> bool:
    """Whether a kind of ledger is built in a configuration at all.

    A distractor is another passage sent, so none is built over the gold passage alone; with
    the gold passage first under the default allowance only the perfect ledger is built.
    """
    if config == FIRST:
        return kind == PERFECT
    return kind != "distractor" or config != "alone"


# Words that open a question and are not restated ("how many" opens with two).
_ASKING = re.compile(
    r"^\s*(?:how (?:many|much|long|far|old|often)|who|whom|whose|what|when|where|which|why|how"
    r"|is|are|was|were|do|does|did|can|could|will|would|has|have|had|should)\b\s*",
    re.IGNORECASE,
)
# The words of the other sentence a two-sentence object ends with.
JOINED_WORDS = 4
# The question's last words a restated object holds.
RESTATED_WORDS = 4


# A word that asks inside a question ("the denomination that has how many members").
_ASKS = re.compile(
    r"\b(?:how (?:many|much)|which|what|who|whom|whose|where|when|why|how)\b", re.IGNORECASE
)


def restated_question(question: str) -> str | None:
    """The question's words as a reader restates them in an object: its last words.

    As the embedded reader's stored ledgers do ("Red Sox games", "unsalted butter", "spring
    concert programme"): at most :data:`RESTATED_WORDS` words after the question's opening
    word, or after the last word that asks inside it ("members" of "... has how many
    members?"), from the first that is not a common English word. English questions only.
    """
    asked = _ASKING.sub("", question.strip().rstrip("?").strip())
    inside = list(_ASKS.finditer(asked))
    if inside and asked[inside[-1].end() :].strip():
        asked = asked[inside[-1].end() :]
    words = asked.split()[-RESTATED_WORDS:]
    while words and words[0].casefold() in _STOPWORDS:
        words = words[1:]
    restated = " ".join(words)
    return restated if any(map(str.isalpha, restated)) else None


# The opening verb of a question asked to be answered yes or no.
_AUXILIARY = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|will|would|has|have|had|should|may|might"
    r"|must)\s+",
    re.IGNORECASE,
)
# Why a yes-or-no item has no ledger of these kinds (its other kinds are built).
VERDICT_NOT_BUILT = {
    "restated": "a yes or no answer's claim is the question's own words already",
    "reformatted": "a yes or no answer has no date or number to rewrite",
    "superseded_only": "a yes or no answer is no span of the passage to replace",
    "object_not_cited": "the opposite verdict states the same claim: no words check tells it",
    COUNTERED: "a yes or no answer is no span of the passage to replace, so no copy gives "
    "the other verdict",
}


def verdict_claim(question: str) -> tuple[str, str]:
    """A yes-or-no question as a reader states its claim: ``(subject, relation)``.

    The relation is the question's opening verb ("is", "does"), the subject the rest of its
    words ("windows movie maker part of windows essentials"): the engine reads a verdict's
    claim as the subject's and relation's words together.
    """
    asked = question.strip().rstrip("?").strip()
    opening = _AUXILIARY.match(asked)
    if opening is None:
        return asked, "is"
    return asked[opening.end() :], opening.group(1).casefold()


def verdict_sentence(text: str, question: str) -> Span:
    """The sentence a reader cites for a yes-or-no claim: the question's numbers, then words.

    The sentence holding every number the question holds, if one does, sharing most words
    with the question (the first of equals).
    """
    asked = content_words(question)
    numbers = set(_NUMBER.findall(question))

    def score(span: Span) -> tuple[bool, int]:
        sentence = _slice(text, span)
        return numbers <= set(_NUMBER.findall(sentence)), len(asked & content_words(sentence))

    return max(sentences(text) or ((0, len(text)),), key=score)


_MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_MONTH_NAME = "(" + "|".join(_MONTH_NAMES) + ")"
_UNIT_WORDS = {
    "minutes": "min",
    "minute": "min",
    "hours": "h",
    "seconds": "s",
    "kilometres": "km",
    "kilometers": "km",
    "metres": "m",
    "meters": "m",
    "kilograms": "kg",
    "percent": "%",
    "miles": "mi",
    "feet": "ft",
}


def _month_number(name: str) -> int:
    return [m.casefold() for m in _MONTH_NAMES].index(name.casefold()) + 1


# How a reader writes a date, a number or a unit another way: each pattern and its rewrite.
_REWRITES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(rf"\b{_MONTH_NAME} (\d{{1,2}}), (\d{{4}})\b", re.IGNORECASE),
        lambda m: f"{m[3]}-{_month_number(m[1]):02}-{int(m[2]):02}",
    ),
    (
        re.compile(rf"\b(\d{{1,2}}) {_MONTH_NAME},? (\d{{4}})\b", re.IGNORECASE),
        lambda m: f"{m[3]}-{_month_number(m[2]):02}-{int(m[1]):02}",
    ),
    (re.compile(rf"\b{_MONTH_NAME} (\d{{1,2}})\b", re.IGNORECASE), lambda m: f"{m[2]} {m[1]}"),
    (re.compile(rf"\b(\d{{1,2}}) {_MONTH_NAME}\b", re.IGNORECASE), lambda m: f"{m[2]} {m[1]}"),
    (
        re.compile(rf"\b{_MONTH_NAME} (\d{{4}})\b", re.IGNORECASE),
        lambda m: f"{m[1][:3]}. {m[2]}",
    ),
    (re.compile(r"\b(\d{1,3}(?:,\d{3})+)\b"), lambda m: m[1].replace(",", "")),
    (re.compile(r"(?<![\d.,])(\d{5,})(?![\d.,])"), lambda m: f"{int(m[1]):,}"),
    (
        re.compile(r"\b(\d+(?:\.\d+)?) (" + "|".join(_UNIT_WORDS) + r")\b", re.IGNORECASE),
        lambda m: f"{m[1]} {_UNIT_WORDS[m[2].casefold()]}",
    ),
    (re.compile(r"(\d)%"), lambda m: f"{m[1]} percent"),
)


def written_another_way(text: str) -> str | None:
    """``text`` with a date, a number or a unit written as another writer would, or ``None``.

    "July 25, 2017" is "2017-07-25", "June 15" is "15 June", "July 2017" is "Jul. 2017", "8,420"
    is "8420" and "84200" is "84,200", "35 minutes" is "35 min", "62%" is "62 percent".
    """
    written = text
    for pattern, rewrite in _REWRITES:
        written, count = pattern.subn(rewrite, written, count=1)
        if count:
            break
    return None if written == text else written


class ItemCases:
    """The cases of one item; what cannot be built is counted with its reason."""

    def __init__(self, item: Item) -> None:
        self.item = item
        # Why a kind of ledger could not be built, by (kind, configuration).
        self.not_built: dict[tuple[str, str], str] = {}

    def perfect_claims(self, sent: Sent) -> tuple[Claim, ...] | None:
        item = self.item
        spans = gold_spans(item)
        if not spans:
            return None
        if item.selected:
            return tuple(
                Claim(
                    sent.gold,
                    span,
                    item.title,
                    "states",
                    _slice(item.text, tail_phrase(item.text, span)),
                )
                for span in spans
            )
        found = answer_span(item)
        assert found is not None
        subject = item.question.strip().rstrip("?").strip()
        return (Claim(sent.gold, spans[0], subject, "is", _slice(item.text, found)),)

    def cases(self, config: str) -> list[Case]:
        item = self.item
        if config == FIRST and not item.answerable:
            return []
        rng = rng_for(item, config)
        sent = configuration(item, config, rng)
        if not item.answerable:
            span = best_sentence(item.text, item.question)
            claim = Claim(
                sent.gold,
                span,
                item.title,
                "states",
                _slice(item.text, tail_phrase(item.text, span)),
            )
            return [
                Case(
                    "on_topic_non_answer",
                    config,
                    sent.sources,
                    (claim,),
                    _slice(item.text, span).strip(),
                )
            ]
        if item.yes_no and not item.selected:
            return self.verdict_cases(config, sent)
        claims = self.perfect_claims(sent)
        if claims is None:
            why = (
                "a selected sentence is not in the passage"
                if item.selected
                else "no selected sentence"
                if item.long_answer is not None
                else "the answer is not in the passage"
            )
            for kind in applicable_kinds(item):
                if built_in(kind, config):
                    self.not_built[kind, config] = why
            return []
        built = [Case(PERFECT, config, sent.sources, claims, self.perfect_answer(claims))]
        if config == FIRST:
            return built
        built.extend(self.realistic(config, sent, claims))
        built.extend(self.distractor(config, sent))
        built.extend(self.superseded(config, sent, rng, claims))
        first = claims[0]
        cited = item.text[first.span[0] : first.span[1]]
        replaced = other_answer(item, cited)
        if replaced is None:
            self.not_built["object_not_cited", config] = "no other answer the cited text lacks"
        else:
            wrong = Claim(first.source, first.span, first.subject, first.relation, replaced)
            built.append(
                Case("object_not_cited", config, sent.sources, (wrong, *claims[1:]), replaced)
            )
        built.extend(self.near_miss(config, sent))
        return built

    def realistic(self, config: str, sent: Sent, claims: tuple[Claim, ...]) -> list[Case]:
        """The right ledgers a reader writes in its own words, each where the item allows it."""
        first, rest = claims[0], claims[1:]
        answer = self.perfect_answer(claims)
        built = []
        restated = restated_question(self.item.question)
        if SETS[self.item.set].language != "en":
            # Its question words are read in English only: a German or Chinese question's
            # last words are its question words.
            self.not_built["restated", config] = "the question is not in English"
        elif restated is None:
            self.not_built["restated", config] = "the question has no words to restate"
        else:
            # As the demo's reader wrote it: the answer as the subject, the question's words
            # as the object ("Dana Whitfield | owns | the payment provider security review").
            claim = Claim(first.source, first.span, first.object, "answers", restated)
            built.append(Case("restated", config, sent.sources, (claim, *rest), answer))
        written = written_another_way(first.object)
        if written is None:
            self.not_built["reformatted", config] = "the answer holds no date or number to rewrite"
        else:
            claim = Claim(first.source, first.span, first.subject, first.relation, written)
            built.append(Case("reformatted", config, sent.sources, (claim, *rest), written))
        joined = self.two_sentences(first)
        if joined is None:
            self.not_built["two_sentences", config] = "the passage has one sentence"
        else:
            built.append(Case("two_sentences", config, sent.sources, (joined, *rest), answer))
        return built

    def next_sentence(self, span: Span) -> Span | None:
        """The sentence after ``span`` in the item's passage, or the one before if none."""
        spans = sentences(self.item.text)
        after = [other for other in spans if other[0] >= span[1]]
        before = [other for other in spans if other[1] <= span[0]]
        return after[0] if after else before[-1] if before else None

    def two_sentences(self, claim: Claim) -> Claim | None:
        """The claim citing its sentences and the next one (or the one before), joined.

        Its object is drawn from both: the answer, then the other sentence's last words.
        """
        text = self.item.text
        other = self.next_sentence(claim.span)
        if other is None:
            return None
        words = re.findall(r"\S+", _slice(text, tail_phrase(text, other)))[-JOINED_WORDS:]
        joined = (min(claim.span[0], other[0]), max(claim.span[1], other[1]))
        obj = f"{claim.object}, {' '.join(words)}"
        return Claim(claim.source, joined, claim.subject, claim.relation, obj)

    def verdict_cases(self, config: str, sent: Sent) -> list[Case]:
        """A yes-or-no item's ledgers: its verdict, claimed in the question's words.

        The perfect ledger's one fact is the question's claim (:func:`verdict_claim`) with the
        gold verdict as its object, citing the gold passage's sentence that best matches the
        question (:func:`verdict_sentence`); ``two_sentences`` cites it and the next sentence;
        a ``distractor`` cites the top other passage's best-matching sentence for the same
        claim. Kinds that need a span of the answer are not built (:data:`VERDICT_NOT_BUILT`).
        """
        item = self.item
        verdict = item.long_answer or item.answers[0]
        subject, relation = verdict_claim(item.question)
        span = verdict_sentence(item.text, item.question)
        claim = Claim(sent.gold, span, subject, relation, verdict)
        built = [Case(PERFECT, config, sent.sources, (claim,), verdict)]
        if config == FIRST:
            return built
        for kind, why in VERDICT_NOT_BUILT.items():
            self.not_built[kind, config] = why
        other = self.next_sentence(span)
        if other is None:
            self.not_built["two_sentences", config] = "the passage has one sentence"
        else:
            joined = (min(span[0], other[0]), max(span[1], other[1]))
            two = Claim(sent.gold, joined, subject, relation, verdict)
            built.append(Case("two_sentences", config, sent.sources, (two,), verdict))
        if sent.top_other is not None:
            top = sent.sources[sent.top_other]
            cited = verdict_sentence(top.text, item.question)
            wrong = Claim(sent.top_other, cited, subject, relation, verdict)
            built.append(Case("distractor", config, sent.sources, (wrong,), verdict))
        return built

    def distractor(self, config: str, sent: Sent) -> list[Case]:
        """The top other passage's sentence nearest the question, unless it holds an answer."""
        if sent.top_other is None:
            return []
        other = sent.sources[sent.top_other]
        span = best_sentence(other.text, self.item.question)
        sentence = _slice(other.text, span)
        if any(find_phrase(sentence, answer) for answer in self.item.answers):
            self.not_built["distractor", config] = "its sentence holds a gold answer"
            return []
        tail = _slice(other.text, tail_phrase(other.text, span))
        claim = Claim(sent.top_other, span, other.title, "states", tail)
        return [Case("distractor", config, sent.sources, (claim,), sentence.strip())]

    def perfect_answer(self, claims: Sequence[Claim]) -> str:
        return self.item.long_answer or claims[0].object

    def superseded(
        self, config: str, sent: Sent, rng: random.Random, claims: tuple[Claim, ...]
    ) -> list[Case]:
        """The ledgers over a ``superseded`` copy of the gold passage holding another answer.

        The copy, with another item's answer in place of the short answer, is sent beside the
        gold passage (marked ``current``). ``superseded_only`` cites the copy's changed
        sentence as the answer; ``countered`` is the perfect ledger (``claims``) with that
        sentence cited against its first fact, after the fact's supporting citation.
        """
        item = self.item
        found = short_answer(item)
        replaced = None if found is None else other_answer(item, item.text)
        if found is None or replaced is None:
            why = "no other answer the gold passage lacks"
            self.not_built["superseded_only", config] = why
            self.not_built[COUNTERED, config] = why
            return []
        start, end = found
        copy = item.text[:start] + replaced + item.text[end:]
        sources = list(sent.sources)
        sources[sent.gold] = Source(item.text, item.title, "current")
        place = rng.randint(0, len(sources))
        sources.insert(place, Source(copy, item.title, "superseded"))
        span = covering(copy, start, start + len(replaced))
        claim = Claim(place, span, item.title, "states", replaced)
        # The copy sent before the gold passage moves it one place on.
        moved = [
            Claim(c.source + (place <= c.source), c.span, c.subject, c.relation, c.object)
            for c in claims
        ]
        against = (Against(place, span, replaced),)
        first = moved[0]
        countered = Claim(
            first.source, first.span, first.subject, first.relation, first.object, against
        )
        return [
            Case("superseded_only", config, tuple(sources), (claim,), replaced),
            Case(
                COUNTERED,
                config,
                tuple(sources),
                (countered, *moved[1:]),
                self.perfect_answer(claims),
            ),
        ]

    def near_miss(self, config: str, sent: Sent) -> list[Case]:
        """Another number of the passage as the answer; not for a set without short answers."""
        item = self.item
        found = answer_span(item)
        if not item.answers or found is None:
            return []
        if not _NUMBER.search(_slice(item.text, found)):
            self.not_built["near_miss", config] = "the answer holds no number"
            return []
        number = near_miss_number(item, found)
        if number is None:
            self.not_built["near_miss", config] = "the passage holds no other number"
            return []
        value = _slice(item.text, number)
        span = covering(item.text, *number)
        subject = item.question.strip().rstrip("?").strip()
        claim = Claim(sent.gold, span, subject, "is", value)
        return [Case("near_miss", config, sent.sources, (claim,), value)]


def _slice(text: str, span: Span) -> str:
    return text[span[0] : span[1]]


# ---------------------------------------------------------------------------------------
# Judging: one record per ledger


@dataclass(frozen=True)
class Record:
    """One ledger judged in one mode, or one kind of ledger an item could not have.

    Attributes:
        set: The set's name.
        split: The item's split.
        item: The item's ID.
        kind: ``perfect`` or a wrong kind.
        config: ``alone``, ``random`` or ``bm25``.
        mode: The citation mode (``-`` when not built).
        status: The engine's status, every check flagging only; or ``not_built``.
        reasons: An ``invalid_response``'s reason codes, or why the ledger was not built.
        flags: The answer's flags (``EvidenceAnswer.flags``).
        citation_flags: Every flag any of its citations carries.
        verified: Whether every citation it produced verified.
        sources: How many sources the case gave.
        sent: How many of them were sent.
        confidence: The reader's confidence (the reader's own ledgers only).
        counter_citations: The answer's verified contradicting citations
            (``Fact.counter_citations``, over every fact).
    """

    set: str
    split: str
    item: str
    kind: str
    config: str
    mode: str
    status: str
    reasons: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    citation_flags: tuple[str, ...] = ()
    verified: bool = False
    sources: int = 0
    sent: int = 0
    confidence: float | None = None
    counter_citations: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Record:
        values = dict(record)
        for name in ("reasons", "flags", "citation_flags"):
            values[name] = tuple(values[name])
        return cls(**values)

    @property
    def built(self) -> bool:
        return self.status != NOT_BUILT

    def withheld(self, policy: Mapping[str, FlagPolicy]) -> bool:
        """Whether the engine withholds it under ``policy`` (its rule: a flag that abstains)."""
        return self.status == "insufficient_evidence" or (
            self.status == "answered" and any(policy.get(f) == "abstain" for f in self.flags)
        )

    def answered(self, policy: Mapping[str, FlagPolicy]) -> bool:
        return self.status == "answered" and not self.withheld(policy)


def judge_case(item: Item, case: Case, mode: CitationMode) -> Record:
    """Answer the item with the case's ledger through the engine, every check only flagging."""
    require(
        set(CHECKS)
        == {"non_current_evidence", "unsupported_facts", "uncovered_question", "contested_facts"},
        "a check was added: set its policy to flag below",
    )
    sources = [
        Evidence(id=source_id(n), text=source.text, status=source.status)
        for n, source in enumerate(case.sources)
    ]
    # With the gold passage first, the default allowance decides what is sent.
    allowance = {} if case.config == FIRST else {"max_context_tokens": MAX_CONTEXT_TOKENS}
    answer = answer_from_evidence(
        item.question,
        sources,
        ScriptedReader(case, mode),
        citation_mode=mode,
        min_reader_confidence=None,
        non_current_evidence="flag",
        unsupported_facts="flag",
        uncovered_question="flag",
        contested_facts="flag",
        **allowance,
    )
    sent = len(answer.used_source_ids)
    require(case.config == FIRST or sent == len(sources), f"{item.id}: a source was not sent")
    checks = answer.citation_checks
    return Record(
        set=item.set,
        split=item.split,
        item=item.id,
        kind=case.kind,
        config=case.config,
        mode=mode,
        status=answer.status,
        reasons=answer.reason_codes,
        flags=answer.flags,
        citation_flags=tuple(sorted({flag for check in checks for flag in check.flags})),
        verified=bool(checks) and all(check.verdict == "verified" for check in checks),
        sources=len(sources),
        sent=sent,
        counter_citations=sum(len(fact.counter_citations) for fact in answer.facts),
    )


def item_records(
    name: str, item_id: str, configs: Sequence[str], modes: Sequence[CitationMode]
) -> list[Record]:
    """Every ledger of one item in every configuration and mode, and what was not built."""
    item = pool(name).by_id[item_id]
    cases = ItemCases(item)
    records = [
        judge_case(item, case, mode)
        for config in configs
        for case in cases.cases(config)
        for mode in modes
    ]
    records.extend(
        Record(item.set, item.split, item.id, kind, config, "-", NOT_BUILT, (why,))
        for (kind, config), why in cases.not_built.items()
    )
    return records


def _item_records(task: tuple[str, str, Sequence[str], Sequence[CitationMode]]) -> list[Record]:
    return item_records(*task)


def run(
    sets: Sequence[str],
    split: str,
    configs: Sequence[str],
    modes: Sequence[CitationMode],
    *,
    limit: int | None = None,
    workers: int = 1,
) -> list[Record]:
    """Every ledger of every item of the sets' split, in the sets' and items' order.

    Items are independent and seeded by their IDs, so ``workers`` processes give the same
    records as one.
    """
    tasks = [
        (name, item.id, tuple(configs), tuple(modes))
        for name in sets
        for item in in_split(load_items(name), split)[:limit]
    ]
    if workers <= 1:
        return [record for task in tasks for record in _item_records(task)]
    with ProcessPoolExecutor(max_workers=workers) as executor:
        done = executor.map(_item_records, tasks, chunksize=32)
        return [record for records in done for record in records]


def reader_records(splits: Sequence[str]) -> list[Record]:
    """The embedded reader's stored ledgers that its runs judged right, judged again here.

    No model runs: ``reader_policies.py`` judges every stored reply again with this engine,
    every check flagging and no floor, and keeps the reader's confidence as it was read.
    """
    from reader_policies import MODES as READER_MODES
    from reader_policies import RESULTS, RUNS, judged

    records = []
    for split in splits:
        for name, file in RUNS.get(split, ()):
            for mode in READER_MODES:
                records.extend(
                    Record(
                        set=name,
                        split=split,
                        item=outcome.id,
                        kind=READER,
                        config="stored",
                        mode=mode,
                        status=outcome.status,
                        flags=outcome.answer_flags,
                        verified=True,
                        confidence=outcome.reader_confidence,
                    )
                    for outcome in judged(name, RESULTS / file, mode)
                    if outcome.correct
                )
    return records


# ---------------------------------------------------------------------------------------
# Tables


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def per_mode(
    records: Sequence[Record], modes: Sequence[str], share: Callable[[Record], bool]
) -> str:
    """One share per mode, ``quote / passage``."""
    cells = []
    for mode in modes:
        of_mode = [record for record in records if record.mode == mode]
        cells.append(percent(sum(map(share, of_mode)), len(of_mode)))
    return " / ".join(cells)


def flagged(check: str) -> Callable[[Record], bool]:
    return lambda record: check in record.flags


def cited_with(flag: str) -> Callable[[Record], bool]:
    return lambda record: flag in record.citation_flags


def markdown(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, labels: int = 2, notes: int = 0
) -> list[str]:
    """A Markdown table: ``labels`` text columns, then figures, then ``notes`` text columns."""
    figures = len(header) - labels - notes
    align = "|" + "---|" * labels + "---:|" * figures + "---|" * notes
    lines = ["| " + " | ".join(header) + " |", align]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _grouped(records: Sequence[Record], *fields: str) -> dict[tuple[str, ...], list[Record]]:
    groups: dict[tuple[str, ...], list[Record]] = {}
    for record in records:
        groups.setdefault(tuple(getattr(record, name) for name in fields), []).append(record)
    return groups


def _order(records: Sequence[Record]) -> tuple[list[str], list[str], list[str], list[str]]:
    """The sets, splits, configurations and modes the records hold, in the run's order."""
    sets = list(dict.fromkeys(record.set for record in records))
    splits = [s for s in (*SPLITS, HELDOUT) if any(record.split == s for record in records)]
    configs = [c for c in CONFIGS if any(record.config == c for record in records)]
    modes: list[str] = [m for m in MODES if any(record.mode == m for record in records)]
    return sets, splits, configs, modes


def policy_line(policy: Mapping[str, FlagPolicy]) -> str:
    named = ", ".join(f"`{check}` {policy.get(check, 'flag')}" for check in CHECKS)
    today = " (today's defaults)" if dict(policy) == DEFAULT_POLICY else ""
    return f"Policy applied: {named}{today}; no confidence floor."


def on_checks(policy: Mapping[str, FlagPolicy]) -> list[str]:
    """The checks a policy runs: every check but those it turns off."""
    return [check for check in CHECKS if policy.get(check, "flag") != "off"]


def flagged_on(policy: Mapping[str, FlagPolicy]) -> Callable[[Record], bool]:
    """Whether a record carries the flag of a check the policy runs."""
    on = set(on_checks(policy))
    return lambda record: bool(on & set(record.flags))


def right_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Right ledgers, by set, kind and configuration: answered under the policy, and each flag."""
    sets, _, configs, modes = _order(records)
    groups = _grouped(
        [r for r in records if r.kind in RIGHT_KINDS and r.built], "set", "kind", "config"
    )
    header = [
        "set",
        "kind",
        "config",
        "ledgers",
        "answered",
        "invalid_response",
        *(f"flagged `{check}`" for check in CHECKS),
        "flagged by a check on",
        "withheld under the policy",
        *(f"citation flag `{flag}`" for flag in CITATION_FLAGS),
    ]
    rows = []
    for name in sets:
        for kind in RIGHT_KINDS:
            for config in configs:
                group = groups.get((name, kind, config), [])
                if group:
                    rows.append([name, kind, config, *_right_cells(group, modes, policy)])
    return markdown(header, rows, labels=3)


def _right_cells(
    group: Sequence[Record], modes: Sequence[str], policy: Mapping[str, FlagPolicy]
) -> list[str]:
    return [
        str(len(group) // len(modes)),
        per_mode(group, modes, lambda r: r.answered(policy)),
        per_mode(group, modes, lambda r: r.status == "invalid_response"),
        *(per_mode(group, modes, flagged(check)) for check in CHECKS),
        per_mode(group, modes, flagged_on(policy)),
        per_mode(group, modes, lambda r: r.withheld(policy)),
        *(per_mode(group, modes, cited_with(flag)) for flag in CITATION_FLAGS),
    ]


def countered_pairs(records: Sequence[Record]) -> list[tuple[Record, Record]]:
    """Each ``countered`` ledger beside the same item's perfect one, configuration and mode."""
    key = ("set", "split", "item", "config", "mode")
    perfect = {tuple(getattr(r, k) for k in key): r for r in records if r.kind == PERFECT}
    pairs = []
    for record in records:
        if record.kind == COUNTERED and record.built:
            twin = perfect.get(tuple(getattr(record, k) for k in key))
            if twin is not None and twin.built:
                pairs.append((record, twin))
    return pairs


def extra_abstentions(
    pairs: Sequence[tuple[Record, Record]], modes: Sequence[str], policy: Mapping[str, FlagPolicy]
) -> str:
    """Per mode, the ``countered`` ledgers withheld whose perfect twin is not (target: 0)."""
    counts = [
        sum(c.withheld(policy) and not p.withheld(policy) for c, p in pairs if c.mode == mode)
        for mode in modes
    ]
    return " / ".join(map(str, counts))


def countered_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """``countered`` ledgers against the same items' perfect ones, by set and configuration.

    The target: a verified contradicting citation adds no abstention under the policy. A
    value the passage cutter splits over more than four passages is cited in two
    contradicting citations in passage mode (the most one citation names).
    """
    sets, _, configs, modes = _order(records)
    pairs = countered_pairs(records)
    header = [
        "set",
        "config",
        "ledgers",
        "counter-citation returned",
        "flagged `contested_facts`",
        "flagged `non_current_evidence`",
        "`countered` answered",
        "`perfect` answered",
        "`countered` withheld",
        "`perfect` withheld",
        "extra abstentions",
    ]
    rows = []
    for name in sets:
        for config in configs:
            of = [(c, p) for c, p in pairs if c.set == name and c.config == config]
            if not of:
                continue
            countered = [c for c, _ in of]
            perfect = [p for _, p in of]
            rows.append(
                [
                    name,
                    config,
                    str(len(of) // len(modes)),
                    per_mode(countered, modes, lambda r: r.counter_citations > 0),
                    per_mode(countered, modes, flagged("contested_facts")),
                    per_mode(countered, modes, flagged("non_current_evidence")),
                    per_mode(countered, modes, lambda r: r.answered(policy)),
                    per_mode(perfect, modes, lambda r: r.answered(policy)),
                    per_mode(countered, modes, lambda r: r.withheld(policy)),
                    per_mode(perfect, modes, lambda r: r.withheld(policy)),
                    extra_abstentions(of, modes, policy),
                ]
            )
    return markdown(header, rows)


def first_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Perfect ledgers with the gold passage first among its neighbours, default allowance."""
    sets, _, _, modes = _order(records)
    first = [r for r in records if r.config == FIRST and r.kind == PERFECT and r.built]
    header = ["set", "ledgers", "answered", "gold passage not sent", "sources sent (median)"]
    rows = []
    for name in sets:
        group = [r for r in first if r.set == name]
        if group:
            medians = []
            for mode in modes:
                sent = sorted(r.sent for r in group if r.mode == mode)
                medians.append(str(sent[len(sent) // 2]) if sent else "-")
            rows.append(
                [
                    name,
                    str(len(group) // len(modes)),
                    per_mode(group, modes, lambda r: r.answered(policy)),
                    per_mode(group, modes, lambda r: r.status == "insufficient_evidence"),
                    " / ".join(medians),
                ]
            )
    return markdown(header, rows, labels=1)


def wrong_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Wrong ledgers, by set, kind and configuration: each check's flags, and the catch."""
    sets, _, configs, modes = _order(records)
    wrong = [r for r in records if r.kind in WRONG_KINDS and r.built]
    groups = _grouped(wrong, "set", "kind", "config")
    header = [
        "set",
        "kind",
        "config",
        "ledgers",
        "invalid_response",
        *(f"flagged `{check}`" for check in CHECKS),
        "flagged or withheld by a check on",
        "withheld under the policy",
    ]
    caught = flagged_on(policy)
    rows = []
    for name in sets:
        for kind in WRONG_KINDS:
            for config in configs:
                group = groups.get((name, kind, config), [])
                if not group:
                    continue
                cells = [
                    per_mode(group, modes, lambda r: r.status == "invalid_response"),
                    *(per_mode(group, modes, flagged(check)) for check in CHECKS),
                    per_mode(
                        group,
                        modes,
                        lambda r: r.status == "insufficient_evidence" or caught(r),
                    ),
                    per_mode(group, modes, lambda r: r.withheld(policy)),
                ]
                rows.append([name, kind, config, str(len(group) // len(modes)), *cells])
    return markdown(header, rows, labels=3)


def reader_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """The reader's stored right ledgers, by run and mode: each flag, and what withholds them.

    "Withheld by the reader's floors" applies its profile's floors (a flagged answer held to
    the higher one, for the flags of the checks the policy runs) and the policy.
    """
    from evidence_first.adapters import profile_for_name

    profile = profile_for_name("qwen2.5-coder-1.5b")
    caught = flagged_on(policy)

    def floored(record: Record) -> bool:
        mode = cast(CitationMode, record.mode)
        floor = profile.confidence_floors.get(mode)
        raised = profile.flagged_floors.get(mode)
        if caught(record) and raised is not None:
            floor = max(raised, floor or 0.0)
        below = floor is not None and (record.confidence is None or record.confidence < floor)
        return below or record.withheld(policy)

    header = [
        "run",
        "split",
        "mode",
        "right ledgers",
        *(f"flagged `{check}`" for check in CHECKS),
        "flagged by a check on",
        "withheld under the policy",
        "withheld by the reader's floors",
    ]
    rows = []
    groups = _grouped([r for r in records if r.kind == READER], "set", "split", "mode")
    for (name, split, mode), group in groups.items():
        count = len(group)
        rows.append(
            [
                name,
                split,
                mode,
                str(count),
                *(_share(group, flagged(check)) for check in CHECKS),
                _share(group, caught),
                _share(group, lambda r: r.withheld(policy)),
                _share(group, floored),
            ]
        )
    return markdown(header, rows, labels=3)


def _share(records: Sequence[Record], share: Callable[[Record], bool]) -> str:
    count = sum(map(share, records))
    return f"{count} ({percent(count, len(records))})"


def checks_table(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Each check: the most right ledgers it flags, and its catch of each kind of wrong one.

    The most is over every set, configuration and mode; a catch is over all of them together.
    """
    _, _, _, modes = _order([r for r in records if r.kind != READER])
    header = [
        "check",
        "policy",
        *(f"flags `{kind}`: most, where" for kind in RIGHT_KINDS),
        "flags the reader's right ledgers",
        *(f"catches `{kind}`" for kind in WRONG_KINDS),
    ]
    rows = []
    for check in CHECKS:
        cells = [f"`{check}`", policy.get(check, "flag")]
        for kind in RIGHT_KINDS:
            cells.append(_most(records, kind, modes, flagged(check)))
        reader = [r for r in records if r.kind == READER]
        cells.append(_share(reader, flagged(check)) if reader else "-")
        for kind in WRONG_KINDS:
            group = [r for r in records if r.kind == kind and r.built]
            cells.append(per_mode(group, modes, flagged(check)) if group else "-")
        rows.append(cells)
    return markdown(header, rows)


def _most(
    records: Sequence[Record], kind: str, modes: Sequence[str], share: Callable[[Record], bool]
) -> str:
    """The highest share of a kind's ledgers flagged in one set and configuration, and where."""
    groups = _grouped([r for r in records if r.kind == kind and r.built], "set", "config", "mode")
    if not groups:
        return "-"
    rates = {key: sum(map(share, group)) / len(group) for key, group in groups.items()}
    (name, config, _), rate = max(rates.items(), key=lambda pair: pair[1])
    return f"{100 * rate:.1f}% ({name}, {config})"


def built_table(records: Sequence[Record]) -> list[str]:
    """How many items each kind of ledger was built for, and why the others were not."""
    sets, splits, configs, _ = _order(records)
    kinds = [kind for kind in KINDS if any(r.kind == kind for r in records)]
    each = " / ".join(configs)
    header = ["set", "split", *(f"{kind} ({each})" for kind in kinds), "not built: why"]
    rows = []
    for name in sets:
        for split in splits:
            of = [r for r in records if r.set == name and r.split == split]
            if of:
                rows.append([name, split, *_built_cells(of, kinds, configs)])
    return markdown(header, rows, labels=2, notes=1)


def _built_cells(
    records: Sequence[Record], kinds: Sequence[str], configs: Sequence[str]
) -> list[str]:
    """One set's and split's row: each kind's items built per configuration, then the notes."""
    cells, notes = [], []
    for kind in kinds:
        of_kind = [r for r in records if r.kind == kind]
        cells.append(_built_counts(kind, of_kind, configs))
        note = _not_built_note(kind, of_kind, configs)
        if note:
            notes.append(note)
    return [*cells, "; ".join(notes) or "-"]


def _built_counts(kind: str, records: Sequence[Record], configs: Sequence[str]) -> str:
    """The items a kind's ledger was built for, per configuration (``-``: never built there)."""
    counts = [
        "-"
        if not records or not built_in(kind, config)
        else str(len({r.item for r in records if r.config == config and r.built}))
        for config in configs
    ]
    return " / ".join(counts)


def _not_built_note(kind: str, records: Sequence[Record], configs: Sequence[str]) -> str:
    """Why a kind's ledger was not built, with the items of each reason; empty if always built."""
    missing = Counter((r.reasons[0], r.config) for r in records if not r.built)
    reasons = dict.fromkeys(reason for reason, _ in missing)
    if not reasons:
        return ""
    counted = [_why(why, [missing[why, c] for c in configs], configs) for why in reasons]
    return f"{kind}: {', '.join(counted)}"


def _why(reason: str, counts: Sequence[int], configs: Sequence[str]) -> str:
    """A reason and its items: one count when every configuration with any has the same."""
    some = [count for count in counts if count]
    if len(set(some)) == 1 and len(some) >= len(configs) - 1:
        return f"{some[0]} {reason}"
    each = ", ".join(f"{c} {count}" for c, count in zip(configs, counts, strict=True) if count)
    return f"{reason} ({each})"


def invalid_table(records: Sequence[Record]) -> list[str]:
    """Every ``invalid_response``, by set, split, kind, configuration, mode and reason code."""
    counts = Counter(
        (r.set, r.split, r.kind, r.config, r.mode, code)
        for r in records
        if r.status == "invalid_response"
        for code in r.reasons
    )
    rows = [[*key, str(count)] for key, count in sorted(counts.items())]
    if not rows:
        rows = [["(none)", "", "", "", "", "", "0"]]
    header = ["set", "split", "kind", "config", "mode", "reason code", "ledgers"]
    return markdown(header, rows, labels=6)


def _most_by_mode(
    group: Sequence[Record],
    modes: Sequence[str],
    configs: Sequence[str],
    share: Callable[[Record], bool],
) -> str:
    """The highest share of any one configuration, per mode: ``quote / passage``."""
    cells = []
    for mode in modes:
        rates = []
        for config in configs:
            of = [r for r in group if r.mode == mode and r.config == config]
            if of:
                rates.append(sum(map(share, of)) / len(of))
        cells.append(f"{100 * max(rates):.1f}%" if rates else "-")
    return " / ".join(cells)


def right_by_set(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Right ledgers by set and split: the most any one configuration flags or withholds."""
    sets, splits, configs, modes = _order(records)
    right = [r for r in records if r.kind in RIGHT_KINDS and r.built]
    header = [
        "set",
        "split",
        "items",
        *(f"`perfect` flagged `{check}`" for check in CHECKS),
        *(f"`{kind}` flagged by a check on" for kind in REALISTIC_KINDS),
        "right ledgers withheld under the policy",
        "`countered` answered",
        "`countered` withheld, `perfect`'s same ledgers",
        "`countered` extra abstentions",
        "`perfect` answered, gold first",
    ]
    rows = []
    for name in sets:
        for split in splits:
            of = [r for r in right if r.set == name and r.split == split]
            if any(r.kind == PERFECT for r in of):
                rows.append([name, split, *_set_right_cells(of, modes, configs, policy)])
    return markdown(header, rows)


def _set_right_cells(
    of: Sequence[Record],
    modes: Sequence[str],
    configs: Sequence[str],
    policy: Mapping[str, FlagPolicy],
) -> list[str]:
    """One set's and split's row of :func:`right_by_set`, after its labels."""
    perfect = [r for r in of if r.kind == PERFECT]
    cells = [str(len({r.item for r in perfect}))]
    cells += [_most_by_mode(perfect, modes, configs, flagged(check)) for check in CHECKS]
    for kind in REALISTIC_KINDS:
        group = [r for r in of if r.kind == kind]
        cells.append(_most_by_mode(group, modes, configs, flagged_on(policy)) if group else "-")
    cells.append(_most_by_mode(of, modes, configs, lambda r: r.withheld(policy)))
    cells += _countered_cells(of, modes, policy)
    first = [r for r in perfect if r.config == FIRST]
    cells.append(per_mode(first, modes, lambda r: r.answered(policy)) if first else "-")
    return cells


def _countered_cells(
    of: Sequence[Record], modes: Sequence[str], policy: Mapping[str, FlagPolicy]
) -> list[str]:
    """``countered`` answered, withheld against its perfect twins, and the extra abstentions."""
    pairs = countered_pairs(of)
    if not pairs:
        return ["-", "-", "-"]
    countered = [c for c, _ in pairs]
    withheld = [
        f"{per_mode(countered, [mode], lambda r: r.withheld(policy))} vs "
        + per_mode([p for _, p in pairs], [mode], lambda r: r.withheld(policy))
        for mode in modes
    ]
    return [
        per_mode(countered, modes, lambda r: r.answered(policy)),
        " / ".join(withheld),
        extra_abstentions(pairs, modes, policy),
    ]


def wrong_by_set(records: Sequence[Record], policy: Mapping[str, FlagPolicy]) -> list[str]:
    """Wrong ledgers by set and split: each kind's share flagged or withheld by a check on."""
    sets, splits, _, modes = _order(records)
    wrong = [r for r in records if r.kind in WRONG_KINDS and r.built]
    caught = flagged_on(policy)

    def cell(group: Sequence[Record]) -> str:
        return per_mode(group, modes, lambda r: r.withheld(policy) or caught(r)) if group else "-"

    header = ["set", "split", *(f"`{kind}` caught" for kind in WRONG_KINDS)]
    rows = []
    for name in sets:
        for split in splits:
            of = [r for r in wrong if r.set == name and r.split == split]
            if of:
                cells = [cell([r for r in of if r.kind == kind]) for kind in WRONG_KINDS]
                rows.append([name, split, *cells])
    return markdown(header, rows)


def summary(records: Sequence[Record], policy: Mapping[str, FlagPolicy] = DEFAULT_POLICY) -> str:
    """The tables of :func:`tables` summarised: each check per split, then one row per set.

    A right ledger's cell is the most that any one configuration flags or withholds; a wrong
    kind's is over every configuration together.
    """
    scripted = [r for r in records if r.kind != READER]
    _, splits, _, modes = _order(records)
    lines = [policy_line(policy), f"Cells: {' / '.join(modes)}."]
    for split in splits:
        of = [r for r in records if r.split == split]
        label = "held out (every item)" if split == HELDOUT else f"{split} split"
        lines += ["", f"#### Each check, {label}", "", *checks_table(of, policy)]
    lines += ["", "#### Right ledgers by set", "", *right_by_set(scripted, policy)]
    lines += ["", "#### Wrong ledgers by set", "", *wrong_by_set(scripted, policy)]
    if any(r.kind == READER for r in records):
        lines += ["", "#### The reader's stored right ledgers", "", *reader_table(records, policy)]
    lines += ["", "#### Ledgers built", "", *built_table(scripted)]
    lines += ["", "#### `invalid_response` reason codes", "", *invalid_table(scripted)]
    return "\n".join(lines)


def tables(records: Sequence[Record], policy: Mapping[str, FlagPolicy] = DEFAULT_POLICY) -> str:
    """The Markdown tables of a run's records under a policy (check: off, flag or abstain).

    Records of any run (``--json``) can be tabulated again under another policy: the run
    asked with every check flagging, so a policy's effect follows from the flags alone.
    """
    scripted = [r for r in records if r.kind != READER]
    _, splits, _, modes = _order(records)
    lines = [policy_line(policy), f"Cells: {' / '.join(modes)}."]
    for split in splits:
        lines += _split_tables([r for r in records if r.split == split], split, policy)
    lines += [
        "",
        "#### Ledgers built",
        "",
        *built_table(scripted),
        "",
        "#### `invalid_response` reason codes",
        "",
        *invalid_table(scripted),
    ]
    return "\n".join(lines)


def _split_tables(of: Sequence[Record], split: str, policy: Mapping[str, FlagPolicy]) -> list[str]:
    """One split's tables: each check, the right, gold-first, wrong and reader's ledgers."""
    scripted = [r for r in of if r.kind != READER]
    items = dict.fromkeys((r.set, r.item) for r in scripted)
    label = "held out (every item)" if split == HELDOUT else f"{split} split"
    by_set = Counter(name for name, _ in items)
    counts = ", ".join(f"{name} {count}" for name, count in by_set.items())
    lines = [
        "",
        f"#### Each check, {label} (items: {counts})",
        "",
        *checks_table(of, policy),
        "",
        f"#### Right ledgers, {label}",
        "",
        *right_table(scripted, policy),
    ]
    if countered_pairs(scripted):
        lines += [
            "",
            f"#### A verified contradicting citation added to the perfect ledger, {label}",
            "",
            *countered_table(scripted, policy),
        ]
    if any(r.config == FIRST for r in scripted):
        lines += [
            "",
            f"#### The gold passage first among its retriever's {FIRST_OTHERS} nearest others, "
            f"the default allowance, {label}",
            "",
            *first_table(scripted, policy),
        ]
    lines += ["", f"#### Wrong ledgers, {label}", "", *wrong_table(scripted, policy)]
    if any(r.kind == READER for r in of):
        lines += [
            "",
            f"#### The reader's stored right ledgers, {label}",
            "",
            *reader_table(of, policy),
        ]
    return lines


# ---------------------------------------------------------------------------------------
# Command line


def _names(value: str, known: Sequence[str], what: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if not names or unknown or len(set(names)) != len(names):
        msg = f"give distinct {what} from {', '.join(known)}, comma-separated"
        raise argparse.ArgumentTypeError(msg)
    return names


def parse_policy(value: str) -> dict[str, FlagPolicy]:
    """``check=off|flag|abstain`` pairs, comma-separated, over today's defaults."""
    policy = dict(DEFAULT_POLICY)
    for pair in value.split(","):
        check, _, choice = pair.partition("=")
        if check.strip() not in CHECKS or choice.strip() not in get_args(FlagPolicy):
            msg = f"give check=off|flag|abstain pairs; the checks are {', '.join(CHECKS)}"
            raise argparse.ArgumentTypeError(msg)
        policy[check.strip()] = cast(FlagPolicy, choice.strip())
    return policy


DEFAULT_SETS = tuple(name for name, spec in SETS.items() if not spec.heldout)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets",
        type=lambda v: _names(v, list(SETS), "sets"),
        default=None,
        help=f"public sets, comma-separated (default: {','.join(DEFAULT_SETS)}; the held-out "
        "set only when named)",
    )
    parser.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        default="all",
        help="which slice of each set (default all: both, tabulated apart); a held-out set is "
        "always whole",
    )
    parser.add_argument(
        "--modes",
        type=lambda v: _names(v, MODES, "modes"),
        default=list(MODES),
        help="citation modes (default quote,passage)",
    )
    parser.add_argument(
        "--configs",
        type=lambda v: _names(v, CONFIGS, "configurations"),
        default=list(CONFIGS),
        help=f"configurations (default {','.join(CONFIGS)})",
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N items of each set")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{','.join(QUICK_SETS)}, the first {QUICK_LIMIT} items of each",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every record here")
    parser.add_argument(
        "--records",
        type=Path,
        default=None,
        help="tabulate the records of an earlier --json run instead of running",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print each check's table and one row per set instead of every configuration's",
    )
    parser.add_argument(
        "--policy",
        type=parse_policy,
        default=dict(DEFAULT_POLICY),
        help="check=off|flag|abstain pairs applied in the tables (default: today's defaults)",
    )
    parser.add_argument(
        "--reader",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also judge again the embedded reader's stored ledgers that its runs judged right "
        "(default: on, but not with --quick or --limit)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes (default: 2, or 1 on one core)",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.quick:
        args.sets = args.sets or list(QUICK_SETS)
        args.limit = args.limit or QUICK_LIMIT
    args.sets = args.sets or list(DEFAULT_SETS)
    if args.reader is None:
        args.reader = args.limit is None
    return args


def load_records(path: Path) -> list[Record]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Record.from_json(json.loads(line)) for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    if args.records is not None:
        records = load_records(args.records)
        what = f"Records of {args.records}."
    else:
        records = run(
            args.sets, args.split, args.configs, args.modes, limit=args.limit, workers=args.workers
        )
        if args.reader:
            records += reader_records(SPLITS if args.split == "all" else [args.split])
        described = "; ".join(f"{name}: {SETS[name].description}" for name in args.sets)
        what = (
            f"Sets: {described}. Split: {args.split}"
            + (f", the first {args.limit} items of each" if args.limit else "")
            + f". Configurations: {', '.join(args.configs)}; modes: {', '.join(args.modes)}."
            + (" With the reader's stored right ledgers." if args.reader else "")
        )
    if args.json is not None:
        with args.json.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record.as_json(), ensure_ascii=False) + "\n")
    elapsed = time.perf_counter() - start
    print(machine_line())
    print(what)
    print((summary if args.summary else tables)(records, args.policy))
    judged = sum(record.built for record in records)
    if args.records is None:
        print(
            f"\nWall time: {elapsed:.1f} s for {judged} ledgers judged, {args.workers} worker(s)."
        )
    else:
        print(f"\nTabulated {judged} stored ledgers in {elapsed:.1f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
