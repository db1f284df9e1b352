"""The model is called at most once; its failures are typed and never become abstentions."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time

import pytest

from evidence_first import (
    AnswerCancelledError,
    AnswerTimeoutError,
    Evidence,
    EvidenceFirstError,
    InvalidRequestError,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    TokenUsage,
    aanswer_from_evidence,
    answer_from_evidence,
)

SOURCE = Evidence(id="notes", text="The launch moved to June 15.")
SECRET_TEXT = "The launch moved to June 15."
LEDGER = json.dumps(
    {
        "facts": [
            {
                "subject": "launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": "notes", "quote": SECRET_TEXT}],
            }
        ],
        "answer": "June 15",
        "inference": None,
        "missing_evidence": [],
    }
)


class AsyncOnly:
    def __init__(self, response=LEDGER, delay: float = 0.0) -> None:
        self.calls = 0
        self.response = response
        self.delay = delay

    async def agenerate(self, request: ModelRequest):
        self.calls += 1
        await asyncio.sleep(self.delay)
        return self.response


class Both:
    def __init__(self) -> None:
        self.sync_calls = 0
        self.async_calls = 0

    def generate(self, request):
        self.sync_calls += 1
        return LEDGER

    async def agenerate(self, request):
        self.async_calls += 1
        return LEDGER


def test_the_model_is_called_exactly_once(scripted):
    model = scripted(LEDGER)
    answer = answer_from_evidence("When?", [SOURCE], model)
    assert answer.status == "answered"
    assert model.calls == 1


def test_the_model_is_called_once_even_when_its_output_is_invalid(scripted):
    model = scripted("not json")
    assert answer_from_evidence("When?", [SOURCE], model).status == "invalid_response"
    assert model.calls == 1


def test_usage_is_carried_into_the_result(scripted):
    usage = TokenUsage(input_tokens=812, output_tokens=64)
    answer = answer_from_evidence(
        "When?", [SOURCE], scripted(ModelResponse(text=LEDGER, usage=usage))
    )
    assert answer.usage == usage


def test_model_exception_becomes_model_call_error_without_payload(scripted):
    cause = RuntimeError(f"provider said: {SECRET_TEXT} (HTTP 500, key sk-123)")

    def fail(request):
        raise cause

    with pytest.raises(ModelCallError) as info:
        answer_from_evidence("When?", [SOURCE], scripted(fail))
    assert info.value.__cause__ is cause
    assert SECRET_TEXT not in str(info.value)
    assert "sk-123" not in str(info.value)
    assert info.value.cause_type == "builtins.RuntimeError"


def test_a_response_of_the_wrong_type_is_a_model_call_error(scripted):
    with pytest.raises(ModelCallError):
        answer_from_evidence("When?", [SOURCE], scripted(lambda request: {"text": LEDGER}))


def test_a_sync_model_that_ignores_the_timeout_is_abandoned(scripted):
    release = threading.Event()

    def hang(request):
        release.wait(10)
        return LEDGER

    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError) as info:
        answer_from_evidence("When?", [SOURCE], scripted(hang), timeout=0.3)
    elapsed = time.monotonic() - started
    release.set()
    assert elapsed < 0.3 + 0.5
    assert info.value.timeout == 0.3


def test_the_request_cancel_event_is_set_when_the_engine_stops_waiting(scripted):
    seen: list[ModelRequest] = []

    def slow(request):
        seen.append(request)
        request.cancel.wait(5)
        return LEDGER

    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence("When?", [SOURCE], scripted(slow), timeout=0.1)
    assert seen[0].cancel.wait(1)


def test_a_client_timeout_inside_the_model_is_an_answer_timeout(scripted):
    class ReadTimeout(Exception):  # shaped like httpx.ReadTimeout
        pass

    def fail(request):
        raise ReadTimeout("timed out reading")

    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence("When?", [SOURCE], scripted(fail))


def test_setting_cancel_gives_answer_cancelled(scripted):
    cancel = threading.Event()
    release = threading.Event()

    def hang(request):
        release.wait(10)
        return LEDGER

    threading.Timer(0.1, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(AnswerCancelledError):
        answer_from_evidence("When?", [SOURCE], scripted(hang), cancel=cancel)
    release.set()
    assert time.monotonic() - started < 1.0


def test_a_cancel_set_before_the_call_prevents_it(scripted):
    cancel = threading.Event()
    cancel.set()
    model = scripted(LEDGER)
    with pytest.raises(AnswerCancelledError):
        answer_from_evidence("When?", [SOURCE], model, cancel=cancel)
    assert model.calls == 0


async def test_cancelling_the_async_task_propagates_cancelled_error():
    model = AsyncOnly(delay=10)
    task = asyncio.create_task(aanswer_from_evidence("When?", [SOURCE], model))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.calls == 1


async def test_async_timeout_is_an_answer_timeout():
    with pytest.raises(AnswerTimeoutError):
        await aanswer_from_evidence("When?", [SOURCE], AsyncOnly(delay=10), timeout=0.1)


async def test_async_model_exception_becomes_model_call_error():
    class Failing:
        async def agenerate(self, request):
            raise ConnectionError(SECRET_TEXT)

    with pytest.raises(ModelCallError) as info:
        await aanswer_from_evidence("When?", [SOURCE], Failing())
    assert SECRET_TEXT not in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionError)


async def test_a_sync_only_model_works_from_the_async_entry_point(scripted):
    model = scripted(LEDGER)
    answer = await aanswer_from_evidence("When?", [SOURCE], model)
    assert answer.status == "answered"
    assert model.calls == 1


async def test_a_slow_sync_model_does_not_block_the_event_loop(scripted):
    def slow(request):
        time.sleep(0.3)
        return LEDGER

    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    answer = await aanswer_from_evidence("When?", [SOURCE], scripted(slow))
    ticking.cancel()
    assert answer.status == "answered"
    assert ticks >= 10


def test_an_async_only_model_works_from_the_sync_entry_point():
    model = AsyncOnly()
    assert answer_from_evidence("When?", [SOURCE], model).status == "answered"
    assert model.calls == 1


def test_an_async_only_model_that_hangs_times_out_from_sync():
    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        answer_from_evidence("When?", [SOURCE], AsyncOnly(delay=10), timeout=0.2)
    assert time.monotonic() - started < 0.7


def test_each_entry_point_uses_the_native_method():
    model = Both()
    answer_from_evidence("When?", [SOURCE], model)
    asyncio.run(aanswer_from_evidence("When?", [SOURCE], model))
    assert (model.sync_calls, model.async_calls) == (1, 1)


def test_the_callers_context_reaches_the_model(scripted):
    trace_id = contextvars.ContextVar("trace_id", default=None)
    trace_id.set("run-42")
    seen = []

    def record(request):
        seen.append(trace_id.get())
        return LEDGER

    answer_from_evidence("When?", [SOURCE], scripted(record))
    assert seen == ["run-42"]


# A callback raising one of our own error types: only the errors our transports word safely
# pass through; any other (InvalidRequestError included) is a ModelCallError, message dropped.
LEAKY = f"bad option sk-live-123 Ravi said {SECRET_TEXT}"


@pytest.mark.parametrize(
    "error",
    [InvalidRequestError(LEAKY, field="x"), EvidenceFirstError(LEAKY), ValueError(LEAKY)],
    ids=["InvalidRequestError", "EvidenceFirstError", "ValueError"],
)
def test_a_callbacks_own_error_type_becomes_model_call_error_without_its_message(error):
    class Raising:
        def generate(self, request):
            raise error

    with pytest.raises(ModelCallError) as info:
        answer_from_evidence("When?", [SOURCE], Raising())
    assert LEAKY not in str(info.value)
    assert "sk-live" not in str(info.value)
    assert info.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [InvalidRequestError(LEAKY, field="x"), EvidenceFirstError(LEAKY)],
    ids=["InvalidRequestError", "EvidenceFirstError"],
)
async def test_an_async_callbacks_own_error_type_becomes_model_call_error(error):
    class Raising:
        async def agenerate(self, request):
            raise error

    with pytest.raises(ModelCallError) as info:
        await aanswer_from_evidence("When?", [SOURCE], Raising())
    assert LEAKY not in str(info.value)
    assert info.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        ModelCallError("the provider refused", cause_type=None),
        AnswerTimeoutError("slow", timeout=1.0),
        AnswerCancelledError("stopped"),
    ],
)
def test_our_transports_safely_worded_errors_pass_through(error):
    class Raising:
        def generate(self, request):
            raise error

    with pytest.raises(type(error)) as info:
        answer_from_evidence("When?", [SOURCE], Raising())
    assert info.value is error


async def test_the_async_deadline_holds_against_a_model_that_swallows_cancellation():
    finished = asyncio.Event()

    class Stubborn:
        async def agenerate(self, request):
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    continue  # swallowed: keeps going
            finished.set()
            return LEDGER  # a valid ledger, but late

    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        await aanswer_from_evidence("When?", [SOURCE], Stubborn(), timeout=0.3)
    assert time.monotonic() - started < 0.8
    await asyncio.wait_for(finished.wait(), timeout=3)  # let the stubborn task end cleanly
