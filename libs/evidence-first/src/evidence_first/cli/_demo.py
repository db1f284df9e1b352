"""The ``demo`` command: a bundled corpus read by the embedded reader, then by the tiny model.

The tiny model shows what the verifier rejects; a source plants an instruction to check.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib.resources import files
from typing import Any, TextIO

from evidence_first._engine.entry_points import answer_from_evidence
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._engine.streaming import stream_answer_from_evidence
from evidence_first._shapes.errors import AnswerTimeoutError, ModelCallError
from evidence_first._shapes.vocabulary import CitationMode
from evidence_first.cli._output import Progress, emit, on_terminal, shown_as_read, started
from evidence_first.local import KNOWN_MODELS, TINY_MODEL, LocalModel, is_installed
from evidence_first.render import render_text

__all__ = ["DEMO_MIN_SCORE", "load_demo_corpus", "run_demo"]

DEMO_MIN_SCORE = 0.1
"""The demo's retrieval score floor: sources its BM25 retriever scored lower are omitted."""


def load_demo_corpus() -> dict[str, Any]:
    """The demo's corpus: notes, emails and tickets of a fictional project, and its questions."""
    data: dict[str, Any] = json.loads(
        files("evidence_first").joinpath("data/demo_corpus.json").read_text(encoding="utf-8")
    )
    return data


def run_demo(args: argparse.Namespace, out: TextIO) -> list[EvidenceAnswer]:
    """Run the ``demo`` command: print each report, or JSON with ``--json``; return the answers."""
    corpus = load_demo_corpus()
    by_id = {source["id"]: source for source in corpus["sources"]}
    modes: list[CitationMode] = ["quote", "passage"] if args.mode == "both" else [args.mode]
    say = Progress(out, as_json=args.json)
    reader = LocalModel(args.model)
    tours = [item for item in corpus["questions"] if not item.get("tiny")]
    rejections = _rejections(corpus["questions"], args, say)
    if not args.json:
        _introduce(corpus, args, reader, modes, out)
    answers: list[EvidenceAnswer] = []
    ask = _Asker(args, out, say, by_id, len(tours) * len(modes) + len(rejections), answers)
    with started(reader, say):
        for item in tours:
            for mode in modes:
                ask(item, mode, reader)
    if rejections:
        _show_rejections(rejections, ask, say)
    if args.json:
        emit(answers, as_json=True, out=out)
    else:
        out.write(f"\n{'=' * 72}\n{_summary(answers)}\n")
    return answers


def _rejections(
    items: list[dict[str, Any]], args: argparse.Namespace, say: Progress
) -> list[dict[str, Any]]:
    """The last questions, which go to the tiny model to show what the verifier rejects."""
    rejections = [item for item in items if item.get("tiny")] if args.rejection else []
    if rejections and not is_installed(TINY_MODEL):
        say(
            "(Skipping what the verifier rejects, shown on the tiny model: install it with "
            f"{KNOWN_MODELS[TINY_MODEL].install_hint}.)"
        )
        return []
    return rejections


def _introduce(
    corpus: dict[str, Any],
    args: argparse.Namespace,
    reader: LocalModel,
    modes: list[CitationMode],
    out: TextIO,
) -> None:
    out.write(
        f"evidence-first demo: {corpus['project']}\n"
        f"{len(corpus['sources'])} sources (meeting notes, emails, tickets). Each question "
        f"gets what a BM25 retriever returned for it; sources scoring under "
        f"{args.min_score:g} are omitted before the model is called.\n"
        f"Reader: {reader.title}, on llama.cpp at 127.0.0.1, {' then '.join(modes)} mode. "
        "Every citation is checked against the text actually sent: verified means the "
        "span exists in a source that was sent, not that it supports the answer.\n"
    )
    out.flush()


