"""Building blocks for framework integrations (LangChain, LlamaIndex, your own).

An integration maps its objects to :class:`~evidence_first.Evidence` (keeping the originals
with :meth:`~evidence_first.Evidence.with_provenance`), checks its options once with
:class:`AnswerOptions`, sets aside what the core would refuse with
:func:`select_sources`, and answers with :func:`answer_selection`::

    options = AnswerOptions(max_context_tokens=4096)                 # InvalidRequestError early
    selection = select_sources(to_evidence(doc) for doc in documents)
    answer = answer_selection(question, selection, model, options)

To stream one (an integration's ``stream``), :func:`stream_selection` (or
:func:`astream_selection`) plans it at once and returns an iterator of the events of
:func:`~evidence_first.stream_answer_from_evidence`, then the result ``answer_selection`` gives
for the same reply.

The rest is the glue both integrations share, so they follow one policy: the transport's
strict-call settings, schema dialects and provider-table shape (defined in
``evidence_first._transport``, below the engine, and re-exported here), the failure of a
redirect the transport never follows (:func:`status_failure`: its status and the origin it
names, never its path or query), the renderers' rule
for a bracketed number the model wrote (:func:`unbracketed`: ``[2]`` shown as ``(2)``, so an
integration's own ``[n]`` reads as nothing else), the one sentence a non-answer reads as in
both (:func:`outcome_text`: its status and what is missing, for an agent reading a tool's
output), and, for metadata:

1. A metadata value mapped to an evidence field (speaker, observed_at, status, score) that is
   unusable raises :class:`~evidence_first.InvalidRequestError` before any call: a status
   outside the three, a non-string speaker, a time that is naive, unparsable, out of range or
   a float, a score that is not a finite number. Its ``field`` names the item
   (``sources[3].metadata``, by position in the list given) and its message names the key,
   never the value. It fails closed: a ``superseded`` status silently dropped would make stale
   evidence look current to the model.
2. Metadata kept as provenance (never sent to the model) is made JSON-safe: values pydantic can
   serialize are converted with ``pydantic_core.to_jsonable_python`` (a datetime becomes its
   ISO 8601 string, a set or tuple a list); an entry still not JSON-safe (a non-finite float
   anywhere inside, a non-string key, an unserializable object, nesting deeper than 16) is
   dropped from ``Evidence.metadata`` and stays on the original, via ``source_object``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

from evidence_first._engine.entry_points import arun_plan, run_plan
from evidence_first._engine.plan import aplan_answer, plan_answer
from evidence_first._engine.result import EvidenceAnswer
from evidence_first._engine.streaming import astream_plan, stream_plan
from evidence_first._models.dialects import DIALECTS, Dialect, DialectName
from evidence_first._models.once import warn_once
from evidence_first._models.profiles import (
    ProviderFamily,
    family_for_url,
    profile_for_name,
    profile_of,
)
from evidence_first._models.providers import Provider, is_instance_of
from evidence_first._models.strict import (
    NESTED_SETTINGS,
    SCHEMA_NAME,
    STRICT_KEYS,
    TOOL_KEYS,
    chat_completions_settings,
    limits_in,
    normalized_finish_reason,
    openai_response_format,
    output_format,
    refuse_retries,
    refuse_tools,
    warn_unenforced_once,
    without_redirects,
    without_strict_keys,
)
from evidence_first._models.writing import schema_in
from evidence_first._sending.options import (
    AnswerOptionFields,
    AnswerOptions,
    OptionArgs,
    checked_int,
    option_error,
)
from evidence_first._shapes.errors import ModelProfileWarning, UnenforcedSettingsWarning
from evidence_first._shapes.events import StreamEvent
from evidence_first._shapes.evidence import Evidence, evidence_error, positional_id, source_evidence
from evidence_first._shapes.limits import MAX_SOURCES
from evidence_first._shapes.model import ReaderModel
from evidence_first._shapes.public import publish
from evidence_first._shapes.vocabulary import OmissionReason
from evidence_first._transport.stated import (
    acall_refusing_redirects,
    call_refusing_redirects,
    refused_redirect,
    status_failure,
)
from evidence_first.chat_completions import token_logprobs
from evidence_first.render._escaping import unbracketed
from evidence_first.render._metadata import answer_metadata, json_safe_metadata, metadata_fields
from evidence_first.render._outcome import outcome_text

__all__ = [
    "DIALECTS",
    "MAX_SOURCES",
    "NESTED_SETTINGS",
    "SCHEMA_NAME",
    "STRICT_KEYS",
    "TOOL_KEYS",
    "AnswerOptionFields",
    "AnswerOptions",
    "Dialect",
    "DialectName",
    "ModelProfileWarning",
    "OptionArgs",
    "Provider",
    "ProviderFamily",
    "SourceSelection",
    "UnenforcedSettingsWarning",
    "aanswer_selection",
    "acall_refusing_redirects",
    "answer_metadata",
    "answer_selection",
    "astream_selection",
    "call_refusing_redirects",
    "chat_completions_settings",
    "checked_int",
    "evidence_error",
    "family_for_url",
    "is_instance_of",
    "json_safe_metadata",
    "limits_in",
    "metadata_fields",
    "normalized_finish_reason",
    "openai_response_format",
    "option_error",
    "outcome_text",
    "output_format",
    "positional_id",
    "profile_for_name",
    "profile_of",
    "publish",
    "refuse_retries",
    "refuse_tools",
    "refused_redirect",
    "schema_in",
    "select_sources",
    "source_evidence",
    "status_failure",
    "stream_selection",
    "token_logprobs",
    "unbracketed",
    "warn_once",
    "warn_unenforced_once",
    "without_redirects",
    "without_strict_keys",
]


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


def stream_selection(
    question: str,
    selection: SourceSelection,
    model: ReaderModel,
    options: AnswerOptions,
    *,
    cancel: threading.Event | None = None,
) -> Iterator[StreamEvent | EvidenceAnswer]:
    """Stream :func:`answer_selection`: its events as the reply arrives, then the result.

    Planned at once: an :class:`~evidence_first.InvalidRequestError` is raised by this call,
    before anything is sent. Same contract as
    :func:`~evidence_first.stream_answer_from_evidence`.
    """
    plan = plan_answer(options, question, selection.sources, model, preomitted=selection.set_aside)
    return stream_plan(plan, model, cancel=cancel)


async def astream_selection(
    question: str, selection: SourceSelection, model: ReaderModel, options: AnswerOptions
) -> AsyncIterator[StreamEvent | EvidenceAnswer]:
    """Async :func:`stream_selection`: awaiting it plans; the iterator it returns streams."""
    plan = await aplan_answer(
        options, question, selection.sources, model, preomitted=selection.set_aside
    )
    return astream_plan(plan, model)


publish(globals())
