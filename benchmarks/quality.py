"""Answer quality on the project's own eval set, in both citation modes side by side.

Every question of ``data/quality/questions.json`` is answered from the documents it lists in
``data/quality/documents.json`` (2 to 4 each: the relevant ones and distractors), once per
citation mode, through the engine ``answer_from_evidence`` runs. The modes alternate question
by question, so a change in machine load affects both alike. The figures, per mode:

- status counts, and model errors (a timeout or a failed call, which is not a status);
- answered accuracy, over the answerable questions (coverage): the status is ``answered``, a
  gold answer string appears in the answer (case-insensitively; for a yes/no question, an
  answer opening with its correct reply counts too), and a verified citation's span overlaps a
  gold quote's span in the same source (half-open intervals; every ``evidence_spans`` group of
  a passage-mode citation counts);
- precision of ``answered``: correct answers over every ``answered`` result, an answered
  unanswerable question counting as wrong;
- abstention on the unanswerable questions: the share that did not end ``answered``
  (``insufficient_evidence`` or ``invalid_response``; a model error counts as neither), and
  the share that ended exactly ``insufficient_evidence``;
- citation validity: the share of every citation the model produced (``citation_checks``, so
  including those of invalid responses) that verified;
- citation support: the share of verified citations, on answerable questions, whose span
  overlaps a gold quote's span in the same source;
- the median output tokens the endpoint reported, and the median wall time per question.

A second table counts the ``invalid_response`` results carrying each reason code, and a third
gives answered accuracy by kind of question.

Run from the workspace root (the embedded local model by default, or any OpenAI-compatible
endpoint)::

    uv run python benchmarks/quality.py [--modes quote,passage] [--quick | --limit N]
        [--json PATH] [--base-url URL --model NAME --api-key-env VAR]
        [--set project|nq-open|clapnq|squad2] [--split tune|report|all]
        [--half-budget] [--compress]

``--set`` asks a public set's questions instead (``public_sets.reader_set``: each question's
own passage and a BM25 retriever's nearest others), exactly as the project's set is asked.
``--half-budget`` sets each question's ``max_context_tokens`` to half of what its sources are
charged whole, so some are omitted ``over_budget``; ``--compress`` asks with ``compress=True``,
so those are sent as their most relevant passages instead (``compression.py`` measures what
that keeps, with no model).

It prints the Python version and platform, the model line, then the Markdown tables; progress
goes to stderr. ``--json`` also writes every result (status, codes, answer, citations with
their stance, and the verified counter-citations that ``stances.py`` reads).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from _common import machine_line
from public_sets import HELDOUT, READER_SETS, reader_set

from evidence_first import (
    AnswerTimeoutError,
    Citation,
    CitationCheck,
    CitationMode,
    Evidence,
    EvidenceAnswer,
    ModelCallError,
    ModelResponse,
    ReaderModel,
    TokenUsage,
    profile_for,
)
from evidence_first._engine.entry_points import judge
from evidence_first._engine.invoke import call_model
from evidence_first._engine.plan import AnswerPlan, plan_answer
from evidence_first._sending.injection import DEFAULT_DEFENCES, Defences
from evidence_first._shapes.markers import marked_answer
from evidence_first._shapes.vocabulary import AnswerFlag
from evidence_first.adapters import AnswerOptionFields, AnswerOptions, output_format
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import DEFAULT_READER, KNOWN_MODELS, LocalModel

DATA = Path(__file__).parent / "data" / "quality"
MODES: tuple[CitationMode, ...] = get_args(CitationMode)
QUICK_QUESTIONS = 4
MAX_OUTPUT_TOKENS = 512
# The slowest answers on a loaded 2-core machine take a few minutes; 300 s is the contract's cap.
TIMEOUT_SECONDS = 300.0
# Every question's sources fit easily; a larger allowance keeps packing from omitting any.
MAX_CONTEXT_TOKENS = 4096
# A public set's passages are longer: one ClapNQ passage, a 23,000-character table, estimates
# at 6,932 tokens serialized (charged the same in passage mode), and a question's sources at
# 7,628 at most. The embedded reader's cap.
PUBLIC_CONTEXT_TOKENS = 8192
MODEL_ERROR = "model_error"
KINDS = ("single", "two-source", "superseded", "contradicted", "unanswerable")
SPLITS = ("tune", "report")
PROJECT_SET = "project"

Span = tuple[str, int, int]
"""A source ID and a half-open ``[start, end)`` range of its text."""


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    sources: tuple[str, ...]
    answerable: bool
    gold_answers: tuple[str, ...]
    gold_quotes: tuple[tuple[str, str], ...]
    split: str
    polarity: str | None = None  # a yes/no question's correct reply: "yes" or "no"
    # Whether any answer counts, its citations alone deciding: a public set whose gold
    # answers are long paraphrases (ClapNQ) has no answer string to look for.
    judged_by_citation: bool = False

    def is_gold(self, answer: str) -> bool:
        """Whether ``answer`` holds a gold answer, or opens with a yes/no question's reply.

        A gold answer counts only as whole words: "May 2" is not in "May 24". A question
        judged by its citations alone takes any answer.
        """
        if self.judged_by_citation or self.holds_gold(answer):
            return True
        first = answer.strip().split(maxsplit=1)[:1]
        return self.polarity is not None and [w.strip(".,;:!").casefold() for w in first] == [
            self.polarity
        ]

    def holds_gold(self, text: str) -> bool:
        """Whether a gold answer appears in ``text`` as whole words, case-folded."""
        folded = text.casefold()
        return any(
            re.search(rf"(?<!\w){re.escape(gold.casefold())}(?!\w)", folded)
            for gold in self.gold_answers
        )


def load_documents(path: Path = DATA / "documents.json") -> dict[str, Evidence]:
    """The eval set's documents by ID, as ``Evidence`` (ISO 8601 times are parsed)."""
    items = json.loads(path.read_text(encoding="utf-8"))["documents"]
    return {item["id"]: Evidence.model_validate(item) for item in items}


