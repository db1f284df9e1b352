"""`answer_from_evidence`: check the request, pack, prompt, call the model once, verify."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from typing_extensions import Unpack

from evidence_first._answer import EvidenceAnswer
from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import Evidence
from evidence_first._invoke import call_model, call_model_async
from evidence_first._judge import judge, without_model_call
from evidence_first._model import ReaderModel
from evidence_first._options import AnswerOptions, OptionArgs
from evidence_first._plan import AnswerPlan, aplan_answer, plan_answer

__all__ = ["aanswer_from_evidence", "answer_from_evidence", "arun_plan", "run_plan"]


def answer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    *,
    cancel: threading.Event | None = None,
    **options: Unpack[OptionArgs],
) -> EvidenceAnswer:
    """Answer ``question`` only from ``sources``, calling ``model`` at most once.

    Args:
        question: The question; must not be blank, and at most 2,048 estimated tokens.
        sources: At most 64 :class:`Evidence` objects, mappings of their fields or plain
            strings (a string's ID is its position, ``doc-1`` for the first), considered in the
            order given. IDs must be unique; each text at most 262,144 UTF-16 units.
        model: An object with ``generate(request)`` and/or ``async agenerate(request)``.
        cancel: Set it to stop waiting for the model (raises :class:`AnswerCancelledError`).
        **options: The answering options (:class:`~evidence_first.adapters.OptionArgs`), each
            with its default, range and meaning declared once in
            :class:`~evidence_first.adapters.AnswerOptionFields` and shown in the options
            table of ``docs/concepts.md``.

    Returns:
        An :class:`EvidenceAnswer` whose status is ``answered``, ``insufficient_evidence`` or
        ``invalid_response``.

    Raises:
        InvalidRequestError: An argument breaks the contract; nothing was sent.
        TypeError: An option name is unknown.
        ModelCallError: The model callback failed.
        AnswerTimeoutError: The model did not answer within ``timeout``.
        AnswerCancelledError: ``cancel`` was set before the model answered.
    """
    plan = plan_answer(AnswerOptions(**options), question, sources, model)
    return run_plan(plan, model, cancel=cancel)


async def aanswer_from_evidence(
    question: str,
    sources: Iterable[Evidence | Mapping[str, Any] | str],
    model: ReaderModel,
    **options: Unpack[OptionArgs],
) -> EvidenceAnswer:
    """Async :func:`answer_from_evidence`: the same contract.

    Cancel the awaiting task to cancel; :class:`asyncio.CancelledError` propagates. A model
    with only a sync ``generate`` runs on a worker thread, so the event loop never blocks.
    """
    plan = await aplan_answer(AnswerOptions(**options), question, sources, model)
    return await arun_plan(plan, model)


def run_plan(plan: AnswerPlan, model: object, *, cancel: threading.Event | None) -> EvidenceAnswer:
    """Call the model for a checked plan (unless too little was packed) and judge the reply."""
    if cancel is not None and not isinstance(cancel, threading.Event):
        msg = f"cancel must be a threading.Event, got {type(cancel).__name__}"
        raise InvalidRequestError(msg, field="cancel")
    if plan.request is None:
        return without_model_call(plan)
    return judge(plan, call_model(model, plan.request, cancel=cancel))


async def arun_plan(plan: AnswerPlan, model: object) -> EvidenceAnswer:
    """Async :func:`run_plan`: the reply is judged on a worker thread, whatever its size.

    Judging reads the reply and searches the sources for each quote: its cost follows what the
    model wrote as well as what was sent, so it never runs on the event loop.
    """
    if plan.request is None:
        return without_model_call(plan)
    response = await call_model_async(model, plan.request)
    return await asyncio.to_thread(judge, plan, response)
