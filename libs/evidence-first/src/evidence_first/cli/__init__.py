"""The ``evidence-first`` command: ``demo`` on a bundled corpus, ``ask`` over your own sources.

Both print a readable report (status, answer, each fact's quotes in context, the verdict on
every citation, omitted sources and reason codes), or ``as_dict()`` as JSON with ``--json``. On
a terminal, without ``--json``, each fact is printed as it verifies and the answer as it is
written, before the report.

Exit status: 0 when at least one question ended ``answered``; 1 on a typed error (a bad
request, a missing extra, an unreadable file, a model that failed or timed out in ``ask``);
2 on a usage error; 3 when every question was asked but none ended ``answered``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
import typing
import urllib.parse
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TextIO

from evidence_first._engine.entry_points import answer_from_evidence
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._engine.streaming import stream_answer_from_evidence
from evidence_first._models.dialects import DIALECTS
from evidence_first._models.profiles import profile_for_name
from evidence_first._sending.options import AnswerOptionFields
from evidence_first._shapes.errors import EvidenceFirstError
from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.model import ReaderModel
from evidence_first._shapes.vocabulary import AnswerFlag, CitationMode
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.cli._demo import DEMO_MIN_SCORE, load_demo_corpus, run_demo
from evidence_first.cli._output import Progress, emit, on_terminal, shown_as_read, started
from evidence_first.local import DEFAULT_READER, KNOWN_MODELS, LocalModel
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
RECOMMENDED_MODE: CitationMode = profile_for_name(DEFAULT_READER).citation_mode or "quote"
"""The embedded reader's citation mode (its profile's), which the demo, ``ask`` and the library
use with it: the better one on the reader, measured with ``benchmarks/quality.py``."""
EXIT_INTERRUPTED = 130
"""Ctrl-C: the shell's convention for SIGINT."""


def render_report(answer: EvidenceAnswer) -> str:
    """The plain-text report of one answer: :func:`evidence_first.render.render_text`."""
    return render_text(answer)


def _exit_status(answers: Sequence[EvidenceAnswer]) -> int:
    """0 when some question ended ``answered``, else :data:`EXIT_NOTHING_ANSWERED`."""
    return 0 if any(a.status == "answered" for a in answers) else EXIT_NOTHING_ANSWERED


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


# The options `ask` offers as flags: every option a command line can spell.
# A callable has no spelling on a command line.
_ASK_OPTIONS = tuple(
    name for name in AnswerOptionFields.model_fields if name not in {"token_counter", "embedder"}
)
# The command's own defaults: the embedded reader is slow.
_CLI_DEFAULTS: dict[str, Any] = {"max_output_tokens": 512, "timeout": 300.0}
# Options a model's profile may set (ModelProfile.option_defaults): left unset, its own apply.
_PROFILE_OPTIONS = frozenset(
    {"citation_mode", "min_reader_confidence", *typing.get_args(AnswerFlag)}
)


