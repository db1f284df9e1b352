"""Building blocks for framework integrations (LangChain, LlamaIndex, your own).

An integration maps its objects to :class:`~evidence_first.Evidence` (keeping the originals
with :meth:`~evidence_first.Evidence.with_provenance`), checks its options once with
:class:`AnswerOptions`, sets aside what the core would refuse with
:func:`select_sources`, and answers with :func:`answer_selection`::

    options = AnswerOptions(max_context_tokens=4096)                 # InvalidRequestError early
    selection = select_sources(to_evidence(doc) for doc in documents)
    answer = answer_selection(question, selection, model, options)

The rest is the glue both integrations share, so they follow one policy. For metadata:

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
import warnings
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evidence_first._answer import EvidenceAnswer
from evidence_first._dialects import (
    DIALECTS,
    Dialect,
    DialectName,
    openai_dialect_for,
    schema_in,
)
from evidence_first._engine import arun_plan, run_plan
from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import Evidence
from evidence_first._limits import MAX_SOURCES
from evidence_first._metadata import json_safe_metadata, metadata_fields
from evidence_first._model import ModelRequest, ReaderModel
from evidence_first._options import (
    AnswerOptionFields,
    AnswerOptions,
    OptionArgs,
    checked_int,
    option_error,
)
from evidence_first._plan import aplan_answer, plan_answer
from evidence_first._vocabulary import OmissionReason

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
    "OptionArgs",
    "SourceSelection",
    "UnenforcedSettingsWarning",
    "aanswer_selection",
    "answer_selection",
    "checked_int",
    "json_safe_metadata",
    "limits_in",
    "metadata_fields",
    "normalized_finish_reason",
    "openai_dialect_for",
    "openai_response_format",
    "option_error",
    "refuse_tools",
    "schema_in",
    "select_sources",
    "tool_keys_in",
    "warn_once",
    "warn_unenforced_once",
    "without_strict_keys",
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


# The strict call's settings, the same for every framework.

SCHEMA_NAME = "evidence_ledger"
"""The name given to the ledger schema in an OpenAI ``json_schema`` response format."""

TOOL_KEYS = frozenset({"tools", "functions", "tool_choice", "function_call", "parallel_tool_calls"})
"""Request settings that give a model tools; a model configured with any of them is refused."""

STRICT_KEYS = TOOL_KEYS | {
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "n",
    "stream",
    "stream_options",
    "response_format",
    "timeout",
}
"""Request settings the strict call sets itself: a caller's own values for them are dropped."""

NESTED_SETTINGS = ("extra_body", "model_kwargs")
"""Keys under which frameworks nest more request settings; searched below as well."""

_LIMIT_KEYS = ("max_tokens", "max_completion_tokens")
# Finish reasons that mean the output hit its token limit: OpenAI's and Ollama's, Anthropic's.
_OUT_OF_TOKENS = frozenset({"length", "max_tokens"})


def openai_response_format(
    request: ModelRequest, *, schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking strictly for ``schema``, default the request's."""
    schema = request.json_schema if schema is None else schema
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True},
    }


def limits_in(settings: object) -> list[int]:
    """The output limits (``max_tokens``, ``max_completion_tokens``) set in ``settings``."""
    if not isinstance(settings, Mapping):
        return []
    limits = [
        value
        for key in _LIMIT_KEYS
        if isinstance(value := settings.get(key), int) and not isinstance(value, bool)
    ]
    for name in NESTED_SETTINGS:
        limits.extend(limits_in(settings.get(name)))
    return limits


def tool_keys_in(settings: object, where: str) -> tuple[str, list[str]] | None:
    """Where ``settings`` first sets :data:`TOOL_KEYS` (``where.extra_body``...), and which."""
    if not isinstance(settings, Mapping):
        return None
    if found := sorted(TOOL_KEYS.intersection(settings)):
        return where, found
    for name in NESTED_SETTINGS:
        if nested := tool_keys_in(settings.get(name), f"{where}.{name}"):
            return nested
    return None


def refuse_tools(settings: object, where: str, *, name: str = "llm") -> None:
    """Refuse a model configured with tools in ``settings`` (nested settings included).

    Raises:
        InvalidRequestError: With ``field="llm"``, naming where the tool keys are set.
    """
    found = tool_keys_in(settings, where)
    if found is not None:
        place, keys = found
        msg = (
            f"{name} is configured with tools ({place}: {', '.join(keys)}); remove them: the "
            "model must answer with text only"
        )
        raise InvalidRequestError(msg, field="llm")


def without_strict_keys(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without :data:`STRICT_KEYS`, nested settings included."""
    kept = {key: value for key, value in settings.items() if key not in STRICT_KEYS}
    for name in NESTED_SETTINGS:
        if isinstance(kept.get(name), Mapping):
            kept[name] = without_strict_keys(kept[name])
    return kept


_warned: set[Hashable] = set()
_warned_lock = threading.Lock()


def warn_once(key: Hashable, message: str, *, stacklevel: int) -> None:
    """Issue ``message`` as one :class:`UnenforcedSettingsWarning` per ``key``, from any thread.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, UnenforcedSettingsWarning, stacklevel=stacklevel + 1)


def warn_unenforced_once(model_class: type, *, retries_ruled_out: bool, stacklevel: int) -> None:
    """Issue one :class:`UnenforcedSettingsWarning` per model class, from any thread.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    if model_class in _warned:
        return  # the message is built once; warn_once checks again under its lock
    retries = "" if retries_ruled_out else ", and retries cannot be ruled out"
    msg = (
        f"{model_class.__name__} is not on evidence-first's allow-list, so it is called with the "
        "prompt alone: its output limit (max_tokens), temperature, provider-side timeout and "
        f"JSON output could not be set{retries}. The answer still comes from one call, its "
        "wait is bounded by `timeout` and its size by `max_response_chars`."
    )
    warn_once(model_class, msg, stacklevel=stacklevel + 1)


def normalized_finish_reason(source: object) -> str | None:
    """The finish, stop (Anthropic) or done (Ollama) reason in ``source``; out of tokens: length."""
    for name in ("finish_reason", "stop_reason", "done_reason"):
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if isinstance(value, str) and value:
            return "length" if value.lower() in _OUT_OF_TOKENS else value
    return None


# Metadata, by the policy in the module docstring.
