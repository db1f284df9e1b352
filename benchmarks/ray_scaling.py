"""Ray scaling: recipe 8's ``answer_dataset`` at 1 and 2 workers against a slow endpoint.

The loopback endpoint of ``concurrency.py`` (a child process) answers every chat completion
after a fixed delay (200 ms) with a valid ledger. ``answer_dataset`` (cookbook recipe 8) answers
64 questions on a local single-node Ray (``ray.init(num_cpus=2)``, unless one is running) with
1 and then 2 workers (Ray actors, one ``ChatCompletionsModel`` each), in batches of 16 rows,
each worker answering 8 rows at once on its thread pool (the recipe's defaults). Every answer
must be ``answered`` and the endpoint must see exactly one request per question.

Two times per run:

- ``job s``: the whole ``answer_dataset(...).materialize()``, starting the workers included
  (each run starts its own actors: a few seconds here, paid once by a long job);
- ``answering s``: from the endpoint's first request to its last reply (its request count,
  polled every 10 ms, plus the delay): the throughput a long job sustains.

``rows/s`` and the scaling ratio are over ``answering s``; the target is more than 1.8x the
1-worker rate at 2 workers. ``job rows/s`` shows what a job this short gets. After one
untimed warm-up run (the session's first is slower), each configuration runs ``--repeat``
times; the table shows medians. Ray Data is told to wait for every worker to start before it
hands out rows (``DataContext.wait_for_min_actors_s``), so no worker answers alone at first.

Run from the workspace root::

    uv run python benchmarks/ray_scaling.py [--rows N] [--repeat N] [--quick]

It prints the Python version and platform, then a Markdown table. A missed target shows ``NO``
in the ``met`` column; the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import threading
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpx
from _common import load_recipe, machine_line, require, run_flags
from concurrency import SOURCES, EndpointProcess, questions

TARGET_RATIO = 1.8
POLL_SECONDS = 0.01
TIMEOUT = 30.0


@dataclass(frozen=True)
class Config:
    rows: int
    workers: tuple[int, ...]
    threads: int
    batch_size: int
    delay: float
    repeat: int


@dataclass(frozen=True)
class Run:
    job_s: float
    answering_s: float
    peak_in_flight: int


@dataclass(frozen=True)
class Result:
    workers: int
    config: Config
    runs: list[Run]

    @property
    def job_s(self) -> float:
        return statistics.median(run.job_s for run in self.runs)

    @property
    def answering_s(self) -> float:
        return statistics.median(run.answering_s for run in self.runs)

    @property
    def rows_per_s(self) -> float:
        return self.config.rows / self.answering_s

    @property
    def job_rows_per_s(self) -> float:
        return self.config.rows / self.job_s

    @property
    def peak_in_flight(self) -> int:
        return max(run.peak_in_flight for run in self.runs)


def bulk_recipe() -> ModuleType:
    """Cookbook recipe 8 as a module; its classes travel to the workers by value."""
    import ray

    module = load_recipe("08_bulk_answering_on_ray")
    ray.cloudpickle.register_pickle_by_value(module)
    return module


def rows(count: int) -> list[dict[str, Any]]:
    sources = [{"id": source_id, "text": text} for source_id, text in SOURCES]
    return [
        {"id": number, "question": question, "sources": sources}
        for number, question in enumerate(questions(count))
    ]


class RequestWatch:
    """Polls the endpoint's request count: when the first request came, and the last."""

    def __init__(self, port: int, expected: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.expected = expected
        self.first: float | None = None
        self.last: float | None = None
        self.stats: dict[str, int] = {}
        self._stop = threading.Event()
        self._client = httpx.Client()
        self._client.post(f"{self.url}/stats/reset").raise_for_status()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            requests = self._client.get(f"{self.url}/stats").json()["requests"]
            if requests and self.first is None:
                self.first = now
            if requests >= self.expected and self.last is None:
                self.last = now
            self._stop.wait(POLL_SECONDS)

    def finish(self, delay: float) -> float:
        """Stop polling; return the seconds from the first request to the last reply."""
        self._stop.set()
        self._thread.join()
        self.stats = self._client.get(f"{self.url}/stats").json()
        self._client.close()
        if self.first is None or self.last is None:
            msg = f"the endpoint did not see {self.expected} requests"
            raise RuntimeError(msg)
        return self.last - self.first + delay


def timed_run(recipe: ModuleType, endpoint: EndpointProcess, config: Config, workers: int) -> Run:
    """Answer ``config.rows`` rows with ``workers`` workers; check every row and request."""
    import ray.data

    from evidence_first.chat_completions import ChatCompletionsModel

    dataset = ray.data.from_items(rows(config.rows))
    make_model = functools.partial(ChatCompletionsModel, endpoint.base_url, model="loopback")
    watch = RequestWatch(endpoint.port, config.rows)
    start = time.perf_counter()
    results = recipe.answer_dataset(
        dataset,
        make_model,
        concurrency=workers,
        threads=config.threads,
        batch_size=config.batch_size,
        max_output_tokens=512,
        timeout=TIMEOUT,
    ).materialize()
    job_s = time.perf_counter() - start
    answering_s = watch.finish(endpoint.delay)
    outcomes = sorted(recipe.outcome(row) for row in results.take_all())
    require(outcomes == ["answered"] * config.rows, f"not all answered: {set(outcomes)}")
    requests = watch.stats["requests"]
    require(requests == config.rows, f"{config.rows} rows made {requests} requests")
    return Run(job_s, answering_s, watch.stats["peak_in_flight"])


def measure_all(config: Config) -> list[Result]:
    # Workers on this one node run the driver's interpreter; under `uv run`, Ray would start
    # each through `uv run` with a packaged working directory, seconds more per worker.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray
    import ray.data

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    # Dispatch only once every worker is up, so each configuration answers with all of them.
    context = ray.data.DataContext.get_current()
    waited, context.wait_for_min_actors_s = context.wait_for_min_actors_s, 120
    recipe = bulk_recipe()
    try:
        with EndpointProcess(config.delay) as endpoint:
            timed_run(recipe, endpoint, config, config.workers[0])  # warm-up, not reported
            results = []
            for workers in config.workers:
                runs = [timed_run(recipe, endpoint, config, workers) for _ in range(config.repeat)]
                results.append(Result(workers, config, runs))
            return results
    finally:
        ray.cloudpickle.unregister_pickle_by_value(recipe)
        context.wait_for_min_actors_s = waited
        if started:
            ray.shutdown()


def render(results: list[Result]) -> str:
    base = results[0].rows_per_s
    lines = [
        machine_line(),
        "",
        "| workers | threads per worker | batch size | rows | endpoint delay ms | peak in flight "
        "| job s | job rows/s | answering s | rows/s | scaling vs 1 worker | target | met |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        ratio = r.rows_per_s / base
        judged = r.workers == 2
        target = f"> {TARGET_RATIO:g}x at 2 workers" if judged else "-"
        met = ("yes" if ratio > TARGET_RATIO else "NO") if judged else "-"
        lines.append(
            f"| {r.workers} | {r.config.threads} | {r.config.batch_size} | {r.config.rows} "
            f"| {r.config.delay * 1000:g} | {r.peak_in_flight} | {r.job_s:.2f} "
            f"| {r.job_rows_per_s:.1f} | {r.answering_s:.2f} | {r.rows_per_s:.1f} "
            f"| {ratio:.2f}x | {target} | {met} |"
        )
    lines.append("")
    lines.extend(
        f"{r.workers} worker(s): job s per run "
        + ", ".join(f"{run.job_s:.2f}" for run in r.runs)
        + "; answering s per run "
        + ", ".join(f"{run.answering_s:.2f}" for run in r.runs)
        for r in results
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="questions per run (default 64)")
    args = run_flags(
        argv,
        parser,
        repeat_help="timed runs per worker count (default 3)",
        quick_help="16 rows in batches of 4, 4 threads per worker, a 50 ms endpoint, one run: "
        "a smoke test",
    )
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be at least 1")
    return args


def config_for(args: argparse.Namespace) -> Config:
    if args.quick:
        rows, threads, batch_size, delay, repeat = args.rows or 16, 4, 4, 0.05, args.repeat or 1
    else:
        rows, threads, batch_size, delay, repeat = args.rows or 64, 8, 16, 0.2, args.repeat or 3
    return Config(rows, (1, 2), threads, batch_size, delay, repeat)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(render(measure_all(config_for(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