def _add_option_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """One flag per option, its type, choices and help taken from the options' declaration."""
    for name in names:
        field = AnswerOptionFields.model_fields[name]
        default = _CLI_DEFAULTS.get(name, field.default)
        kinds = [kind for kind in _alternatives(field.annotation) if kind is not type(None)]
        # A flag not given is no option given: left unset (the model's own confidence floor).
        flag: dict[str, Any] = {
            "dest": name,
            "default": _CLI_DEFAULTS.get(name, argparse.SUPPRESS),
        }
        if typing.get_origin(kinds[0]) is typing.Literal:
            flag["choices"] = typing.get_args(kinds[0])
        elif kinds == [bool]:
            # --name and --no-name: a bool never parses a word ("False" would read as true).
            flag["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kinds[0]) is Collection:
            flag.update(action="append", metavar="TAG")
        elif kinds == [float] and type(None) in _alternatives(field.annotation):
            flag.update(type=_number_or_none, metavar="NUMBER|none")
        else:
            # An int or a datetime (question_time) is given as an int: Unix milliseconds.
            flag["type"] = int if int in kinds else kinds[0]
        shown = "none" if default is None else default
        if name == "min_reader_confidence":
            shown = "the model's own floor"
        elif name in _PROFILE_OPTIONS:
            shown = f"the model's own, else {shown}"
        flag["help"] = f"{field.description} (default: {shown})".replace("%", "%%")
        parser.add_argument(f"--{name.replace('_', '-')}", **flag)


def _number_or_none(text: str) -> float | None:
    """A flag's number, or ``none`` for no value (no score floor, no confidence floor)."""
    return None if text.strip().lower() == "none" else float(text)


def _alternatives(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


# OPENAI_API_KEY holds a key to OpenAI's API: sent unasked there alone, and over TLS only.
_OPENAI_ORIGINS = frozenset({"https://api.openai.com", "https://api.openai.com:443"})


def _api_key(args: argparse.Namespace) -> str | None:
    """The key ``ask`` sends to ``--base-url``: only one the caller asked to send there.

    The variable ``--api-key-env`` names goes to any ``--base-url``; without it,
    ``OPENAI_API_KEY`` goes to OpenAI's own API alone, and no key to any other host.

    Raises:
        ValueError: The variable ``--api-key-env`` names is not set.
    """
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            msg = f"the environment variable {args.api_key_env} (--api-key-env) is not set"
            raise ValueError(msg)
        return key
    parts = urllib.parse.urlsplit(args.base_url)
    # The netloc whole: a user part or another port is another origin, and gets no key.
    if f"{parts.scheme}://{parts.netloc.lower()}" in _OPENAI_ORIGINS:
        return os.environ.get("OPENAI_API_KEY") or None
    return None


def _ask(args: argparse.Namespace, out: TextIO) -> int:
    sources = _read_sources(args)
    options = {name: getattr(args, name) for name in _ASK_OPTIONS if hasattr(args, name)}
    if args.base_url:
        remote: ReaderModel = ChatCompletionsModel(
            args.base_url, model=args.model, api_key=_api_key(args), dialect=args.dialect
        )
        answer = _answer(args, out, sources, remote, options)
    else:
        say = Progress(out, as_json=args.json)
        with started(LocalModel(args.local_model), say) as local:
            answer = _answer(args, out, sources, local, options)
    if args.json:
        emit([answer], as_json=True, out=out)
    else:
        out.write(render_text(answer) + "\n")
    return _exit_status([answer])


def _answer(
    args: argparse.Namespace,
    out: TextIO,
    sources: list[Evidence | dict[str, Any]],
    model: ReaderModel,
    options: dict[str, Any],
) -> EvidenceAnswer:
    """The answer to ``ask``'s question; on a terminal, printed as it is read."""
    if on_terminal(out, as_json=args.json):
        streamed = stream_answer_from_evidence(args.question, sources, model, **options)
        return shown_as_read(streamed, out)
    return answer_from_evidence(args.question, sources, model, **options)


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
        "--dialect",
        choices=sorted(DIALECTS),
        help="the JSON Schema subset the --base-url server accepts (default: openai for OpenAI "
        "hosts, else json-schema; full for llama.cpp, vLLM and Ollama)",
    )
    ask.add_argument(
        "--local-model",
        default=DEFAULT_READER,
        help=f"without --base-url, the embedded model: {', '.join(KNOWN_MODELS)} or a GGUF "
        f"path (default {DEFAULT_READER})",
    )
    ask.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="send the environment variable NAME to --base-url as its API key, whatever its "
        "host (default: OPENAI_API_KEY, sent to https://api.openai.com alone; no key is sent "
        "to any other host unless named here)",
    )
    _add_option_flags(ask, _ASK_OPTIONS)
    _add_option_flags(demo, ("max_output_tokens", "timeout"))
    demo.add_argument(
        "--min-score", type=float, default=DEMO_MIN_SCORE, help="the retrieval score floor"
    )
    for command in (demo, ask):
        command.add_argument("--json", action="store_true", help="print as_dict() as JSON")
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    stream = out or sys.stdout
    try:
        if args.command == "demo":
            return _exit_status(run_demo(args, stream))
        return _ask(args, stream)
    except (EvidenceFirstError, ImportError, OSError, ValueError) as exc:
        # Typed, one line, and never a payload: our errors and these carry none.
        sys.stderr.write(f"evidence-first: {type(exc).__name__}: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("evidence-first: interrupted\n")
        return EXIT_INTERRUPTED
