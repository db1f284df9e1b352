"""Recipe 8: bulk answering on Ray Data, one model client per worker, every row kept.

For: evaluations and back-fills that answer thousands to millions of questions, on one machine
or on a Ray cluster.

Shows:

- ``answer_dataset(dataset, make_model, concurrency=..., **options)``: ``map_batches`` with a
  callable class, so each worker (a Ray actor) builds one model client in its ``__init__``,
  from a factory you pass, and answers its batches on a small thread pool that overlaps the
  waits for the model;
- one output row per input row: its ``id``, ``status``, ``answer``, ``reason_codes`` and the
  whole ``as_dict()`` as a JSON string in ``result``; or, for an evidence-first error
  (``ModelCallError``, ``AnswerTimeoutError``, ``InvalidRequestError``...), an ``error`` with
  the class name and message (which never carry evidence text): a failing row is recorded, the
  job goes on;
- the results written as JSON lines, every status kept, and counted from the files.

The engine is stateless, so a cluster needs nothing else: the same code runs on one after
``ray.init(address="ray://head:10001")``, or ``--address auto`` on one of its nodes, writing to
storage every node reaches (``--output s3://bucket/answers``); only the address changes. The
model endpoint must be reachable from every node, so the embedded local model (loopback only)
is for single-node runs; on a cluster, pass ``--base-url``. Started under ``uv run``, Ray runs
each worker through ``uv run`` with a copy of the working directory, which a cluster needs; on
one machine ``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0`` skips that (about 10 s less per worker start
on the 2-core machine this was written on).

Run: ``uv run python cookbook/08_bulk_answering_on_ray.py [--base-url URL] [--rows N]``
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import ray
import ray.data

from evidence_first import EvidenceFirstError, ReaderModel, answer_from_evidence
from evidence_first.adapters import AnswerOptions
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local import INSTALL_HINT, LocalModel, is_installed

ERROR_TYPE = pa.struct([("type", pa.string()), ("message", pa.string())])


class AnswerBatches:
    """The ``map_batches`` UDF: one model client per worker, rows answered on a thread pool.

    Args:
        make_model: Builds the worker's model client, called once in the worker. The client is
            shared by ``threads`` threads, so it must be safe to call from several at once
            (``ChatCompletionsModel`` is).
        id_column: The column that identifies a row; copied to the output as it is.
        threads: Rows answered at once by this worker.
        options: Answering options for ``answer_from_evidence``.
    """

    def __init__(
        self,
        make_model: Callable[[], ReaderModel],
        id_column: str,
        threads: int,
        options: Mapping[str, Any],
    ) -> None:
        self.model = make_model()
        self.id_column = id_column
        self.options = dict(options)
        # Answering is mostly waiting for the model: threads overlap the waits.
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="answer")

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Answer every row of ``batch``; return one result row per input row, in order."""
        if self.id_column not in batch.column_names:
            msg = f"every row needs an {self.id_column!r} column to identify its result"
            raise ValueError(msg)
        results = list(self.pool.map(self.answer_row, batch.to_pylist()))
        return pa.table(
            {
                self.id_column: batch.column(self.id_column),
                "status": pa.array([r["status"] for r in results], pa.string()),
                "answer": pa.array([r["answer"] for r in results], pa.string()),
                "reason_codes": pa.array(
                    [r["reason_codes"] for r in results], pa.list_(pa.string())
                ),
                "result": pa.array([r["result"] for r in results], pa.string()),
                "error": pa.array([r["error"] for r in results], ERROR_TYPE),
            }
        )

    def answer_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one row; an evidence-first error becomes the row's ``error``."""
        try:
            answer = answer_from_evidence(
                row.get("question"), _sources_of(row.get("sources")), self.model, **self.options
            )
        except EvidenceFirstError as exc:
            # The class and message only: evidence-first messages never carry evidence text,
            # and a provider's own message (which might) stays chained in the worker.
            error = {"type": type(exc).__name__, "message": str(exc)}
            return {
                "status": None,
                "answer": None,
                "reason_codes": [],
                "result": None,
                "error": error,
            }
        return {
            "status": answer.status,
            "answer": answer.answer,
            "reason_codes": list(answer.reason_codes),
            "result": json.dumps(answer.as_dict(), ensure_ascii=False),
            "error": None,
        }


def _sources_of(sources: Any) -> Any:
    """The row's sources as evidence mappings, without the nulls Arrow filled in.

    Arrow gives every source in a column the same fields, so a field one source lacks comes
    back as ``None``; each such field defaults to ``None`` (or empty) in ``Evidence`` anyway.
    Inside ``metadata`` the nulls stay: a key only another source has comes back as ``None``.
    Anything else is passed on for the engine to check (an ``InvalidRequestError``).
    """
    if not isinstance(sources, list):
        return sources
    return [
        {key: value for key, value in source.items() if value is not None}
        if isinstance(source, dict)
        else source
        for source in sources
    ]


