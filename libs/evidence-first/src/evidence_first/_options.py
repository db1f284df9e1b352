"""The answering options, declared once: each one's default, range and meaning.

:class:`AnswerOptionFields` is the declaration; its checks are inherited from
:class:`~evidence_first._option_checks.OptionChecks`. Everything else derives from it: the
checked value :class:`AnswerOptions`, the entry points' keywords (:class:`OptionArgs`, pinned
to the fields by a test), the integrations' fields and arguments, the CLI flags, the options
the plan hands each stage (:meth:`AnswerOptions.arguments_for`) and the options table in
``docs/concepts.md`` (``docs/scripts/options_table.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from functools import cache, cached_property
from typing import Any

from pydantic import ConfigDict, Field, ValidationError
from typing_extensions import TypedDict, Unpack

from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import format_timestamp
from evidence_first._injection import DEFAULT_DEFENCES, Defences
from evidence_first._limits import MAX_SOURCES
from evidence_first._option_checks import OptionChecks, option_bounds, option_error
from evidence_first._tokens import estimate_tokens
from evidence_first._vocabulary import CitationMode, FlagPolicy, KnowledgePolicy, UnmarkedSegments

__all__ = ["AnswerOptionFields", "AnswerOptions", "OptionArgs", "option_bounds", "option_error"]


def _accepts(text: str) -> dict[str, Any]:
    return {"accepts": text}


class AnswerOptionFields(OptionChecks):
    """Every answering option with its default, range and meaning: the one declaration.

    A field's ``description`` is its documentation; ``ge``/``gt``/``le`` or a ``Literal`` is
    its range, and ``json_schema_extra["accepts"]`` describes any other accepted value. The
    checks (:class:`~evidence_first._option_checks.OptionChecks`) raise
    :class:`~evidence_first.InvalidRequestError` naming the option.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    knowledge: KnowledgePolicy = Field(
        "evidence-only", description="the opt-in keeps an `inference` apart from the facts"
    )
    citation_mode: CitationMode = Field(
        "quote", description="how the model cites; left unset, the model's own (the reader's)"
    )
    output_language: str | None = Field(
        None,
        description="the answer's language (a model instruction; `None`: the question's); "
        "quotes stay in their source language",
        json_schema_extra=_accepts("a non-blank string"),
    )
    question_time: int | datetime | None = Field(
        None,
        description="anchor for relative-time questions",
        json_schema_extra=_accepts("Unix ms or an aware `datetime`"),
    )
    max_context_tokens: int = Field(
        2048, ge=1, le=32_768, description="estimated allowance for the serialized sources"
    )
    max_output_tokens: int = Field(2048, ge=1, le=8_192, description="passed to the model")
    max_response_chars: int = Field(
        32_768, ge=1, le=131_072, description="longer output is rejected before parsing"
    )
    timeout: float = Field(
        60.0,
        gt=0,
        le=300,
        description="seconds; the engine stops waiting even if the model ignores it",
    )
    min_evidence: int = Field(
        1,
        ge=1,
        le=MAX_SOURCES,
        description="packed sources needed before the model is called",
    )
    min_score: float | None = Field(
        None,
        description="sources scoring lower, or unscored, are omitted (`below_min_score`)",
        json_schema_extra=_accepts("a finite number"),
    )
    scope: Collection[str] | None = Field(
        None,
        description="sources whose `metadata[scope_key]` is not in it are omitted "
        "(`out_of_scope`); defence in depth, not authorization",
        json_schema_extra=_accepts("a collection of strings"),
    )
    scope_key: str = Field(
        "scope",
        description="the metadata key `scope` is checked against",
        json_schema_extra=_accepts("a non-empty string"),
    )
    token_counter: Callable[[str], int] | None = Field(
        None,
        exclude=True,
        description="counts a serialized source; `None`: a conservative offline estimate",
        json_schema_extra=_accepts("`str -> int`"),
    )
    min_reader_confidence: float | None = Field(
        None,
        ge=0,
        le=1,
        description="an answer whose reader's confidence is lower, or unreadable, abstains; "
        "left unset, the model's own floor (the embedded reader's); `None`: no floor",
    )
    non_current_evidence: FlagPolicy = Field(
        "abstain",
        description="an answer resting only on superseded or contradicted sources while a "
        "current one was sent: flagged, or an abstention",
    )
    unsupported_facts: FlagPolicy = Field(
        "flag",
        description="an answer resting on a fact whose words its cited text does not hold: "
        "flagged, or an abstention",
    )
    uncovered_question: FlagPolicy = Field(
        "flag",
        description="an answer whose cited sources hold fewer than 2 in 3 of the (English) "
        "question's words: flagged, or an abstention; unset, the model's own",
    )
    unmarked_segments: UnmarkedSegments = Field(
        "list", description="answer text that no marker ties to a fact: listed, or rejected"
    )

    def option_values(self) -> dict[str, Any]:
        """Every option given explicitly, by name (the keywords that rebuild these options).

        An option left unset stays unset: ``min_reader_confidence`` then means the model's own.
        """
        return {name: getattr(self, name) for name in self.model_fields_set & OPTION_NAMES}


