"""The ``evidence-first`` command: ``demo`` on a bundled corpus, ``ask`` over your own sources.

Both print a readable report (status, answer, each fact's quotes in context, the verdict on
every citation, omitted sources and reason codes), or ``as_dict()`` as JSON with ``--json``.

Exit status: 0 when at least one question ended ``answered``; 1 on a typed error (a bad
request, a missing extra, an unreadable file, a model that failed or timed out in ``ask``);
2 on a usage error; 3 when every question was asked but none ended ``answered``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

from evidence_first._answer import CitationMode, EvidenceAnswer
from evidence_first._engine import answer_from_evidence
from evidence_first._errors import AnswerTimeoutError, EvidenceFirstError, ModelCallError
from evidence_first._evidence import Evidence
from evidence_first._model import ReaderModel
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import (
    DEFAULT_READER,
    KNOWN_MODELS,
    TINY_MODEL,
    LocalModel,
    is_installed,
)
from evidence_first.render import render_text

__all__ = [
    "DEMO_MIN_SCORE",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_ANSWERED",
    "RECOMMENDED_MODE",
    "load_demo_corpus",
    "main",
    "render_report",
]

EXIT_ERROR = 1
"""Exit status of a typed error: a bad request, a missing extra, an unreadable file."""
EXIT_NOTHING_ANSWERED = 3
"""Exit status when the questions were asked but none ended ``answered`` (2: a usage error)."""
RECOMMENDED_MODE: CitationMode = "passage"
"""The citation mode the demo and ``ask`` use by default: the better one on the embedded
reader, measured with ``benchmarks/quality.py``."""
EXIT_INTERRUPTED = 130
"""Ctrl-C: the shell's convention for SIGINT."""
DEMO_MIN_SCORE = 0.1
"""The demo's retrieval score floor: sources its BM25 retriever scored lower are omitted."""


def load_demo_corpus() -> dict[str, Any]:
    """The demo's corpus: notes, emails and tickets of a fictional project, and its questions."""
    data: dict[str, Any] = json.loads(
        files("evidence_first").joinpath("data/demo_corpus.json").read_text(encoding="utf-8")
    )
    return data


def render_report(answer: EvidenceAnswer) -> str:
    """The plain-text report of one answer: :func:`evidence_first.render.render_text`."""
    return render_text(answer)


def _emit(answers: list[EvidenceAnswer], *, as_json: bool, out: TextIO) -> None:
    if as_json:
        payload: Any = [a.as_dict() for a in answers] if len(answers) != 1 else answers[0].as_dict()
        out.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


