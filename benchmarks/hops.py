"""Follow-up retrieval against single-shot answering, on questions that need two sources.

Every question needs two documents: the quality set's two-source questions and those in
``data/hops`` (20 in all). The retriever is cookbook recipe 9's BM25 (``bm25s``) over every
document of both sets, returning only the top one, so a single pass sees one of the two and a
second hop is needed. Each question is answered twice with the same reader: single-shot
(``FollowUpAnswerer(max_hops=0)``) and with up to two follow-up hops
(``max_hops=2, max_followups=3``). An answer counts as correct as in ``quality.py``: answered,
a gold answer string in it, and a verified citation overlapping a gold quote.

Run from the workspace root (the embedded reader by default; one model server at a time)::

    uv run python benchmarks/hops.py [--quick] [--base-url URL --model NAME] [--json FILE]

It prints the machine line, then a Markdown table per configuration.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import load_recipe, machine_line
from langchain_core.documents import Document
from quality import (
    MAX_OUTPUT_TOKENS,
    TIMEOUT_SECONDS,
    Outcome,
    Question,
    gold_spans,
    load_documents,
    load_questions,
)

from evidence_first import Evidence
from langchain_evidence_first import EvidenceAnswerer
from langchain_evidence_first.hops import FollowUpAnswerer

DATA = Path(__file__).parent / "data" / "hops"
CONFIGS = {"single-shot (max_hops=0)": 0, "follow-up (max_hops=2)": 2}
MODE = "passage"  # the mode the embedded reader reads best (quality.py)


def corpus(documents: dict[str, Evidence]) -> list[Document]:
    """Each document as LangChain sees it: its ID, text, and the fields the answerer reads."""
    out = []
    for evidence in documents.values():
        fields = evidence.model_dump(mode="json", include={"speaker", "observed_at", "status"})
        metadata = {key: value for key, value in fields.items() if value is not None}
        out.append(Document(id=evidence.id, page_content=evidence.text, metadata=metadata))
    return out


@dataclass(frozen=True)
class Run:
    question: str
    config: str
    status: str
    correct: bool
    model_calls: int
    hops: int
    latency_s: float


def run(
    questions: Sequence[Question], documents: dict[str, Evidence], answerer: EvidenceAnswerer
) -> list[Run]:
    # Recipe 9's BM25 retriever, returning only the best match.
    retriever = load_recipe("09_follow_up_retrieval").BM25Retriever(
        documents=corpus(documents), k=1
    )
    runs = []
    for question in questions:
        for config, max_hops in CONFIGS.items():
            started = time.perf_counter()
            result = FollowUpAnswerer(retriever, answerer, max_hops=max_hops).invoke(
                question.question
            )
            runs.append(
                Run(
                    question=question.id,
                    config=config,
                    status=result.answer.status,
                    correct=Outcome.of(
                        question, MODE, result.answer, gold_spans(question, documents), 0.0
                    ).correct,
                    model_calls=result.model_calls,
                    hops=len(result.hops),
                    latency_s=round(time.perf_counter() - started, 2),
                )
            )
            print(f"  {question.id} {config}: {runs[-1].status}", file=sys.stderr, flush=True)
    return runs


def table(runs: Sequence[Run]) -> list[str]:
    lines = [
        "| configuration | questions | correct | answered | insufficient | invalid | "
        "model calls per question | median latency (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for config in CONFIGS:
        mine = [r for r in runs if r.config == config]
        count = len(mine)
        lines.append(
            f"| {config} | {count} | {sum(r.correct for r in mine)}/{count} | "
            f"{sum(r.status == 'answered' for r in mine)} | "
            f"{sum(r.status == 'insufficient_evidence' for r in mine)} | "
            f"{sum(r.status == 'invalid_response' for r in mine)} | "
            f"{statistics.mean(r.model_calls for r in mine):.2f} | "
            f"{statistics.median(r.latency_s for r in mine):.1f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three questions only")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead of the reader")
    parser.add_argument("--model", default="default", help="model name sent with --base-url")
    parser.add_argument("--json", type=Path, help="write every run as JSON lines here")
    args = parser.parse_args(argv)

    documents = {**load_documents(), **load_documents(DATA / "documents.json")}
    questions = [q for q in load_questions() if q.kind == "two-source"]
    questions += load_questions(DATA / "questions.json")
    if args.quick:
        questions = questions[:3]
    options: dict[str, Any] = {
        "citation_mode": MODE,
        "max_output_tokens": MAX_OUTPUT_TOKENS,
        "timeout": TIMEOUT_SECONDS,
    }
    if args.base_url:
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(base_url=args.base_url, api_key="unused", model=args.model)
        answerer = EvidenceAnswerer(llm=llm, **options)
        reader = f"{args.model} at {args.base_url}"
    else:
        answerer = EvidenceAnswerer(**options)
        reader = "the embedded reader"
    print(machine_line())
    print(
        f"{len(questions)} two-source questions, BM25 top-1 over {len(documents)} documents, "
        f"{MODE} mode, read by {reader}.\n"
    )
    runs = run(questions, documents, answerer)
    print("\n".join(table(runs)))
    if args.json:
        args.json.write_text("".join(json.dumps(r.__dict__) + "\n" for r in runs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
