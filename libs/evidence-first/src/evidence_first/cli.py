"""The ``evidence-first`` command: ``demo`` on a bundled corpus, ``ask`` over your own sources.

Both print a readable report (status, answer, each fact's quotes in context, the verdict on
every citation, omitted sources and reason codes), or ``as_dict()`` as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

from evidence_first._answer import Citation, CitationCheck, CitationMode, EvidenceAnswer
from evidence_first._engine import answer_from_evidence
from evidence_first._errors import AnswerTimeoutError, EvidenceFirstError, ModelCallError
from evidence_first._evidence import Evidence
from evidence_first._model import ReaderModel
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import LocalModel

__all__ = ["load_demo_corpus", "main", "render_report"]

_CONTEXT_CHARS = 60


def load_demo_corpus() -> dict[str, Any]:
    """The demo's corpus: notes, emails and tickets of a fictional project, and its questions."""
    data: dict[str, Any] = json.loads(
        files("evidence_first").joinpath("data/demo_corpus.json").read_text(encoding="utf-8")
    )
    return data


def _printable(text: str) -> str:
    """Model output and sources are untrusted: never let them drive the terminal."""
    return "".join(
        char
        if char == "\n" or not unicodedata.category(char).startswith("C")
        else f"\\x{ord(char):02x}"
        if ord(char) < 0x100
        else f"\\u{ord(char):04x}"
        for char in text
    )


def _in_context(source: Evidence, start: int, end: int) -> str:
    text = source.text
    before = text[max(0, start - _CONTEXT_CHARS) : start]
    after = text[end : end + _CONTEXT_CHARS]
    lead = "…" if start > _CONTEXT_CHARS else ""
    tail = "…" if end + _CONTEXT_CHARS < len(text) else ""
    return _printable(f"{lead}{before}⟦{text[start:end]}⟧{after}{tail}".replace("\n", " "))


def _spans_in_context(answer: EvidenceAnswer, citation: Citation, indent: str) -> list[str]:
    source = answer.source(citation.source_id)
    labels = f" (passages {', '.join(citation.passages)})" if citation.passages else ""
    lines = [f"{indent}{_printable(citation.source_id)}{_printable(labels)}:"]
    lines.extend(
        f"{indent}  chars {span.char_start}-{span.char_end}: "
        f"{_in_context(source, span.char_start, span.char_end)}"
        for span in citation.evidence_spans
    )
    return lines


def _check_line(answer: EvidenceAnswer, check: CitationCheck) -> list[str]:
    if check.verdict == "verified" and check.citation is not None:
        return ["    ✓ verified", *_spans_in_context(answer, check.citation, "      ")]
    quote = check.quote if len(check.quote) <= 120 else check.quote[:117] + "..."
    return [
        f"    ✗ rejected  {_printable(check.source_id)}: {check.code}",
        f"      the model quoted: {_printable(json.dumps(quote, ensure_ascii=False))}",
    ]


def render_report(answer: EvidenceAnswer) -> str:
    """A plain-text report of one answer, safe to print to a terminal."""
    p = _printable
    mode = "passage" if "/passage/" in answer.prompt_version else "quote"
    lines = [f"Question: {p(answer.question)}  [{mode} mode]"]
    sent = [f"{p(e.id)} ({e.status})" if e.status else p(e.id) for e in answer.evidence]
    lines.append(f"Sources sent: {', '.join(sent) or '-'}")
    if answer.omissions:
        lines.append(
            "Sources omitted: "
            + ", ".join(f"{p(i)} ({reason})" for i, reason in answer.omissions.items())
        )
    lines.append(f"Status: {answer.status}")
    if answer.answer is not None:
        lines.append(f"Answer: {p(answer.answer)}")
    if answer.inference is not None:
        lines.append(f"Inference (not from the sources): {p(answer.inference)}")
    for number, fact in enumerate(answer.facts, start=1):
        lines.append(f"  Fact {number}: {p(fact.subject)} | {p(fact.relation)} | {p(fact.object)}")
        for c in fact.citations:
            lines.append(f"    {p(c.source_id)} chars {c.char_start}-{c.char_end}:")
            lines.append(
                f"      {_in_context(answer.source(c.source_id), c.char_start, c.char_end)}"
            )
    if answer.missing_evidence:
        lines.append("Missing evidence:")
        lines.extend(f"  - {p(item)}" for item in answer.missing_evidence)
    if answer.status == "invalid_response":
        lines.append(f"Reason codes: {', '.join(answer.reason_codes)}")
        lines.extend(
            f"  {issue.code} at {issue.path}: {issue.detail}" for issue in answer.validation_errors
        )
    if answer.diagnostic:
        lines.append(f"Diagnostic: {p(answer.diagnostic)}")
    if answer.citation_checks:
        verified = sum(check.verdict == "verified" for check in answer.citation_checks)
        lines.append(
            f"Citation checks ({verified} of {len(answer.citation_checks)} verified; "
            "diagnostics, not an answer):"
        )
        for check in answer.citation_checks:
            lines.extend(_check_line(answer, check))
    if answer.usage is not None and answer.usage.output_tokens is not None:
        lines.append(f"Model output: {answer.usage.output_tokens} tokens")
    return "\n".join(lines)


