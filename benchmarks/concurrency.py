"""Concurrency: 64 questions through the async paths against a slow OpenAI-compatible endpoint.

A loopback endpoint, written here on ``asyncio.start_server`` and run in a child process (this
script with a hidden ``--serve`` flag, so it never competes with the clients for the GIL),
answers ``POST /v1/chat/completions`` after a fixed delay (200 ms) with a chat completion whose
content is a valid ledger. It serves every connection concurrently (HTTP/1.1 keep-alive, one
task per connection) and counts the requests and how many were in flight at once, so the table
shows that the clients, not the endpoint, set the concurrency.

Systems:

- ``LangChain abatch``: ``EvidenceAnswerer(llm=ChatOpenAI(base_url=...)).abatch(inputs,
  config={"max_concurrency": n})``.
- ``LlamaIndex aquery``: ``EvidenceQueryEngine.from_args(retriever, llm=OpenAILike(
  api_base=..., is_chat_model=True))``, 64 ``aquery`` calls gathered under an
  ``asyncio.Semaphore(n)``; the retriever returns four prepared nodes.
- ``openai SDK alone (reference)``: the same requests (our prompt and JSON schema, built with
  ``AnswerOptions.plan``) sent with ``AsyncOpenAI.chat.completions.create`` under a semaphore:
  no framework and no verification. It shows what the HTTP client alone costs.

Every client gets an ``httpx.AsyncClient`` with the openai SDK's default pool (1,000
connections, 100 kept alive; httpx's own default is 100 / 20). Each configuration first
answers one warm-up round of ``n`` questions (lazy clients, connections), then runs 64
questions ``--repeat`` times; the table shows the median wall time and the client process's CPU
time per question over those rounds. Every answer must be ``answered`` and the endpoint must see
exactly one request per question. The ideal is ``ceil(64 / n) x delay``; the target is a wall
time within 1.5x of it. A blocking call in an async path would serialize the requests (peak in
flight 1, wall near 64 x delay). CPU is the other cost: every question spends some on the one
event loop, so each round trip also waits for some of the CPU of the others in flight: the
excess over the ideal grows with ``n x CPU per question / delay``.

Run from the workspace root::

    uv run python benchmarks/concurrency.py [--repeat N] [--quick]

It prints the Python version and platform, then a Markdown table. Missed targets show ``NO``
in the ``met`` column; the exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx
from _common import machine_line, run_flags

# The frameworks are imported where each client is built, so the endpoint's child process
# (this script with --serve) starts in well under a second instead of importing them all.

LANGCHAIN = "LangChain abatch"
LLAMAINDEX = "LlamaIndex aquery"
OPENAI_ALONE = "openai SDK alone (reference)"
TARGET_RATIO = 1.5
# The openai SDK's default pool; ChatOpenAI and OpenAILike build theirs with these limits.
OPENAI_POOL_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
MAX_OUTPUT_TOKENS = 512
TIMEOUT = 30.0

SOURCES = (
    (
        "standup-04-28",
        "Standup, April 28. The launch moved to June 15 because the survey of the northern "
        "valley needs two more weeks. Ravi will send the revised map on Friday.",
    ),
    (
        "email-17",
        "From Priya: the budget review is on Friday. Please bring the timber and stone "
        "estimates for the new bridge.",
    ),
    (
        "notes-03",
        "Field notes, May 3. The team crossed the river near the old mill and measured the "
        "boundary along the orchard road.",
    ),
    (
        "council-12",
        "Council minutes: the village school will close early in winter while the harbour "
        "road is repaired.",
    ),
)
LEDGER = json.dumps(
    {
        "facts": [
            {
                "subject": "the launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [
                    {"source_id": "standup-04-28", "quote": "The launch moved to June 15"}
                ],
            }
        ],
        "answer": "The launch is on June 15.",
        "inference": None,
        "missing_evidence": [],
    }
)


def questions(count: int) -> list[str]:
    return [f"When is the launch moved to June 15 (standup {n})?" for n in range(1, count + 1)]


# --- The loopback endpoint (runs in the child process) ---------------------------------------


class LoopbackEndpoint:
    """``POST /v1/chat/completions`` answered after ``delay`` seconds, all connections at once.

    ``GET /stats`` returns the request count and the peak in flight; ``POST /stats/reset``
    clears them.
    """

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def serve(self, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await stop.wait()
            # Idle keep-alive connections end cleanly: their handlers see end of input.
            for writer in self._connections.values():
                writer.close()
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                while await self._exchange(reader, writer):
                    pass
        finally:
            del self._connections[task]
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; ``False`` at end of input."""
        request_line = await reader.readline()
        if not request_line:
            return False
        headers = await _read_headers(reader)
        await reader.readexactly(int(headers.get("content-length", "0")))
        method, path = request_line.decode("latin-1").split()[:2]
        if (method, path) == ("POST", "/v1/chat/completions"):
            writer.write(_http_response(200, await self._completion()))
        elif (method, path) == ("GET", "/stats"):
            stats = {"requests": self.requests, "peak_in_flight": self.peak_in_flight}
            writer.write(_http_response(200, json.dumps(stats).encode()))
        elif (method, path) == ("POST", "/stats/reset"):
            self.requests = self.peak_in_flight = 0
            writer.write(_http_response(200, b"{}"))
        else:
            writer.write(_http_response(404, b'{"error": "not found"}'))
        await writer.drain()
        return True

    async def _completion(self) -> bytes:
        self.requests += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        completion = {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "loopback",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": LEDGER},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 600, "completion_tokens": 60, "total_tokens": 660},
        }
        return json.dumps(completion).encode()


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