def load_questions(path: Path = DATA / "questions.json") -> list[Question]:
    items = json.loads(path.read_text(encoding="utf-8"))["questions"]
    return [
        Question(
            id=item["id"],
            kind=item["kind"],
            question=item["question"],
            sources=tuple(item["sources"]),
            answerable=item["answerable"],
            gold_answers=tuple(item["gold_answers"]),
            gold_quotes=tuple((gold["source_id"], gold["quote"]) for gold in item["gold_quotes"]),
            split=item["split"],
            polarity=item.get("polarity"),
        )
        for item in items
    ]


def load_set(name: str) -> tuple[dict[str, Evidence], list[Question]]:
    """The documents and questions of the project's eval set, or of a public set.

    A public set (``public_sets.reader_set``) comes in its stable order, so the first N of a
    split are the same sample on every run.
    """
    if name == PROJECT_SET:
        return load_documents(), load_questions()
    documents, questions = reader_set(name)
    return documents, [Question(**fields) for fields in questions]


def context_tokens(set_name: str) -> int:
    """The allowance that sends every source of the set's questions."""
    return MAX_CONTEXT_TOKENS if set_name == PROJECT_SET else PUBLIC_CONTEXT_TOKENS


def gold_spans(question: Question, documents: dict[str, Evidence]) -> list[Span]:
    spans: list[Span] = []
    for source_id, quote in question.gold_quotes:
        start = documents[source_id].text.find(quote)
        if start < 0:
            msg = f"{question.id}: a gold quote is not in {source_id}"
            raise ValueError(msg)
        spans.append((source_id, start, start + len(quote)))
    return spans


def citation_spans(check: CitationCheck) -> list[Span]:
    """The spans a verified citation points at: every group of a passage-mode citation."""
    citation = check.citation
    if citation is None:
        return []
    if citation.evidence_spans:
        return [(citation.source_id, s.char_start, s.char_end) for s in citation.evidence_spans]
    return [(citation.source_id, citation.char_start, citation.char_end)]


def overlaps(a: Span, b: Span) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def supports_gold(check: CitationCheck, gold: Sequence[Span]) -> bool:
    return any(overlaps(span, g) for span in citation_spans(check) for g in gold)


# The statuses a set gives the sources whose value another source overrides or denies.
MARKED_STATUSES = ("superseded", "contradicted")


@dataclass(frozen=True)
class CounterCitation:
    """A verified citation the reader marked ``contradicts``, as the stance targets read it.

    Attributes:
        fact: The index of its fact in the answer's facts.
        source_id: The cited source.
        text: The cited text: each group of a passage-mode citation, joined by " … ".
        spans: Each group's half-open code-point offsets in the source, origin first.
        marked_source: Whether the set marks the source superseded or contradicted.
        other_value: Whether the cited text holds another value than the gold answer: the
            question has gold answers and none appears in the text (whole words, case-folded,
            as an answer is judged). A span that repeats the gold answer agrees with it,
            whatever the reader said; one that lacks it says something else, which on the
            project's superseded and contradicted questions is the old or rumoured value.
    """

    fact: int
    source_id: str
    text: str
    spans: tuple[tuple[int, int], ...]
    marked_source: bool
    other_value: bool

    @classmethod
    def of(
        cls, fact: int, citation: Citation, question: Question, marked: Collection[str]
    ) -> CounterCitation:
        groups = citation.evidence_spans
        spans = [(g.char_start, g.char_end) for g in groups] or [
            (citation.char_start, citation.char_end)
        ]
        text = " … ".join(g.text for g in groups) if groups else citation.quote
        return cls(
            fact=fact,
            source_id=citation.source_id,
            text=text,
            spans=tuple(spans),
            marked_source=citation.source_id in marked,
            other_value=bool(question.gold_answers) and not question.holds_gold(text),
        )

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> CounterCitation:
        spans = tuple((start, end) for start, end in record["spans"])
        return cls(**{**record, "spans": spans})

    @property
    def counter_evidence(self) -> bool:
        """What the targets count: a marked source's span holding the other value."""
        return self.marked_source and self.other_value


def marked_sources(plan: AnswerPlan) -> frozenset[str]:
    """The IDs of the plan's sources that the set marks superseded or contradicted."""
    return frozenset(
        source_id for source_id, source in plan.offered.items() if source.status in MARKED_STATUSES
    )