def answer_dataset(
    dataset: ray.data.Dataset,
    make_model: Callable[[], ReaderModel],
    *,
    concurrency: int = 1,
    threads: int = 8,
    batch_size: int = 16,
    num_cpus: float = 0.5,
    id_column: str = "id",
    **options: Any,
) -> ray.data.Dataset:
    """Answer every row of ``dataset``: ``{"id", "question", "sources": [evidence dicts]}``.

    Args:
        dataset: One question per row, with its ``sources`` as a list of evidence mappings.
        make_model: A picklable factory of the model client, called once per worker, such as
            ``functools.partial(ChatCompletionsModel, base_url, model="...")``.
        concurrency: Workers (Ray actors), each with its own model client.
        threads: Rows each worker answers at once.
        batch_size: Rows per batch handed to a worker: a few times ``threads``, so that a batch
            keeps the pool busy while Ray hands the worker its next one.
        num_cpus: CPUs Ray reserves per worker; answering mostly waits, so less than one.
        id_column: The column that identifies a row in the results.
        **options: Answering options for ``answer_from_evidence``, such as ``timeout``.

    Returns:
        A lazy dataset with one row per input row: ``id_column``, ``status``, ``answer``,
        ``reason_codes``, ``result`` (``as_dict()`` as JSON) and ``error`` (``{"type",
        "message"}``); exactly one of ``result`` and ``error`` is set.

    Raises:
        InvalidRequestError: An option is outside its range (checked here, once).
        TypeError: An option name is unknown.
    """
    AnswerOptions(**options)  # a typo fails here, not in every row on every worker
    return dataset.map_batches(
        AnswerBatches,
        fn_constructor_kwargs={
            "make_model": make_model,
            "id_column": id_column,
            "threads": threads,
            "options": options,
        },
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=num_cpus,
    )


def outcome(row: Mapping[str, Any]) -> str:
    """A result row's status, or its error's class name."""
    error = row.get("error")
    return str(row["status"] if error is None else error["type"])


SOURCES = [
    {
        "id": "standup-04-28",
        "text": "Standup, April 28. The launch moved to June 15 because the payment provider "
        "needs a security review first. Dana owns the security review.",
        "speaker": "Ravi",
        "status": "current",
    },
    {
        "id": "standup-04-14",
        "text": "Standup, April 14. The launch is planned for June 8.",
        "speaker": "Ravi",
        "status": "superseded",
    },
    {"id": "email-7", "text": "The budget review is on Friday.", "metadata": {"url": "mail:7"}},
]
QUESTIONS = [
    "When is the launch?",
    "Why did the launch move?",
    "Who owns the security review?",
    "When is the budget review?",
    "Who approved the budget?",
]


def sample_rows(count: int) -> list[dict[str, Any]]:
    """``count`` rows over the sample sources, cycling through the sample questions."""
    return [
        {"id": number, "question": QUESTIONS[number % len(QUESTIONS)], "sources": SOURCES}
        for number in range(count)
    ]


# --8<-- [start:run]
def run(args: argparse.Namespace, make_model: Callable[[], ReaderModel]) -> Counter[str]:
    """Answer the rows, write them as JSON lines to ``args.output``, and count the outcomes."""
    if args.input:
        dataset = ray.data.read_json(args.input)
    else:
        dataset = ray.data.from_items(sample_rows(args.rows))
    results = answer_dataset(
        dataset,
        make_model,
        concurrency=args.workers,
        threads=args.threads,
        # On a busy CPU a local model can take minutes: a modest output, the longest timeout.
        max_output_tokens=512,
        timeout=300,
    )
    results.write_json(args.output)
    # Counted from what was written, so the numbers are those of the files.
    return Counter(outcome(row) for row in ray.data.read_json(args.output).iter_rows())


# --8<-- [end:run]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible API root (default: local model)")
    parser.add_argument("--model", default="default", help="the model name sent with --base-url")
    parser.add_argument("--address", help="a Ray cluster's address (default: a local Ray)")
    parser.add_argument("--input", help="JSON lines of rows {id, question, sources}")
    parser.add_argument("--rows", type=int, default=5, help="sample rows without --input")
    parser.add_argument("--output", help="where to write JSON lines (default: a temporary dir)")
    parser.add_argument("--workers", type=int, default=1, help="Ray actors, one client each")
    parser.add_argument("--threads", type=int, default=4, help="rows each worker answers at once")
    args = parser.parse_args(argv)
    if args.base_url is None and not is_installed():
        parser.error(
            f"no --base-url, and the embedded local model is not installed: {INSTALL_HINT}"
        )
    args.output = args.output or tempfile.mkdtemp(prefix="answers-")
    return args


def main(argv: list[str] | None = None) -> Counter[str]:
    """Answer the sample (or ``--input``) rows on Ray; print and return the outcome counts."""
    args = parse_args(argv)
    if not ray.is_initialized():
        ray.init(address=args.address)
    if args.base_url is not None:
        counts = run(args, functools.partial(ChatCompletionsModel, args.base_url, model=args.model))
    else:
        with LocalModel() as local:
            # Workers reach the driver's local server over loopback: a single-node run only.
            reader = functools.partial(
                ChatCompletionsModel, local.base_url, model=local.model_name, dialect="full"
            )
            counts = run(args, reader)
    print(f"wrote {sum(counts.values())} rows to {args.output}: {dict(sorted(counts.items()))}")
    return counts


if __name__ == "__main__":
    main()
