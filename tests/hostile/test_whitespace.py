"""Long runs of whitespace, attacked: judging is linear in the text, and never on the event loop.

A run of spaces, tabs, no-break spaces or ideographic spaces without a line break once made
the passage cut and the marker search backtrack over the run at every position of it: 32,000
spaces took 0.83 s to cut, and one source within the limits took 66.5 s to judge. Each test
measures one run against one twice as long, in the same process and the same test, so a busy
machine slows both alike: linear work takes twice as long, quadratic work four times.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import _support
import pytest
from _support import ScriptedModel

import evidence_first._engine.entry_points as engine
from evidence_first import Evidence, aanswer_from_evidence, answer_from_evidence

SHORT, LONG = 8_000, 16_000
# Linear is 2; quadratic work measured here was 3.9 and more.
MOST_RATIO = 3.0
WHITESPACE = [" ", "\t", "\u00a0", "\u3000"]
QUESTION = "When did the launch move?"
LAUNCH = "The launch moved to June 15"


def _ledger(citation: dict[str, Any], answer: str = "June 15 [F1].") -> dict[str, Any]:
    launch = _support.fact(citation, subject="the launch", relation="moved to", obj="June 15")
    return _support.ledger_dict([launch], answer=answer)


def _sample(call: Callable[[], Any], times: int) -> float:
    start = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - start) / times


def _ratio(call_of: Callable[[int], Callable[[], Any]]) -> float:
    """How many times longer the long run takes, each measured at its fastest of 7 samples.

    A sample repeats the call for about 20 ms, so that a millisecond's noise on a busy machine
    is small beside it; short and long samples alternate, so a slow spell slows both.
    """
    short, long = call_of(SHORT), call_of(LONG)
    times = max(1, min(50, math.ceil(0.02 / _sample(short, 1))))  # the first call warms up
    _sample(long, 1)
    fastest = {short: math.inf, long: math.inf}
    for _ in range(7):
        for call in (short, long):
            fastest[call] = min(fastest[call], _sample(call, times))
    return fastest[long] / fastest[short]


def _source(run: str) -> Evidence:
    # The cited clause stands right before the run, and no sentence end or line break closes it.
    return Evidence(id="notes", text=f"{LAUNCH}{run}Room 16 is booked")


# "Limits and budgets are checked before anything is sent" and the judge costs what its input
# costs: "the judge off the event loop whatever the size", and "linear-time text scanning: no
# pattern that backtracks over a run" (issue 36; docs/security.md, "Bounded work").


@pytest.mark.parametrize("space", WHITESPACE, ids=["space", "tab", "nbsp", "ideographic"])
@pytest.mark.parametrize("mode", ["quote", "passage"])
def test_judging_a_source_with_a_run_twice_as_long_takes_about_twice_as_long(mode, space):
    citation: dict[str, Any] = {"source_id": "notes", "quote": LAUNCH}
    if mode == "passage":
        citation = {"source_id": "notes", "passages": ["notes#1"], "quote": None}
    model = ScriptedModel(_ledger(citation))

    def call_of(size: int) -> Callable[[], Any]:
        source = _source(space * size)

        def call() -> None:
            answer = answer_from_evidence(
                QUESTION, [source], model, citation_mode=mode, max_context_tokens=32_768
            )
            assert answer.citations_verified

        return call

    assert _ratio(call_of) < MOST_RATIO


@pytest.mark.parametrize("space", WHITESPACE, ids=["space", "tab", "nbsp", "ideographic"])
def test_judging_an_answer_with_a_run_twice_as_long_takes_about_twice_as_long(space):
    source = Evidence(id="notes", text=f"{LAUNCH}. Room 16 is booked.")
    citation = {"source_id": "notes", "quote": LAUNCH}

    def call_of(size: int) -> Callable[[], Any]:
        model = ScriptedModel(_ledger(citation, answer=f"June 15 [F1].{space * size}x"))

        def call() -> None:
            answer = answer_from_evidence(QUESTION, [source], model, max_response_chars=131_072)
            assert answer.status == "answered"

        return call

    assert _ratio(call_of) < MOST_RATIO


async def test_a_reply_is_judged_off_the_event_loop_whatever_its_size(monkeypatch):
    judged_on: list[threading.Thread] = []
    real = engine.judge

    def judge(*args: Any) -> Any:
        judged_on.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(engine, "judge", judge)
    source = Evidence(id="notes", text=f"{LAUNCH}. Room 16 is booked.")
    model = ScriptedModel(_ledger({"source_id": "notes", "quote": LAUNCH}))
    answer = await aanswer_from_evidence(QUESTION, [source], model)
    assert answer.status == "answered"
    assert judged_on
    assert threading.current_thread() not in judged_on