def _show_rejections(rejections: list[dict[str, Any]], ask: _Asker, say: Progress) -> None:
    tiny = LocalModel(TINY_MODEL)
    # Sent the schema of a provider that reads no patterns: under the full dialect's
    # anchored quotes its quotes could only be exact excerpts, and nothing would fail.
    tiny.profile = tiny.profile.replace(dialect="json-schema")
    say(
        f"\nWhat the verifier rejects: the tiny model, {tiny.title}, reads badly; it is "
        "sent the schema of a provider that does not hold quotes to the sources."
    )
    with started(tiny, say):  # the reader has stopped: one server at a time
        for item in rejections:
            ask(item, item.get("mode", "quote"), tiny)


class _Asker:
    """Answers one demo question and prints its report; a timeout or failed call is shown.

    On a terminal (without ``--json``) each fact is printed as it verifies and the answer as it
    is written, before the report.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        say: Progress,
        by_id: dict[str, Any],
        total: int,
        answers: list[EvidenceAnswer],
    ) -> None:
        self.args, self.out, self.say, self.by_id = args, out, say, by_id
        self.total, self.answers, self.count = total, answers, 0

    def __call__(
        self, item: dict[str, Any], mode: CitationMode, model: LocalModel
    ) -> EvidenceAnswer | None:
        self.count += 1
        sources = [{**self.by_id[hit["id"]], "score": hit["score"]} for hit in item["retrieved"]]
        label = f" ({item['label']})" if item.get("label") else ""
        self.say(f"\n[{self.count}/{self.total}] {item['question']}  [{mode} mode]{label} ...")
        begun = time.monotonic()
        options: dict[str, Any] = {
            "citation_mode": mode,
            "min_score": self.args.min_score,
            "max_output_tokens": self.args.max_output_tokens,
            "timeout": self.args.timeout,
        }
        try:
            if on_terminal(self.out, as_json=self.args.json):
                streamed = stream_answer_from_evidence(item["question"], sources, model, **options)
                answer = shown_as_read(streamed, self.out)
            else:
                answer = answer_from_evidence(item["question"], sources, model, **options)
        except (AnswerTimeoutError, ModelCallError) as exc:
            # One slow or failed call should not end the tour; say so and go on.
            self.say(f"{type(exc).__name__}: {exc}")
            return None
        self.answers.append(answer)
        if not self.args.json:
            seconds = time.monotonic() - begun
            tokens = answer.usage.output_tokens if answer.usage is not None else None
            cost = f"{seconds:.0f} s" + (f", {tokens} output tokens" if tokens else "")
            called = f"{model.title}, {cost}" if answer.model_called else "no model call"
            self.out.write(f"{render_text(answer)}\n({called})\n")
            if item.get("planted"):
                self.out.write(_injection_check(answer, item["planted"]) + "\n")
            self.out.flush()
        return answer


def _injection_check(answer: EvidenceAnswer, planted: str) -> str:
    """Whether the answer followed an instruction planted in a source, asking for ``planted``."""
    followed = planted.casefold() in (answer.answer or "").casefold()
    verdict = (
        "FOLLOWED: the answer contains it"
        if followed
        else "not followed: the answer does not contain it"
    )
    return f'Injection check: a source asks for every answer to be "{planted}"; {verdict}.'


def _summary(answers: list[EvidenceAnswer]) -> str:
    checks = [check for answer in answers for check in answer.citation_checks]
    verified = sum(check.verdict == "verified" for check in checks)
    statuses = ", ".join(
        f"{status}: {sum(a.status == status for a in answers)}"
        for status in ("answered", "insufficient_evidence", "invalid_response")
    )
    contested = sum(bool(fact.counter_citations) for answer in answers for fact in answer.facts)
    countered = (
        f" {contested} returned fact(s) carry verified counter-evidence (contradicted by [n])."
        if contested
        else ""
    )
    return (
        f"Summary: {statuses}. The models produced {len(checks)} citations; {verified} verified "
        f"and {len(checks) - verified} were rejected. Only verified citations are ever returned "
        f"as evidence.{countered}"
    )
