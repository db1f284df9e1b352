"""Building blocks for framework integrations (LangChain, LlamaIndex, your own).

An integration maps its objects to :class:`~evidence_first.Evidence` (keeping the originals
with :meth:`~evidence_first.Evidence.with_provenance`), checks its options once with
:class:`AnswerOptions`, sets aside what the core would refuse with
:func:`select_sources`, and answers with :func:`answer_selection`::

    options = AnswerOptions(max_context_tokens=4096)                 # InvalidRequestError early
    selection = select_sources(to_evidence(doc) for doc in documents)
    answer = answer_selection(question, selection, model, options)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from evidence_first._answer import EvidenceAnswer
from evidence_first._engine import arun_plan, run_plan
from evidence_first._limits import MAX_SOURCES
from evidence_first._options import AnswerOptionFields, AnswerOptions, OptionArgs, option_error
from evidence_first._plan import aplan_answer, plan_answer
from evidence_first._vocabulary import OmissionReason
from evidence_first._evidence import Evidence
from evidence_first._model import ReaderModel

__all__ = [
    "MAX_SOURCES",
    "AnswerOptionFields",
    "AnswerOptions",
    "OptionArgs",
    "SourceSelection",
    "UnenforcedSettingsWarning",
    "aanswer_selection",
    "answer_selection",
    "option_error",
    "select_sources",
]


class UnenforcedSettingsWarning(UserWarning):
    """A framework model outside an integration's allow-list is called with the prompt alone.

    Its provider-side output limit, timeout, JSON mode or retries could not be set; the engine
    still makes one call, stops waiting at ``timeout`` and rejects output over
    ``max_response_chars``. Integrations issue it once per model class.
    """


@dataclass(frozen=True)
class SourceSelection:
    """Sources the core will consider, and those an integration set aside first.

    Attributes:
        sources: At most 64 sources with unique IDs, in the order retrieved.
        set_aside: Each source dropped as ``duplicate_id`` (its ID repeats an earlier one, as
            ensemble and multi-query retrievers produce) or ``over_source_limit`` (past 64).
    """

    sources: tuple[Evidence, ...]
    set_aside: tuple[tuple[Evidence, OmissionReason], ...]


def select_sources(evidence: Iterable[Evidence]) -> SourceSelection:
    """Drop repeated IDs, then keep the first 64 sources in order and set the rest aside."""
    kept: list[Evidence] = []
    set_aside: list[tuple[Evidence, OmissionReason]] = []
    seen: set[str] = set()
    for item in evidence:
        if item.id in seen:
            set_aside.append((item, "duplicate_id"))
        elif len(kept) >= MAX_SOURCES:
            set_aside.append((item, "over_source_limit"))
        else:
            seen.add(item.id)
            kept.append(item)
    return SourceSelection(tuple(kept), tuple(set_aside))


def answer_selection(
    question: str,
    selection: SourceSelection,
    model: ReaderModel,
    options: AnswerOptions,
    *,
    cancel: threading.Event | None = None,
) -> EvidenceAnswer:
    """Answer from a selection, reporting the set-aside sources as omitted with their reasons.

    Same contract and errors as :func:`~evidence_first.answer_from_evidence`.
    """
    plan = plan_answer(options, question, selection.sources, model, preomitted=selection.set_aside)
    return run_plan(plan, model, cancel=cancel)


async def aanswer_selection(
    question: str, selection: SourceSelection, model: ReaderModel, options: AnswerOptions
) -> EvidenceAnswer:
    """Async :func:`answer_selection`."""
    plan = await aplan_answer(
        options, question, selection.sources, model, preomitted=selection.set_aside
    )
    return await arun_plan(plan, model)
