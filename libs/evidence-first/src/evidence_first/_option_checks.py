"""The options' checks: each failure an :class:`InvalidRequestError` naming its option.

:class:`OptionChecks` holds the validators that :class:`~evidence_first._options.AnswerOptionFields`
inherits. An option of a choice (a ``Literal``), a bounded ``int``, a bounded ``float`` (or
``float | None``) or a ``bool`` is checked by its declaration alone; the options with other
rules have a check of their own here, by name.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from evidence_first._errors import InvalidRequestError
from evidence_first._evidence import format_timestamp
from evidence_first._request import checked_int
from evidence_first._text import has_text, is_unicode_text

__all__ = ["OptionChecks", "option_bounds", "option_error"]


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
