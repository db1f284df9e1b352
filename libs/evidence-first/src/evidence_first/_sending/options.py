"""The answering options, declared once: each one's default, range and meaning, and checks.

:class:`AnswerOptionFields` is the declaration; it inherits its checks from
:class:`OptionChecks`: an option of a choice (a ``Literal``), a bounded ``int``, a bounded
``float`` (or ``float | None``) or a ``bool`` is checked by its declaration alone; the options
with other rules have a check of their own there, by name. Each failure is an
:class:`InvalidRequestError` naming its option. Everything else derives from the declaration:
the checked value :class:`AnswerOptions`, the entry points' keywords (:class:`OptionArgs`,
pinned to the fields by a test), the integrations' fields and arguments, the CLI flags, the
the options table in ``docs/concepts.md`` (``docs/scripts/options_table.py``). The plan
hands each stage the checked :class:`AnswerOptions`, and the stage reads the options it needs
by name (``options.min_score``), so a search for an option's name finds every reader of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from functools import cached_property
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict, Unpack

from evidence_first._sending.injection import DEFAULT_DEFENCES, Defences
from evidence_first._sending.tokens import estimate_tokens
from evidence_first._shapes.errors import InvalidRequestError
from evidence_first._shapes.evidence import format_timestamp
from evidence_first._shapes.limits import MAX_CONTEXT_TOKENS, MAX_SOURCES, MAX_TIMEOUT_SECONDS
from evidence_first._shapes.unicode import has_text, is_unicode_text
from evidence_first._shapes.vocabulary import (
    CitationMode,
    FlagPolicy,
    KnowledgePolicy,
    UnmarkedSegments,
)

__all__ = [
    "AnswerOptionFields",
    "AnswerOptions",
    "OptionArgs",
    "OptionChecks",
    "checked_int",
    "option_bounds",
    "option_error",
]


def checked_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` if an int (not a bool) from ``low`` to ``high``; else InvalidRequestError."""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int"
        raise InvalidRequestError(msg, field=name)
    if not low <= value <= high:
        msg = f"{name} must be between {low} and {high}, got {value}"
        raise InvalidRequestError(msg, field=name)
    return value


