"""`Evidence`: one source the caller supplies, and the fields that may reach the model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from evidence_first._shapes.errors import InvalidRequestError

__all__ = [
    "EPOCH",
    "Evidence",
    "EvidenceStatus",
    "check_edges",
    "evidence_error",
    "format_timestamp",
    "parse_timestamp",
    "positional_id",
    "source_evidence",
]

EvidenceStatus = Literal["current", "superseded", "contradicted"]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
"""Time zero of Unix milliseconds."""


def format_timestamp(value: int | datetime) -> str:
    """Render Unix milliseconds or an aware datetime as ISO 8601 UTC with a ``Z`` suffix.

    Raises:
        OverflowError: The milliseconds are outside the range of ``datetime``.
    """
    moment = EPOCH + timedelta(milliseconds=value) if isinstance(value, int) else value
    utc = moment.astimezone(timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(text: str) -> datetime:
    """Parse ISO 8601, a final ``Z`` included (which Python 3.10's ``fromisoformat`` rejects).

    Raises:
        ValueError: ``text`` is not ISO 8601.
    """
    return datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] == "Z" else text)


class Evidence(BaseModel):
    """One source of evidence, sent to the model as data.

    Only ``id``, ``text``, ``speaker``, ``observed_at`` and ``status`` are serialized into the
    prompt. ``metadata`` and ``score`` stay on this side, for provenance and filtering.
    Construction checks types only; the contract limits (text size, source count, duplicate
    IDs, an ``observed_at`` within UTC's years 1 to 9999, metadata without a NaN or an
    infinity) are checked by :func:`~evidence_first.answer_from_evidence`.

    Attributes:
        id: Non-empty, unique within one request; preserved exactly.
        text: The source text, preserved exactly (no normalization).
        speaker: Who said or wrote it, if known.
        observed_at: When it was said: Unix milliseconds, or an aware ``datetime``. An ISO 8601
            string with a UTC offset is accepted and parsed.
        status: ``"current"``, ``"superseded"`` or ``"contradicted"``, if known.
        metadata: JSON-safe provenance (title, URL, scope...). Never sent to the model.
        score: Retrieval score, higher is better. Never sent to the model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: StrictStr
    text: StrictStr
    speaker: StrictStr | None = None
    observed_at: StrictInt | datetime | None = None
    status: EvidenceStatus | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    score: float | None = Field(default=None, allow_inf_nan=False)

    # Provenance kept on this side only: the framework object this evidence was made from (a
    # LangChain Document, a LlamaIndex node), and where its text starts in a larger document.
    _source_object: Any = PrivateAttr(default=None)
    _document: tuple[str, int] | None = PrivateAttr(default=None)

    @field_validator("observed_at", mode="before")
    @classmethod
    def _observed_at_is_millis_or_aware(cls, value: object) -> object:
        if value is None or isinstance(value, datetime):
            if isinstance(value, datetime) and value.utcoffset() is None:
                msg = "observed_at must be timezone-aware"
                raise ValueError(msg)
            return value
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            msg = "observed_at must be Unix milliseconds (int) or an aware datetime"
            raise ValueError(msg)
        if isinstance(value, str):
            try:
                parsed = parse_timestamp(value)
            except ValueError:
                msg = "observed_at is not an ISO 8601 timestamp"
                raise ValueError(msg) from None
            if parsed.utcoffset() is None:
                msg = "observed_at must carry a UTC offset"
                raise ValueError(msg)
            return parsed
        return value

    @field_validator("score", mode="before")
    @classmethod
    def _score_is_a_number(cls, value: object) -> object:
        if isinstance(value, bool) or not (value is None or isinstance(value, (int, float))):
            msg = "score must be a number"
            raise ValueError(msg)
        return value

    # Read through __pydantic_private__: plain attribute access to a private attribute goes
    # through BaseModel.__getattr__, which is slow on the verification hot path.
    @property
    def source_object(self) -> Any:
        """The framework object (Document, node) this evidence was made from, if any."""
        return self.__pydantic_private__["_source_object"]  # type: ignore[index]

    @property
    def document(self) -> tuple[str, int] | None:
        """``(doc_id, char_start)``: where ``text`` starts in a larger original document."""
        document: tuple[str, int] | None = self.__pydantic_private__["_document"]  # type: ignore[index]
        return document

    def with_provenance(
        self,
        source_object: Any = None,
        *,
        doc_id: str | None = None,
        doc_char_start: int | None = None,
    ) -> Evidence:
        """Return a copy that remembers where this evidence came from.

        Args:
            source_object: The framework object it was made from; reachable from the answer.
            doc_id: The original document's ID, when ``text`` was cut from a larger document.
            doc_char_start: The code-point offset in that document where ``text`` starts, so
                ``document_text[doc_char_start:doc_char_start + len(text)] == text``. Each
                citation then also gives its span in the original document.
        """
        if (doc_id is None) != (doc_char_start is None):
            msg = "doc_id and doc_char_start are given together"
            raise ValueError(msg)
        if doc_char_start is not None and (
            isinstance(doc_char_start, bool)
            or not isinstance(doc_char_start, int)
            or doc_char_start < 0
        ):
            msg = "doc_char_start must be a non-negative int"
            raise ValueError(msg)
        attached = self.model_copy()
        attached._source_object = source_object
        attached._document = (
            None if doc_id is None or doc_char_start is None else (doc_id, doc_char_start)
        )
        return attached


def source_evidence(item: object, index: int) -> Evidence:
    """The source at ``index`` of a caller's list, as evidence: what a source may be.

    The one rule for the core and the integrations: an :class:`Evidence` is taken as it is, a
    mapping is read as its fields, and a plain string is the text of a source whose ID is its
    position, :func:`positional_id` (``doc-1`` for the first). An integration reads its own
    objects (a LangChain ``Document``) first and hands the rest here.

    Raises:
        InvalidRequestError: The item is none of the three, or a mapping that is not valid
            evidence (``field`` is ``sources[index]``; the message names fields, never values).
    """
    if isinstance(item, Evidence):
        return item
    field = f"sources[{index}]"
    if isinstance(item, str):
        return Evidence(id=positional_id(index), text=item)
    if isinstance(item, Mapping):
        try:
            return Evidence.model_validate(dict(item))
        except ValidationError as exc:
            raise evidence_error(field, exc) from None
    msg = f"{field} must be Evidence, a mapping or a string, got {type(item).__name__}"
    raise InvalidRequestError(msg, field=field)


def check_edges(evidence: Evidence, field: str) -> None:
    """``observed_at`` a moment of UTC's years 1 to 9999, and ``metadata`` JSON.

    The call checks them (construction checks types only), and so does a stored answer's
    load, for the sources it keeps. Unix milliseconds past
    ``datetime``'s range, or an aware time that is no UTC moment (year 9999 at -14:00), would
    raise ``OverflowError`` where it is written in UTC; a NaN or an infinity in the metadata
    would reach ``as_dict()`` as ``NaN``, which is not JSON. Messages name the field, never
    the value.

    Raises:
        InvalidRequestError: Either is not so; ``field`` names it (``sources[0].metadata``).
    """
    if evidence.observed_at is not None:
        try:
            format_timestamp(evidence.observed_at)
        except OverflowError:
            msg = f"{field}.observed_at is out of range: no moment of UTC's years 1 to 9999"
            raise InvalidRequestError(msg, field=f"{field}.observed_at") from None
    try:
        # Only what JSON cannot carry is refused here: an object pydantic serializes (in an
        # Evidence built with model_construct) is its concern, written as null for this check.
        json.dumps(evidence.metadata, allow_nan=False, default=lambda _: None)
    except ValueError:
        msg = f"{field}.metadata is not JSON: it holds a NaN, an infinity or a reference cycle"
        raise InvalidRequestError(msg, field=f"{field}.metadata") from None


def positional_id(index: int) -> str:
    """The ID of a source that brings none, by its position: ``doc-1``, ``doc-2``..."""
    return f"doc-{index + 1}"


def evidence_error(field: str, exc: ValidationError) -> InvalidRequestError:
    """The typed error for evidence that failed validation: fields and kinds, never values."""
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'source'}: {error['type']}"
        for error in exc.errors(include_url=False, include_input=False)
    )
    return InvalidRequestError(f"{field} is not valid evidence ({problems})", field=field)