class _Progress:
    """Progress lines: on the report stream, or on stderr when stdout carries JSON."""

    def __init__(self, out: TextIO, *, as_json: bool) -> None:
        self.stream = sys.stderr if as_json else out

    def __call__(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def _started(model: LocalModel, say: _Progress) -> LocalModel:
    say(f"Loading {model.title} on llama.cpp at 127.0.0.1 ...")
    started = time.monotonic()
    model.start()
    say(f"Ready in {time.monotonic() - started:.0f} s.")
    return model


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    corpus = load_demo_corpus()
    by_id = {source["id"]: source for source in corpus["sources"]}
    modes: list[CitationMode] = ["quote", "passage"] if args.mode == "both" else [args.mode]
    say = _Progress(out, as_json=args.json)
    reader = LocalModel(args.model)
    items = corpus["questions"]
    tours = [item for item in items if not item.get("tiny")]
    # The last questions go to the tiny model, to show what the verifier rejects.
    rejections = [item for item in items if item.get("tiny")] if args.rejection else []
    if rejections and not is_installed(TINY_MODEL):
        say(
            "(Skipping what the verifier rejects, shown on the tiny model: install it with "
            f"{KNOWN_MODELS[TINY_MODEL].install_hint}.)"
        )
        rejections = []
    if not args.json:
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
    answers: list[EvidenceAnswer] = []
    ask = _Asker(args, out, say, by_id, len(tours) * len(modes) + len(rejections), answers)
    with _started(reader, say):
        for item in tours:
            for mode in modes:
                ask(item, mode, reader)
    if rejections:
        tiny = LocalModel(TINY_MODEL)
        say(f"\nWhat the verifier rejects: the tiny model, {tiny.title}, reads badly.")
        with _started(tiny, say):  # the reader has stopped: one server at a time
            for item in rejections:
                ask(item, item.get("mode", "quote"), tiny)
    if args.json:
        _emit(answers, as_json=True, out=out)
    else:
        out.write(f"\n{'=' * 72}\n{_summary(answers)}\n")
    return _exit_status(answers)


class _Asker:
    """Answers one demo question and prints its report; a timeout or failed call is shown."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        say: _Progress,
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
        started = time.monotonic()
        try:
            answer = answer_from_evidence(
                item["question"],
                sources,
                model,
                citation_mode=mode,
                min_score=self.args.min_score,
                max_output_tokens=self.args.max_output_tokens,
                timeout=self.args.timeout,
            )
        except (AnswerTimeoutError, ModelCallError) as exc:
            # One slow or failed call should not end the tour; say so and go on.
            self.say(f"{type(exc).__name__}: {exc}")
            return None
        self.answers.append(answer)
        if not self.args.json:
            seconds = time.monotonic() - started
            tokens = answer.usage.output_tokens if answer.usage is not None else None
            cost = f"{seconds:.0f} s" + (f", {tokens} output tokens" if tokens else "")
            called = f"{model.title}, {cost}" if answer.model_called else "no model call"
            self.out.write(f"{render_report(answer)}\n({called})\n")
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


def _exit_status(answers: Sequence[EvidenceAnswer]) -> int:
    """0 when some question ended ``answered``, else :data:`EXIT_NOTHING_ANSWERED`."""
    return 0 if any(a.status == "answered" for a in answers) else EXIT_NOTHING_ANSWERED


def _summary(answers: list[EvidenceAnswer]) -> str:
    checks = [check for answer in answers for check in answer.citation_checks]
    verified = sum(check.verdict == "verified" for check in checks)
    statuses = ", ".join(
        f"{status}: {sum(a.status == status for a in answers)}"
        for status in ("answered", "insufficient_evidence", "invalid_response")
    )
    return (
        f"Summary: {statuses}. The models produced {len(checks)} citations; {verified} verified "
        f"and {len(checks) - verified} were rejected. Only verified citations are ever returned "
        "as evidence."
    )


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        msg = f"{path} is not UTF-8 text"
        raise ValueError(msg) from None


def _read_sources(args: argparse.Namespace) -> list[Evidence | dict[str, Any]]:
    sources: list[Evidence | dict[str, Any]] = []
    for path in args.files:
        sources.append(Evidence(id=str(path), text=_read_text(path)))
    if args.sources_json is not None:
        try:
            loaded = json.loads(_read_text(args.sources_json))
        except json.JSONDecodeError as exc:
            # The position, never the document: it may be private text.
            msg = f"{args.sources_json} is not valid JSON (line {exc.lineno}, column {exc.colno})"
            raise ValueError(msg) from None
        if not isinstance(loaded, list):
            msg = f"{args.sources_json} must hold a JSON list of sources"
            raise ValueError(msg)
        sources.extend(loaded)
    return sources


def _ask(args: argparse.Namespace, out: TextIO) -> int:
    sources = _read_sources(args)
    options: dict[str, Any] = {
        "knowledge": args.knowledge,
        "citation_mode": args.citation_mode,
        "max_context_tokens": args.max_context_tokens,
        "max_output_tokens": args.max_output_tokens,
        "timeout": args.timeout,
    }
    if args.base_url:
        api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
        remote: ReaderModel = ChatCompletionsModel(args.base_url, model=args.model, api_key=api_key)
        answer = answer_from_evidence(args.question, sources, remote, **options)
    else:
        say = _Progress(out, as_json=args.json)
        with _started(LocalModel(args.local_model), say) as local:
            answer = answer_from_evidence(args.question, sources, local, **options)
    if args.json:
        _emit([answer], as_json=True, out=out)
    else:
        out.write(render_report(answer) + "\n")
    return _exit_status([answer])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evidence-first",
        description="Answer questions only from the evidence you supply, with verified citations.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="answer a few questions over a bundled corpus")
    demo.add_argument(
        "--mode",
        choices=["quote", "passage", "both"],
        default=RECOMMENDED_MODE,
        help=f"citation mode (default {RECOMMENDED_MODE}, the one that reads best on the "
        "embedded reader); both shows each question in quote mode, then passage mode",
    )
    demo.add_argument(
        "--min-score", type=float, default=DEMO_MIN_SCORE, help="the retrieval score floor"
    )
    demo.add_argument(
        "--model",
        default=DEFAULT_READER,
        help=f"the reader: {', '.join(KNOWN_MODELS)} or a GGUF path (default {DEFAULT_READER})",
    )
    demo.add_argument(
        "--no-rejection",
        dest="rejection",
        action="store_false",
        help="skip the last question, which the tiny model answers to show a rejection",
    )
    ask = commands.add_parser("ask", help="answer a question over files or a JSON list of sources")
    ask.add_argument("question")
    ask.add_argument("files", nargs="*", type=Path, help="text files; each is one source")
    ask.add_argument(
        "--sources-json", type=Path, help="a JSON list of sources ({id, text, ...} objects)"
    )
    ask.add_argument(
        "--base-url", help="an OpenAI-compatible API root; default: the embedded local model"
    )
    ask.add_argument("--model", default="default", help="model name sent with --base-url")
    ask.add_argument(
        "--local-model",
        default=DEFAULT_READER,
        help=f"without --base-url, the embedded model: {', '.join(KNOWN_MODELS)} or a GGUF "
        f"path (default {DEFAULT_READER})",
    )
    ask.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable that holds the API key for --base-url",
    )
    ask.add_argument(
        "--knowledge", choices=["evidence-only", "allow-general-inference"], default="evidence-only"
    )
    ask.add_argument("--max-context-tokens", type=int, default=2048)
    ask.add_argument("--citation-mode", choices=["quote", "passage"], default=RECOMMENDED_MODE)
    for command in (demo, ask):
        command.add_argument("--json", action="store_true", help="print as_dict() as JSON")
        command.add_argument("--max-output-tokens", type=int, default=512)
        command.add_argument("--timeout", type=float, default=300.0)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    stream = out or sys.stdout
    try:
        if args.command == "demo":
            return _demo(args, stream)
        return _ask(args, stream)
    except (EvidenceFirstError, ImportError, OSError, ValueError) as exc:
        # Typed, one line, and never a payload: our errors and these carry none.
        sys.stderr.write(f"evidence-first: {type(exc).__name__}: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("evidence-first: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