class OptionChecks(BaseModel):
    """The checks of the options a subclass declares, run before pydantic's own."""

    @field_validator("*", mode="before")
    @classmethod
    def _declared(cls, value: object, info: ValidationInfo) -> object:
        # A choice (a Literal), a bool or a numeric range is checked by its declaration alone.
        name = str(info.field_name)
        field = cls.model_fields[name]
        choices = get_args(field.annotation) if get_origin(field.annotation) is Literal else ()
        if choices and value not in choices:
            msg = f"{name} must be one of {', '.join(choices)}"
            raise InvalidRequestError(msg, field=name)
        if field.annotation is bool and not isinstance(value, bool):
            msg = f"{name} must be True or False"
            raise InvalidRequestError(msg, field=name)
        if field.annotation is int:
            return checked_int(name, value, *option_bounds(field))
        if field.annotation == float | None:
            return None if value is None else _number(name, value, field, optional=True)
        if field.annotation is float:
            return _number(name, value, field, optional=False)
        return value

    @field_validator("timeout", mode="before", check_fields=False)
    @classmethod
    def _seconds(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            msg = "timeout must be a number of seconds"
            raise InvalidRequestError(msg, field="timeout")
        low, high = option_bounds(cls.model_fields["timeout"])
        if not (math.isfinite(value) and low < value <= high):
            msg = f"timeout must be greater than {low} and at most {high} seconds, got {value}"
            raise InvalidRequestError(msg, field="timeout")
        return float(value)

    @field_validator("output_language", mode="before", check_fields=False)
    @classmethod
    def _language(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not has_text(value):
            msg = "output_language must be None or a string with a visible character"
            raise InvalidRequestError(msg, field="output_language")
        if not is_unicode_text(value):
            msg = "output_language contains a lone surrogate, which is not valid Unicode"
            raise InvalidRequestError(msg, field="output_language")
        return value

    @field_validator("question_time", mode="before", check_fields=False)
    @classmethod
    def _anchor(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, datetime)):
            msg = "question_time must be Unix milliseconds (int) or an aware datetime"
            raise InvalidRequestError(msg, field="question_time")
        if isinstance(value, datetime) and value.utcoffset() is None:
            msg = "question_time must be timezone-aware"
            raise InvalidRequestError(msg, field="question_time")
        try:
            format_timestamp(value)
        except (OverflowError, ValueError):
            msg = "question_time is out of range"
            raise InvalidRequestError(msg, field="question_time") from None
        return value

    @field_validator("scope", mode="before", check_fields=False)
    @classmethod
    def _tags(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not isinstance(value, Collection):
            msg = "scope must be a collection of strings, such as a set (not one string)"
            raise InvalidRequestError(msg, field="scope")
        if not all(isinstance(tag, str) for tag in value):
            msg = "scope must contain only strings"
            raise InvalidRequestError(msg, field="scope")
        return frozenset(value)

    @field_validator("scope_key", mode="before", check_fields=False)
    @classmethod
    def _key(cls, value: object) -> object:
        if not isinstance(value, str) or not value:
            msg = "scope_key must be a non-empty string"
            raise InvalidRequestError(msg, field="scope_key")
        return value

    @field_validator("token_counter", mode="before", check_fields=False)
    @classmethod
    def _counter(cls, value: object) -> object:
        if value is not None and not callable(value):
            msg = "token_counter must be callable"
            raise InvalidRequestError(msg, field="token_counter")
        return value

    @field_validator("embedder", mode="before", check_fields=False)
    @classmethod
    def _embedder(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if not callable(value):
            msg = "embedder must be callable"
            raise InvalidRequestError(msg, field="embedder")
        # Fields are checked in declaration order: compress, declared first, is read here.
        if info.data.get("compress") is not True:
            msg = "embedder is read only with compress=True; set compress=True or leave it out"
            raise InvalidRequestError(msg, field="embedder")
        return value


def _number(name: str, value: object, field: FieldInfo, *, optional: bool) -> float:
    """A finite number within the option's declared range, as a float."""
    low, high = option_bounds(field)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and low <= value <= high)
    ):
        kind = "finite number" if low == -math.inf else f"number from {low:g} to {high:g}"
        msg = f"{name} must be {'None or ' if optional else ''}a {kind}"
        raise InvalidRequestError(msg, field=name)
    return float(value)


def option_error(exc: ValidationError) -> Exception:
    """The typed error for a failed option check: never pydantic's, never the value.

    Returns:
        The option's own :class:`InvalidRequestError`; a ``TypeError`` for an unknown name;
        else an ``InvalidRequestError`` naming the field and the kind of error.
    """
    error = exc.errors(include_url=False, include_input=False)[0]
    name = ".".join(str(part) for part in error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, InvalidRequestError):
        return cause
    if error["type"] == "extra_forbidden":
        return TypeError(f"unexpected keyword argument {name!r}")
    return InvalidRequestError(f"{name} is not valid ({error['type']})", field=name or None)


def option_bounds(field: FieldInfo) -> tuple[Any, Any]:
    """A declared option's range, lowest (``ge``/``gt``) to highest (``le``); ``±inf`` if none."""
    low: Any = -math.inf
    high: Any = math.inf
    for bound in field.metadata:
        if isinstance(bound, (annotated_types.Ge, annotated_types.Gt)):
            low = bound.ge if isinstance(bound, annotated_types.Ge) else bound.gt
        if isinstance(bound, annotated_types.Le):
            high = bound.le
    return low, high


def _accepts(text: str) -> dict[str, Any]:
    return {"accepts": text}


class AnswerOptionFields(OptionChecks):
    """Every answering option with its default, range and meaning: the one declaration.

    A field's ``description`` is its documentation; ``ge``/``gt``/``le`` or a ``Literal`` is
    its range, and ``json_schema_extra["accepts"]`` describes any other accepted value. The
    checks (:class:`OptionChecks`) raise
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
        2048,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="estimated allowance for the serialized sources, charged the same in both "
        "citation modes (passage mode's labels and datamark are not charged); a model's "
        "profile may cap it (the embedded models': 8,192)",
    )
    max_output_tokens: int = Field(2048, ge=1, le=8_192, description="passed to the model")
    max_response_chars: int = Field(
        32_768, ge=1, le=131_072, description="longer output is rejected before parsing"
    )
    timeout: float = Field(
        60.0,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description="seconds; the engine stops waiting even if the model ignores it; left "
        "unset, the model's own (the embedded reader's: 300)",
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
    compress: bool = Field(
        False,
        description="a source that does not fit what is left of `max_context_tokens` is sent "
        "as its most relevant whole passages, each kept range verified against the original "
        "text; off: such a source is omitted whole (`over_budget`)",
    )
    embedder: Callable[[list[str]], list[list[float]]] | None = Field(
        None,
        exclude=True,
        description="with `compress`, ranks passages by cosine similarity to the question; "
        "`None`: BM25 over the question's words",
        json_schema_extra=_accepts("`list[str] -> list[list[float]]`"),
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
        "current one was sent: an abstention, flagged, or not checked (`off`)",
    )
    unsupported_facts: FlagPolicy = Field(
        "flag",
        description="an answer resting on a fact whose words, numbers or dates its cited text "
        "does not hold: flagged, an abstention, or not checked (`off`)",
    )
    uncovered_question: FlagPolicy = Field(
        "off",
        description="an answer whose cited sources hold fewer than 2 in 3 of the (English) "
        "question's words: not checked (`off`, it flags too many right answers), flagged, or "
        "an abstention; unset, the model's own",
    )
    contested_facts: FlagPolicy = Field(
        "flag",
        description="an answer resting on a fact with a verified citation the reader marked "
        "`contradicts`: flagged, an abstention, or not checked (`off`)",
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
    compress: bool
    embedder: Callable[[list[str]], list[list[float]]] | None
    min_reader_confidence: float | None
    non_current_evidence: FlagPolicy
    unsupported_facts: FlagPolicy
    uncovered_question: FlagPolicy
    contested_facts: FlagPolicy
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