OPTION_NAMES = frozenset(AnswerOptionFields.model_fields)
"""Every option's name."""


class OptionArgs(TypedDict, total=False):
    """The options as keyword arguments: the names and types of :class:`AnswerOptionFields`."""

    knowledge: KnowledgePolicy
    citation_mode: CitationMode
    output_language: str | None
    question_time: int | datetime | None
    max_context_tokens: int
    max_output_tokens: int
    max_response_chars: int
    timeout: float
    min_evidence: int
    min_score: float | None
    scope: Collection[str] | None
    scope_key: str
    token_counter: Callable[[str], int] | None
    min_reader_confidence: float | None
    non_current_evidence: FlagPolicy
    unsupported_facts: FlagPolicy
    uncovered_question: FlagPolicy
    unmarked_segments: UnmarkedSegments


class AnswerOptions(AnswerOptionFields):
    """Every answering option, checked on construction: ``AnswerOptions(max_context_tokens=4096)``.

    Frozen; :meth:`model_copy` checks its update like construction does.

    Raises:
        InvalidRequestError: An option is of the wrong type or outside its range.
        TypeError: An option name is unknown.
    """

    model_config = ConfigDict(frozen=True)

    defences: Defences = Field(DEFAULT_DEFENCES, exclude=True)
    """The injection defences (not an entry-point option: benchmarks measure them)."""

    def __init__(
        self, *, defences: Defences = DEFAULT_DEFENCES, **options: Unpack[OptionArgs]
    ) -> None:
        try:
            fields: dict[str, Any] = {"defences": defences, **options}
            super().__init__(**fields)
        except ValidationError as exc:
            raise option_error(exc) from None

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> AnswerOptions:
        """A copy with ``update`` applied, checked like construction."""
        return type(self)(**{**self.option_values(), "defences": self.defences, **(update or {})})

    @cached_property
    def count_tokens(self) -> Callable[[str], int]:
        """The token counter, its results checked; the default estimate when none was given."""
        counter = self.token_counter
        if counter is None:
            return estimate_tokens

        def count(text: str) -> int:
            tokens: object = counter(text)
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                msg = "token_counter must return a non-negative int"
                raise InvalidRequestError(msg, field="token_counter")
            return tokens

        return count

    @property
    def question_time_text(self) -> str | None:
        """``question_time`` in ISO 8601 UTC, as the prompt states it."""
        return None if self.question_time is None else format_timestamp(self.question_time)

    def arguments_for(self, stage: Callable[..., object], **given: Any) -> dict[str, Any]:
        """The keywords to call a stage with: each option it takes, then ``given``.

        A stage takes an option by a keyword-only parameter of the option's name, so a new
        option reaches its stage with no line in the plan. ``given`` holds the plan's own
        values, and wins over an option of the same name (``question_time`` as text).
        """
        return {**{name: getattr(self, name) for name in _option_parameters(stage)}, **given}


@cache
def _option_parameters(stage: Callable[..., object]) -> tuple[str, ...]:
    """The keyword-only parameters of ``stage`` named after an option."""
    return tuple(
        parameter.name
        for parameter in inspect.signature(stage).parameters.values()
        if parameter.kind is parameter.KEYWORD_ONLY and parameter.name in OPTION_NAMES
    )