def _http_response(status: int, body: bytes) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


def serve(delay: float) -> None:
    """Run the endpoint, print its port, and stop when the parent closes our stdin."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def wait_for_parent() -> None:
            sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=wait_for_parent, daemon=True).start()
        await LoopbackEndpoint(delay).serve(stop)

    asyncio.run(run())


class EndpointProcess:
    """The endpoint in a child process: its base URL, and its counters over HTTP."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> EndpointProcess:
        command = [sys.executable, __file__, "--serve", "--delay", str(self.delay)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.strip().isdigit():
            self.__exit__()
            msg = "the loopback endpoint did not start"
            raise RuntimeError(msg)
        self.port = int(line)
        return self

    def __exit__(self, *exc_info: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    async def reset(self, client: httpx.AsyncClient) -> None:
        (await client.post(f"http://127.0.0.1:{self.port}/stats/reset")).raise_for_status()

    async def stats(self, client: httpx.AsyncClient) -> dict[str, int]:
        response = await client.get(f"http://127.0.0.1:{self.port}/stats")
        response.raise_for_status()
        stats: dict[str, int] = response.json()
        return stats


# --- The clients -----------------------------------------------------------------------------


# Answers a batch of questions with at most n in flight; returns each answer's status.
AnswerAll = Callable[[Sequence[str], int], Awaitable[list[str]]]


def http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=OPENAI_POOL_LIMITS)


def langchain_client(base_url: str, client: httpx.AsyncClient) -> AnswerAll:
    from langchain_core.documents import Document
    from langchain_openai import ChatOpenAI

    from langchain_evidence_first import EvidenceAnswerer

    llm = ChatOpenAI(
        base_url=base_url, api_key="unused", model="loopback", http_async_client=client
    )
    answerer = EvidenceAnswerer(llm=llm, max_output_tokens=MAX_OUTPUT_TOKENS, timeout=TIMEOUT)
    documents = [Document(id=source_id, page_content=text) for source_id, text in SOURCES]

    async def answer_all(batch: Sequence[str], concurrency: int) -> list[str]:
        inputs = [{"question": question, "sources": documents} for question in batch]
        answers = await answerer.abatch(inputs, config={"max_concurrency": concurrency})
        return [answer.status for answer in answers]

    return answer_all


def llamaindex_client(base_url: str, client: httpx.AsyncClient) -> AnswerAll:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.llms.openai_like import OpenAILike

    from llama_index.response_synthesizers.evidence_first import EvidenceQueryEngine

    class FixedRetriever(BaseRetriever):
        """Returns the prepared nodes (natively async, as vector stores are)."""

        def __init__(self, nodes: list[NodeWithScore]) -> None:
            self._nodes = nodes
            super().__init__()

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(self._nodes)

        async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(self._nodes)

    llm = OpenAILike(
        model="loopback",
        api_base=base_url,
        api_key="unused",
        is_chat_model=True,
        async_http_client=client,
    )
    nodes = [
        NodeWithScore(node=TextNode(id_=source_id, text=text), score=1.0)
        for source_id, text in SOURCES
    ]
    engine = EvidenceQueryEngine.from_args(
        FixedRetriever(nodes), llm=llm, max_output_tokens=MAX_OUTPUT_TOKENS, timeout=TIMEOUT
    )

    async def answer_all(batch: Sequence[str], concurrency: int) -> list[str]:
        limit = asyncio.Semaphore(concurrency)

        async def one(question: str) -> str:
            async with limit:
                response = await engine.aquery(question)
            return str(response.metadata["evidence_answer"].status)

        return list(await asyncio.gather(*(one(question) for question in batch)))

    return answer_all


class _PlanOnly:
    """A reader that is never called: planning only checks it exists."""

    def generate(self, request: object) -> str:
        raise NotImplementedError


def openai_client(base_url: str, client: httpx.AsyncClient) -> AnswerAll:
    from openai import AsyncOpenAI

    from evidence_first import Evidence, ModelRequest
    from evidence_first._engine.plan import plan_answer
    from evidence_first.adapters import AnswerOptions
    from evidence_first.chat_completions import SCHEMA_NAME

    openai = AsyncOpenAI(
        base_url=base_url, api_key="unused", http_client=client, max_retries=0, timeout=TIMEOUT
    )
    options = AnswerOptions(max_output_tokens=MAX_OUTPUT_TOKENS, timeout=TIMEOUT)
    evidence = [Evidence(id=source_id, text=text) for source_id, text in SOURCES]

    def request_for(question: str) -> ModelRequest:
        request = plan_answer(options, question, evidence, _PlanOnly()).request
        assert request is not None
        return request

    async def answer_all(batch: Sequence[str], concurrency: int) -> list[str]:
        limit = asyncio.Semaphore(concurrency)

        async def one(question: str) -> str:
            request = request_for(question)
            async with limit:
                completion = await openai.chat.completions.create(
                    model="loopback",
                    messages=[
                        {"role": "system", "content": request.system},
                        {"role": "user", "content": request.user},
                    ],
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    response_format={
                        "type": "json_schema",
                        "json_schema": {
                            "name": SCHEMA_NAME,
                            "schema": request.json_schema,
                            "strict": True,
                        },
                    },
                )
            # Not verified: a reply counts as "answered" when it carries text.
            return "answered" if completion.choices[0].message.content else "empty"

        return list(await asyncio.gather(*(one(question) for question in batch)))

    return answer_all


CLIENTS: dict[str, Callable[[str, httpx.AsyncClient], AnswerAll]] = {
    LANGCHAIN: langchain_client,
    LLAMAINDEX: llamaindex_client,
    OPENAI_ALONE: openai_client,
}


# --- Measuring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    questions: int
    concurrency: tuple[int, ...]
    delay: float
    repeat: int


@dataclass(frozen=True)
class Round:
    wall_ms: float
    cpu_ms: float
    peak_in_flight: int


@dataclass(frozen=True)
class Result:
    system: str
    concurrency: int
    questions: int
    delay: float
    rounds: list[Round]

    @property
    def wall(self) -> float:
        return statistics.median(r.wall_ms for r in self.rounds)

    @property
    def cpu_per_question(self) -> float:
        return statistics.median(r.cpu_ms for r in self.rounds) / self.questions

    @property
    def peak_in_flight(self) -> int:
        return max(r.peak_in_flight for r in self.rounds)

    @property
    def ideal(self) -> float:
        return math.ceil(self.questions / self.concurrency) * self.delay * 1000

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal

    @property
    def met(self) -> bool:
        return self.ratio <= TARGET_RATIO


async def timed_round(
    answer_all: AnswerAll,
    batch: Sequence[str],
    concurrency: int,
    endpoint: EndpointProcess,
    control: httpx.AsyncClient,
) -> Round:
    """Answer ``batch``; check every answer and the request count."""
    await endpoint.reset(control)
    cpu = time.process_time()
    start = time.perf_counter()
    statuses = await answer_all(batch, concurrency)
    wall = (time.perf_counter() - start) * 1000
    cpu_ms = (time.process_time() - cpu) * 1000
    stats = await endpoint.stats(control)
    if len(statuses) != len(batch) or set(statuses) != {"answered"}:
        msg = f"expected {len(batch)} answered, got {len(statuses)}: {sorted(set(statuses))}"
        raise RuntimeError(msg)
    if stats["requests"] != len(batch):
        msg = f"{len(batch)} questions made {stats['requests']} requests"
        raise RuntimeError(msg)
    return Round(wall, cpu_ms, stats["peak_in_flight"])


async def measure_all(config: Config) -> list[Result]:
    results: list[Result] = []
    batch = questions(config.questions)
    with EndpointProcess(config.delay) as endpoint:
        async with httpx.AsyncClient() as control:
            for system, make_client in CLIENTS.items():
                async with http_client() as client:
                    answer_all = make_client(endpoint.base_url, client)
                    for n in config.concurrency:
                        await timed_round(answer_all, batch[:n], n, endpoint, control)
                        rounds = [
                            await timed_round(answer_all, batch, n, endpoint, control)
                            for _ in range(config.repeat)
                        ]
                        results.append(Result(system, n, len(batch), config.delay, rounds))
    return results


# --- Reporting -------------------------------------------------------------------------------


def render(results: list[Result]) -> str:
    lines = [
        machine_line(),
        "",
        "| system | max_concurrency | questions | endpoint delay ms | peak in flight "
        "| client CPU ms per question | wall ms | ideal ms | ratio | target | met |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines.extend(
        f"| {r.system} | {r.concurrency} | {r.questions} | {r.delay * 1000:g} "
        f"| {r.peak_in_flight} | {r.cpu_per_question:.1f} | {r.wall:.0f} | {r.ideal:.0f} "
        f"| {r.ratio:.2f} | <= {TARGET_RATIO:g}x ideal | {'yes' if r.met else 'NO'} |"
        for r in results
    )
    lines.append("")
    lines.extend(
        f"{r.system}, max_concurrency {r.concurrency}: wall ms per run "
        + ", ".join(f"{round.wall_ms:.0f}" for round in r.rounds)
        for r in results
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--delay", type=float, default=0.2, help=argparse.SUPPRESS)
    return run_flags(
        argv,
        parser,
        repeat_help="timed runs per configuration (default 5)",
        quick_help="8 questions, max_concurrency 4, a 50 ms endpoint, one run: a smoke test",
    )


def config_for(args: argparse.Namespace) -> Config:
    if args.quick:
        return Config(questions=8, concurrency=(4,), delay=0.05, repeat=args.repeat or 1)
    return Config(questions=64, concurrency=(8, 16), delay=0.2, repeat=args.repeat or 5)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.delay)
        return 0
    results = asyncio.run(measure_all(config_for(args)))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