@dataclass(frozen=True)
class Outcome:
    """One question answered in one mode, as the tables count it and ``--json`` stores it."""

    id: str
    kind: str
    answerable: bool
    mode: str
    status: str  # an AnswerStatus, or MODEL_ERROR
    correct: bool
    reason_codes: tuple[str, ...]
    produced: int  # citations the model produced (citation_checks)
    verified: int
    supporting: int  # verified citations overlapping a gold span
    input_tokens: int | None
    cached_input_tokens: int | None
    output_tokens: int | None
    latency_s: float
    detail: dict[str, Any]  # answer, citations, raw response: for reading, not counting
    reader_confidence: float | None = None
    answer_flags: tuple[str, ...] = ()
    marked: bool = False  # an answered result whose answer carried a fact marker
    segments: int = 0  # an answered result's segments
    supported_segments: int = 0  # those resting on facts (marked or assigned)
    invalid_markers: int = 0  # markers in the reply naming no fact of its ledger
    # The verified contradicting citations of its facts (stance per citation, passage/11 and
    # quote/10 on); a stored row of an earlier prompt has none.
    counter_citations: tuple[CounterCitation, ...] = ()

    @property
    def tokens_per_citation(self) -> float | None:
        """Output tokens over the citations the model wrote; None without either."""
        if self.output_tokens is None or not self.produced:
            return None
        return self.output_tokens / self.produced

    def decided(
        self,
        floor: float | None,
        abstain_on: Collection[str] = (),
        flagged_floor: float | None = None,
    ) -> Outcome:
        """The outcome as the engine returns it with these floors and these flags abstaining.

        The run asks with no floor and every flag only flagging, so that any floor and policy
        can be applied afterwards by the engine's own rule: an answer whose reader confidence is
        below the floor (or unreadable, under a floor; an answer carrying a flag is held to
        ``flagged_floor`` where there is one), or that carries a flag that abstains, becomes
        ``insufficient_evidence``.
        """
        if self.status != "answered":
            return self
        if self.answer_flags and flagged_floor is not None:
            floor = max(flagged_floor, floor or 0.0)
        below = floor is not None and (
            self.reader_confidence is None or self.reader_confidence < floor
        )
        if below or set(self.answer_flags) & set(abstain_on):
            return dataclasses.replace(self, status="insufficient_evidence", correct=False)
        return self

    @classmethod
    def of(
        cls,
        question: Question,
        mode: CitationMode,
        answer: EvidenceAnswer | None,
        gold: Sequence[Span],
        latency_s: float,
        error: str | None = None,
        finish_reason: str | None = None,
        marked: Collection[str] = (),
    ) -> Outcome:
        """A judged answer, or with ``answer`` None a call that failed (``error`` names why).

        ``marked`` names the sources the set marks superseded or contradicted
        (:func:`marked_sources`), read by each counter-citation.
        """
        if answer is None:
            return cls.failed(question, mode, latency_s, error, finish_reason)
        checks = answer.citation_checks
        verified = [check for check in checks if check.verdict == "verified"]
        supporting = [check for check in verified if supports_gold(check, gold)]
        correct = (
            question.answerable
            and answer.status == "answered"
            and question.is_gold(answer.answer or "")
            and bool(supporting)
        )
        segments = answer.segments
        return cls(
            id=question.id,
            kind=question.kind,
            answerable=question.answerable,
            mode=mode,
            status=answer.status,
            correct=correct,
            reason_codes=answer.reason_codes,
            produced=len(checks),
            verified=len(verified),
            supporting=len(supporting),
            **_token_counts(answer.usage),
            latency_s=round(latency_s, 2),
            reader_confidence=answer.reader_confidence,
            answer_flags=answer.flags,
            marked=any(segment.support == "marked" for segment in segments),
            segments=len(segments),
            supported_segments=sum(segment.support != "unmarked" for segment in segments),
            invalid_markers=invalid_markers(answer.raw_response),
            counter_citations=tuple(
                CounterCitation.of(index, citation, question, marked)
                for index, fact in enumerate(answer.facts)
                for citation in fact.counter_citations
            ),
            detail={
                "question": question.question,
                "error": error,
                "answer": answer.answer,
                "missing_evidence": list(answer.missing_evidence),
                "citations": [_check_json(check, gold) for check in checks],
                "raw_response": answer.raw_response,
                "finish_reason": finish_reason,
            },
        )

    @classmethod
    def failed(
        cls,
        question: Question,
        mode: CitationMode,
        latency_s: float,
        error: str | None,
        finish_reason: str | None = None,
    ) -> Outcome:
        """A call that timed out or failed: no answer, no citations, no token counts."""
        return cls(
            id=question.id,
            kind=question.kind,
            answerable=question.answerable,
            mode=mode,
            status=MODEL_ERROR,
            correct=False,
            reason_codes=(),
            produced=0,
            verified=0,
            supporting=0,
            input_tokens=None,
            cached_input_tokens=None,
            output_tokens=None,
            latency_s=round(latency_s, 2),
            detail={
                "question": question.question,
                "error": error,
                "answer": None,
                "missing_evidence": [],
                "citations": [],
                "raw_response": None,
                "finish_reason": finish_reason,
            },
        )

    def as_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["reason_codes"] = list(self.reason_codes)
        record["answer_flags"] = list(self.answer_flags)
        return record

    @classmethod
    def judged_again(
        cls, record: dict[str, Any], question: Question, plan: AnswerPlan, gold: Sequence[Span]
    ) -> Outcome:
        """A stored result, its model output judged again by today's engine.

        The stored request is byte-identical (its run key), so only what the engine makes of the
        reply can have changed: flags, checks, gold answers. The reader's confidence was read
        from log-probabilities that are not stored, and is kept as it was.
        """
        detail = record["detail"]
        if detail.get("raw_response") is None:
            return cls.from_json(record, question)
        response = ModelResponse(
            text=detail["raw_response"], finish_reason=detail.get("finish_reason")
        )
        answer = judge(plan, response).model_copy(
            update={"reader_confidence": record.get("reader_confidence")}
        )
        mode = plan.options.citation_mode
        again = cls.of(
            question, mode, answer, gold, record["latency_s"], marked=marked_sources(plan)
        )
        usage = {
            name: record[name] for name in ("input_tokens", "cached_input_tokens", "output_tokens")
        }
        return dataclasses.replace(again, **usage)

    @classmethod
    def from_json(cls, record: dict[str, Any], question: Question) -> Outcome:
        """A stored result, judged again by ``question``'s gold answers as they are now."""
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {name: record[name] for name in fields if name in record}
        values["reason_codes"] = tuple(values["reason_codes"])
        values["answer_flags"] = tuple(values.get("answer_flags", ()))
        values["counter_citations"] = tuple(
            CounterCitation.from_json(item) for item in values.get("counter_citations", ())
        )
        values["correct"] = (
            question.answerable
            and values["status"] == "answered"
            and question.is_gold(values["detail"]["answer"] or "")
            and values["supporting"] > 0
        )
        return cls(**values)