def _emit(answers: list[EvidenceAnswer], *, as_json: bool, out: TextIO) -> None:
    if as_json:
        payload: Any = [a.as_dict() for a in answers] if len(answers) != 1 else answers[0].as_dict()
        out.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    corpus = load_demo_corpus()
    by_id = {source["id"]: source for source in corpus["sources"]}
    modes: list[CitationMode] = ["quote", "passage"] if args.mode == "both" else [args.mode]
    answers: list[EvidenceAnswer] = []
    if not args.json:
        out.write(
            f"evidence-first demo: {corpus['project']}\n"
            f"{len(corpus['sources'])} sources (meeting notes, emails, tickets). Each question "
            f"gets what a BM25 retriever returned for it; sources scoring under "
            f"{args.min_score:g} are omitted before the model is called.\n"
            "Reader: Gemma 3 270M on llama.cpp at 127.0.0.1, a small base model that often "
            "cites wrongly. Every citation below is checked against the text actually sent: "
            "verified means the span exists in a source that was sent, not that it supports "
            "the answer.\n"
        )
        out.flush()
    with LocalModel() as model:
        for item in corpus["questions"]:
            sources = [{**by_id[hit["id"]], "score": hit["score"]} for hit in item["retrieved"]]
            for mode in modes:
                started = time.monotonic()
                try:
                    answer = answer_from_evidence(
                        item["question"],
                        sources,
                        model,
                        citation_mode=mode,
                        min_score=args.min_score,
                        max_output_tokens=args.max_output_tokens,
                        timeout=args.timeout,
                    )
                except (AnswerTimeoutError, ModelCallError) as exc:
                    # One slow or failed call should not end the tour; say so and go on.
                    if not args.json:
                        out.write(f"\n{'─' * 72}\n{item['question']}  [{mode} mode]\n")
                        out.write(f"{type(exc).__name__}: {exc}\n")
                    continue
                answers.append(answer)
                if not args.json:
                    out.write(f"\n{'─' * 72}\n{render_report(answer)}\n")
                    out.write(f"({time.monotonic() - started:.0f} s)\n")
                    out.flush()
                if not answer.model_called:
                    break  # the same sources are omitted in every mode
    if args.json:
        _emit(answers, as_json=True, out=out)
    else:
        out.write(f"\n{'─' * 72}\n{_summary(answers)}\n")
    return 0


def _summary(answers: list[EvidenceAnswer]) -> str:
    checks = [check for answer in answers for check in answer.citation_checks]
    verified = sum(check.verdict == "verified" for check in checks)
    statuses = ", ".join(
        f"{status}: {sum(a.status == status for a in answers)}"
        for status in ("answered", "insufficient_evidence", "invalid_response")
    )
    return (
        f"Summary: {statuses}. The model produced {len(checks)} citations; {verified} verified "
        f"and {len(checks) - verified} were rejected. Only verified citations are ever returned "
        "as evidence."
    )


def _read_sources(args: argparse.Namespace) -> list[Evidence | dict[str, Any]]:
    sources: list[Evidence | dict[str, Any]] = []
    for path in args.files:
        sources.append(Evidence(id=str(path), text=Path(path).read_text(encoding="utf-8")))
    if args.sources_json is not None:
        loaded = json.loads(Path(args.sources_json).read_text(encoding="utf-8"))
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
        with LocalModel() as local:
            answer = answer_from_evidence(args.question, sources, local, **options)
    if args.json:
        _emit([answer], as_json=True, out=out)
    else:
        out.write(render_report(answer) + "\n")
    return 0


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
        default="both",
        help="citation mode; both shows each question in quote mode, then passage mode",
    )
    demo.add_argument("--min-score", type=float, default=0.1, help="the retrieval score floor")
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
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable that holds the API key for --base-url",
    )
    ask.add_argument(
        "--knowledge", choices=["evidence-only", "allow-general-inference"], default="evidence-only"
    )
    ask.add_argument("--max-context-tokens", type=int, default=2048)
    ask.add_argument("--citation-mode", choices=["quote", "passage"], default="quote")
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
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