def _token_counts(usage: TokenUsage | None) -> dict[str, int | None]:
    """An answer's prompt, cached and output tokens; None where the provider reported none."""
    return {
        "input_tokens": None if usage is None else usage.input_tokens,
        "cached_input_tokens": None if usage is None else usage.cached_input_tokens,
        "output_tokens": None if usage is None else usage.output_tokens,
    }


def invalid_markers(raw: str | None) -> int:
    """How many fact markers of a reply's answer name no fact of its ledger (0 if unreadable)."""
    try:
        ledger = json.loads(raw or "")
    except ValueError:
        return 0
    if not isinstance(ledger, dict) or not isinstance(ledger.get("answer"), str):
        return 0
    facts = ledger.get("facts")
    count = len(facts) if isinstance(facts, list) else 0
    numbers = marked_answer(ledger["answer"], count).numbers
    return sum(not 1 <= number <= count for number in numbers)


def _check_json(check: CitationCheck, gold: Sequence[Span]) -> dict[str, Any]:
    return {
        "path": check.path,
        "source_id": check.source_id,
        "quote": check.quote,
        "stance": check.stance,
        "verdict": check.verdict,
        "code": check.code,
        "passages": [] if check.citation is None else list(check.citation.passages),
        "spans": [[start, end] for _, start, end in citation_spans(check)],
        "overlaps_gold": supports_gold(check, gold),
        "flags": list(check.flags),
    }


def plan_one(
    question: Question,
    mode: CitationMode,
    documents: dict[str, Evidence],
    model: ReaderModel,
    *,
    defences: Defences = DEFAULT_DEFENCES,
    min_score: float | None = None,
    max_context_tokens: int = MAX_CONTEXT_TOKENS,
    compress: bool = False,
    every_source: bool = True,
) -> AnswerPlan:
    """The checked request for one question in one mode, before anything is sent.

    With ``every_source`` and without ``min_score`` every source must be sent; ``defences``
    are the injection defences the request is built with (the defaults unless a benchmark
    measures them).
    """
    sources = [documents[source_id] for source_id in question.sources]
    options = AnswerOptions(
        citation_mode=mode,
        max_context_tokens=max_context_tokens,
        max_output_tokens=MAX_OUTPUT_TOKENS,
        timeout=TIMEOUT_SECONDS,
        min_score=min_score,
        defences=defences,
        compress=compress,
        # No floor, and flags only flag: any floor or policy is applied to the stored results.
        min_reader_confidence=None,
        non_current_evidence="flag",
        unsupported_facts="flag",
        uncovered_question="flag",
    )
    plan = plan_answer(options, question.question, sources, model)
    if every_source and min_score is None and len(plan.packed.sent) != len(sources):
        msg = f"{question.id}: not every source would be sent ({plan.omissions})"
        raise RuntimeError(msg)
    return plan


def answer_one(
    question: Question, documents: dict[str, Evidence], model: ReaderModel, plan: AnswerPlan
) -> Outcome:
    """Send a planned request; a timeout or failed call is recorded, not raised."""
    gold = tuple(gold_spans(question, documents))
    mode = plan.options.citation_mode
    start = time.perf_counter()
    try:
        assert plan.request is not None
        response = call_model(model, plan.request, cancel=None)
    except (AnswerTimeoutError, ModelCallError) as exc:
        latency = time.perf_counter() - start
        return Outcome.of(question, mode, None, gold, latency, type(exc).__name__)
    answer = judge(plan, response)
    latency = time.perf_counter() - start
    return Outcome.of(
        question,
        mode,
        answer,
        gold,
        latency,
        finish_reason=response.finish_reason,
        marked=marked_sources(plan),
    )


def run_key(identity: str, plan: AnswerPlan, model: ReaderModel | None = None) -> str:
    """What a stored result must match to be reused: the model and the exact request.

    The request is what the model reads (system prompt, user message, schema, output limit),
    so a result is reused only for byte-identical input, whatever its prompt version is named
    (a prompt version names the defaults, and a change of defaults renames a prompt). Where
    ``model``'s profile sends the schema as a grammar (the ``llguidance`` dialect), the grammar
    is part of it too: it decides the layout the model writes. A request asked with
    ``compress=True`` where nothing was compressed is byte-identical to the one without, and
    shares its result: compression changed nothing the model reads, so a run with it and one
    without differ only where it did (the reader's replies to one request move with the
    server's cache state, and a second answer to it would count that as compression's).
    """
    request = plan.request
    if request is None:
        return f"{identity} | no model call"
    sent: list[Any] = [request.system, request.user, request.json_schema, request.max_tokens]
    profile = None if model is None else profile_for(model)
    grammar = None
    if profile is not None and profile.structured_output:
        grammar = output_format(request, profile).get("grammar")
    if grammar is not None:
        sent.append(grammar)
    digest = hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()
    return f"{identity} | request sha256 {digest[:16]}"


def load_done(path: Path | None) -> dict[str, dict[str, Any]]:
    """The records a previous run stored in ``path`` (JSON Lines), by run key."""
    done: dict[str, dict[str, Any]] = {}
    if path is None or not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            done[record["run_key"]] = record
    return done


def half_of_sources(
    question: Question, documents: dict[str, Evidence], model: ReaderModel, allowance: int
) -> int:
    """Half of what the question's sources are charged whole, by the packing's own counter.

    The charge is the same in every citation mode, so one plan gives it.
    """
    whole = plan_one(question, "quote", documents, model, max_context_tokens=allowance)
    return max(whole.packed.tokens // 2, 1)


def run(
    questions: Sequence[Question],
    modes: Sequence[CitationMode],
    documents: dict[str, Evidence],
    model: ReaderModel,
    *,
    model_line: str,
    store: Path | None = None,
    max_context_tokens: int = MAX_CONTEXT_TOKENS,
    half_budget: bool = False,
    compress: bool = False,
) -> dict[CitationMode, list[Outcome]]:
    """Answer every question in every mode, alternating modes question by question.

    With ``store``, each result is appended to it as a JSON line as soon as it is known, and
    results already there for the same run key are reused, so a stopped run picks up where it
    stopped. With ``half_budget`` each question's allowance is half of what its sources are
    charged whole under ``max_context_tokens`` (:func:`half_of_sources`); ``compress`` asks
    with ``compress=True``.
    """
    done = load_done(store)
    outcomes: dict[CitationMode, list[Outcome]] = {mode: [] for mode in modes}
    total = len(questions) * len(modes)
    for question in questions:
        allowance = max_context_tokens
        if half_budget:
            allowance = half_of_sources(question, documents, model, max_context_tokens)
        for mode in modes:
            plan = plan_one(
                question,
                mode,
                documents,
                model,
                max_context_tokens=allowance,
                compress=compress,
                every_source=not half_budget,
            )
            key = run_key(model_line, plan, model)
            stored = done.get(key)
            reused = stored is not None
            if stored is None:
                outcome = answer_one(question, documents, model, plan)
                record = {"run_key": key, **outcome.as_json()}
                done[key] = record  # a byte-identical request later in this run reuses it
                if store is not None:
                    with store.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            else:
                gold = tuple(gold_spans(question, documents))
                outcome = Outcome.judged_again(stored, question, plan, gold)
            outcomes[mode].append(outcome)
            count = sum(len(runs) for runs in outcomes.values())
            verdict = " (correct)" if outcome.correct else ""
            origin = " (stored)" if reused else ""
            print(
                f"[{count}/{total}] {question.id} {mode}: {outcome.status}{verdict} "
                f"{outcome.latency_s:.1f} s{origin}",
                file=sys.stderr,
                flush=True,
            )
    return outcomes


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def count_status(status: str) -> Callable[[list[Outcome]], str]:
    return lambda outcomes: str(sum(o.status == status for o in outcomes))


def answered_accuracy(outcomes: list[Outcome]) -> str:
    answerable = [o for o in outcomes if o.answerable]
    return share(sum(o.correct for o in answerable), len(answerable))


def precision(outcomes: list[Outcome]) -> str:
    """Correct answers over every ``answered`` result (an answered unanswerable one is wrong)."""
    answered = [o for o in outcomes if o.status == "answered"]
    return share(sum(o.correct for o in answered), len(answered))


def abstained(outcomes: list[Outcome]) -> str:
    unanswerable = [o for o in outcomes if not o.answerable]
    ended = sum(o.status in ("insufficient_evidence", "invalid_response") for o in unanswerable)
    return share(ended, len(unanswerable))


def abstained_exactly(outcomes: list[Outcome]) -> str:
    unanswerable = [o for o in outcomes if not o.answerable]
    return share(sum(o.status == "insufficient_evidence" for o in unanswerable), len(unanswerable))


def citation_validity(outcomes: list[Outcome]) -> str:
    produced = sum(o.produced for o in outcomes)
    return share(sum(o.verified for o in outcomes), produced)


def citation_support(outcomes: list[Outcome]) -> str:
    answerable = [o for o in outcomes if o.answerable]
    verified = sum(o.verified for o in answerable)
    return share(sum(o.supporting for o in answerable), verified)


def answers_marked(outcomes: list[Outcome]) -> str:
    answered = [o for o in outcomes if o.status == "answered"]
    return share(sum(o.marked for o in answered), len(answered))


def segments_supported(outcomes: list[Outcome]) -> str:
    answered = [o for o in outcomes if o.status == "answered"]
    return share(sum(o.supported_segments for o in answered), sum(o.segments for o in answered))


def replies_with_invalid_markers(outcomes: list[Outcome]) -> str:
    return str(sum(o.invalid_markers > 0 for o in outcomes))


def median_output_tokens(outcomes: list[Outcome]) -> str:
    return median([o.output_tokens for o in outcomes if o.output_tokens is not None])


def median_input_tokens(outcomes: list[Outcome]) -> str:
    return median([o.input_tokens for o in outcomes if o.input_tokens is not None])


def median_cached_tokens(outcomes: list[Outcome]) -> str:
    return median([o.cached_input_tokens for o in outcomes if o.cached_input_tokens is not None])


def median_latency(outcomes: list[Outcome]) -> str:
    return median([o.latency_s for o in outcomes])


METRICS: tuple[tuple[str, Callable[[list[Outcome]], str]], ...] = (
    ("questions", lambda outcomes: str(len(outcomes))),
    ("answered", count_status("answered")),
    ("insufficient_evidence", count_status("insufficient_evidence")),
    ("invalid_response", count_status("invalid_response")),
    ("model errors (timeout, failed call)", count_status(MODEL_ERROR)),
    ("answered accuracy = coverage (correct / answerable questions)", answered_accuracy),
    ("precision of answered (correct / answered)", precision),
    ("abstention: not answered (unanswerable questions)", abstained),
    ("abstention: insufficient_evidence (unanswerable questions)", abstained_exactly),
    ("citation validity (verified / produced)", citation_validity),
    ("citation support (verified citations overlapping gold)", citation_support),
    ("answers with fact markers (answered)", answers_marked),
    ("answer segments resting on facts (answered)", segments_supported),
    ("replies with a marker naming no fact of their ledger", replies_with_invalid_markers),
    ("median prompt tokens", median_input_tokens),
    ("median prompt tokens reused from the server's cache", median_cached_tokens),
    ("median output tokens", median_output_tokens),
    ("median latency per question (s)", median_latency),
)


def markdown_table(first: str, modes: Sequence[str], rows: list[list[str]]) -> list[str]:
    lines = [
        "| " + " | ".join([first, *modes]) + " |",
        "|---|" + "---:|" * len(modes),
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def metrics_table(outcomes: dict[CitationMode, list[Outcome]]) -> list[str]:
    rows = [[name, *(metric(outcomes[mode]) for mode in outcomes)] for name, metric in METRICS]
    return markdown_table("metric", list(outcomes), rows)


def reason_code_table(outcomes: dict[CitationMode, list[Outcome]]) -> list[str]:
    counts = {
        mode: Counter(code for o in runs for code in o.reason_codes)
        for mode, runs in outcomes.items()
    }
    codes = sorted(set().union(*counts.values()))
    rows = [[f"`{code}`", *(str(counts[mode][code]) for mode in outcomes)] for code in codes]
    if not rows:
        rows = [["(none)", *("0" for _ in outcomes)]]
    return markdown_table("invalid_response reason code", list(outcomes), rows)


def kind_table(
    outcomes: dict[CitationMode, list[Outcome]], kinds: Sequence[str] = KINDS
) -> list[str]:
    rows = []
    for kind in kinds:
        cells = []
        for runs in outcomes.values():
            of_kind = [o for o in runs if o.kind == kind]
            answerable = any(o.answerable for o in of_kind)
            cells.append(answered_accuracy(of_kind) if answerable else abstained(of_kind))
        rows.append([kind, *cells])
    return markdown_table(
        "answered accuracy by kind (unanswerable: abstained)", list(outcomes), rows
    )


FLOORS = (None, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
# The flags whose option makes an answer abstain by default.
ABSTAINING_FLAGS = frozenset(
    name
    for name in get_args(AnswerFlag)
    if AnswerOptionFields.model_fields[name].default == "abstain"
)
# The flags whose check is off by default: the run asks every check to flag, so an answer may
# carry one the engine's defaults would never set.
UNCHECKED_FLAGS = frozenset(
    name for name in get_args(AnswerFlag) if AnswerOptionFields.model_fields[name].default == "off"
)


@dataclass(frozen=True)
class Floors:
    """A model's own confidence floors by mode, and its flagged answers' (its profile's)."""

    floors: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    flagged: Mapping[str, float | None] = dataclasses.field(default_factory=dict)

    def decide(self, outcome: Outcome, mode: str) -> Outcome:
        """``outcome`` as the engine decides it for this model, under the default policies."""
        flags = tuple(flag for flag in outcome.answer_flags if flag not in UNCHECKED_FLAGS)
        outcome = dataclasses.replace(outcome, answer_flags=flags)
        return outcome.decided(self.floors.get(mode), ABSTAINING_FLAGS, self.flagged.get(mode))

    def describe(self, mode: str) -> str:
        floor, flagged = self.floors.get(mode), self.flagged.get(mode)
        shown = "none" if floor is None else f"{floor:g}"
        return f"{mode} {shown}" + ("" if flagged is None else f" (flagged answers {flagged:g})")


def floors_of(model: ReaderModel) -> Floors:
    """The model's own confidence floors by mode (an embedded reader's), else none."""
    profile = profile_for(model)
    return Floors(dict(profile.confidence_floors), dict(profile.flagged_floors))


def decided(
    outcomes: dict[CitationMode, list[Outcome]], floors: Floors
) -> dict[CitationMode, list[Outcome]]:
    """The outcomes as the engine's defaults decide them: each mode's floors, each flag's policy."""
    return {mode: [floors.decide(o, mode) for o in runs] for mode, runs in outcomes.items()}


# How the embedded readers' floors (KNOWN_MODELS) are chosen, on the tune half only: a floor
# must make at least this share of the unanswerable questions abstain.
CALIBRATION_ABSTAINED = 10 / 12


def calibrated_floor(runs: list[Outcome]) -> float | None:
    """The floor, in hundredths, that the calibration rule picks for one mode's outcomes.

    Of the floors at which at least :data:`CALIBRATION_ABSTAINED` of the unanswerable
    questions abstain, those that keep the most correct answers; of these, the one with the
    best precision, and then the lowest. None when no floor abstains enough.
    """
    unanswerable = sum(not o.answerable for o in runs)
    chosen, best = None, (-1, 0.0)
    for floor in (step / 100 for step in range(1, 100)):  # rising, so a tie keeps the lowest
        at = [o.decided(floor, ABSTAINING_FLAGS) for o in runs]
        held = sum(not o.answerable and o.status != "answered" for o in at)
        if held < CALIBRATION_ABSTAINED * unanswerable:
            continue
        answered = sum(o.status == "answered" for o in at)
        correct = sum(o.correct for o in at)
        key = (correct, correct / answered if answered else 1.0)
        if key > best:
            chosen, best = floor, key
    return chosen


def risk_coverage_table(outcomes: dict[CitationMode, list[Outcome]]) -> list[str]:
    """Precision and coverage at each floor, from the same stored run (flags at their defaults)."""
    rows = []
    for floor in FLOORS:
        cells = []
        for runs in outcomes.values():
            at = [o.decided(floor, ABSTAINING_FLAGS) for o in runs]
            cells.append(f"{precision(at)}; {answered_accuracy(at)}; {abstained(at)}")
        rows.append(["none" if floor is None else f"{floor:.1f}", *cells])
    return markdown_table(
        "floor: precision of answered; correct / answerable; unanswerable abstained",
        list(outcomes),
        rows,
    )


def render(
    outcomes: dict[CitationMode, list[Outcome]],
    model_line: str,
    documents: int,
    split: str,
    floors: Floors | None = None,
    set_name: str = PROJECT_SET,
    allowance: str | None = None,
) -> str:
    """The run's tables under its header; ``allowance`` says how the allowance was set."""
    floors = floors or Floors()
    questions = next(iter(outcomes.values()))
    kinds = KINDS if set_name == PROJECT_SET else tuple(dict.fromkeys(o.kind for o in questions))
    named = "Eval set" if set_name == PROJECT_SET else f"Public set {set_name}"
    answerable = sum(o.answerable for o in questions)
    applied = ", ".join(floors.describe(mode) for mode in outcomes)
    abstaining = ", ".join(sorted(ABSTAINING_FLAGS)) or "none"
    lines = [
        machine_line(),
        model_line,
        f"{named}: {len(questions)} questions of the {split} split ({answerable} answerable, "
        f"{len(questions) - answerable} unanswerable) over {documents} documents; "
        f"max_output_tokens {MAX_OUTPUT_TOKENS}, timeout {TIMEOUT_SECONDS:g} s, temperature 0.",
        f"Reader's confidence floor (the model's own): {applied}; flags that abstain: "
        f"{abstaining}.",
        *([] if allowance is None else [allowance]),
        "",
        *metrics_table(decided(outcomes, floors)),
        "",
        *reason_code_table(outcomes),
        "",
        *kind_table(decided(outcomes, floors), kinds),
        "",
        *risk_coverage_table(outcomes),
        "",
        "Floor by the calibration rule on this split: "
        + ", ".join(f"{mode} {calibrated_floor(runs)}" for mode, runs in outcomes.items())
        + ".",
    ]
    return "\n".join(lines)


@contextmanager
def open_model(args: argparse.Namespace) -> Iterator[tuple[ReaderModel, str, str]]:
    """The reader, its model line and its identity in run keys (no port: it changes).

    Any OpenAI-compatible endpoint, else an embedded local model (the default reader).
    """
    if args.base_url:
        api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
        model = ChatCompletionsModel(args.base_url, model=args.model, api_key=api_key)
        if args.stance:
            model.profile = model.profile.replace(writes_stance=True)
        identity = f"{args.model} at {args.base_url}"
        yield model, f"Model: {identity} (OpenAI-compatible chat completions)", identity
        return
    with LocalModel(args.local, threads=args.threads) as local:
        if args.stance:
            local.profile = local.profile.replace(writes_stance=True)
        identity = f"{local.title}, seed {local.seed}"
        yield (
            local,
            f"Model: the embedded local model, {identity}, on llama.cpp at {local.base_url} "
            f"with {local.threads} threads",
            identity,
        )


def parse_modes(value: str) -> list[CitationMode]:
    modes = [mode.strip() for mode in value.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if not modes or unknown or len(set(modes)) != len(modes):
        msg = f"give distinct modes from {', '.join(MODES)}, comma-separated"
        raise argparse.ArgumentTypeError(msg)
    return [cast(CitationMode, mode) for mode in modes]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--modes",
        type=parse_modes,
        default=list(MODES),
        help="citation modes to compare, comma-separated (default: quote,passage)",
    )
    parser.add_argument(
        "--set",
        dest="set_name",
        choices=[PROJECT_SET, *READER_SETS],
        default=PROJECT_SET,
        help="the questions: the project's eval set (the default) or a public set "
        "(data/public/, in a stable order: --limit 100 takes the same 100 every time)",
    )
    parser.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        default="report",
        help="which half of the set: tune (for developing prompts), report (the default: "
        "what the docs report), or all",
    )
    parser.add_argument(
        "--kinds",
        default=None,
        help="only questions of these kinds, comma-separated (such as clapnq-unanswerable)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"the first {QUICK_QUESTIONS} questions only"
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="append each result to this JSON Lines file as it finishes, and reuse the "
        "results already there for the same model and a byte-identical request",
    )
    parser.add_argument(
        "--half-budget",
        action="store_true",
        help="set each question's max_context_tokens to half of what its sources are "
        "charged whole, so that some are left out (or, with --compress, compressed)",
    )
    parser.add_argument(
        "--compress",
        action="store_true",
        help="ask with compress=True: a source over the allowance is sent as its most "
        "relevant passages (its results are stored under run keys of their own)",
    )
    add_model_arguments(parser)
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    check_model_arguments(parser, args)
    return args


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that choose the reader: an embedded model, or any OpenAI-compatible one."""
    parser.add_argument(
        "--local",
        default=DEFAULT_READER,
        help=f"the embedded model: {', '.join(KNOWN_MODELS)} or a GGUF path "
        f"(default {DEFAULT_READER})",
    )
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    parser.add_argument(
        "--stance",
        action="store_true",
        help="ask the model for a stance per citation, where its profile does not",
    )
    parser.add_argument(
        "--base-url", help="an OpenAI-compatible API root; default: the embedded local model"
    )
    parser.add_argument("--model", default="default", help="model name sent with --base-url")
    parser.add_argument(
        "--api-key-env",
        default=None,
        help="environment variable that holds the API key for --base-url",
    )


def check_model_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse an API-key variable that is not set, before any model starts."""
    if args.api_key_env and args.api_key_env not in os.environ:
        parser.error(f"the environment variable {args.api_key_env} is not set")


def allowance_line(args: argparse.Namespace) -> str | None:
    """The header line saying how a run's allowance was set, unless it is the set's own."""
    compressed = "on" if args.compress else "off"
    if args.half_budget:
        return (
            "max_context_tokens: half of what each question's sources are charged whole; "
            f"compress {compressed}."
        )
    return "compress on." if args.compress else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    documents, every = load_set(args.set_name)
    # A held-out public set is always whole.
    questions = [q for q in every if args.split in ("all", q.split) or q.split == HELDOUT]
    if args.kinds:
        kinds = {kind.strip() for kind in args.kinds.split(",")}
        questions = [q for q in questions if q.kind in kinds]
    limit = args.limit if args.limit is not None else QUICK_QUESTIONS if args.quick else None
    questions = questions[:limit]
    with open_model(args) as (model, model_line, identity):
        outcomes = run(
            questions,
            args.modes,
            documents,
            model,
            model_line=identity,
            store=args.json,
            max_context_tokens=context_tokens(args.set_name),
            half_budget=args.half_budget,
            compress=args.compress,
        )
        floors = floors_of(model)
    split = HELDOUT if questions and questions[0].split == HELDOUT else args.split
    # A public set's documents are many; count those its asked questions were sent.
    sent = len({source for q in questions for source in q.sources})
    count = len(documents) if args.set_name == PROJECT_SET else sent
    print(render(outcomes, model_line, count, split, floors, args.set_name, allowance_line(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
