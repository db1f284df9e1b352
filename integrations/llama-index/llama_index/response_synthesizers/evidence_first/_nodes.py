"""Map retrieved LlamaIndex nodes to `Evidence`: text without metadata, score, provenance."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import get_args

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore
from llama_index.core.storage.docstore.types import BaseDocumentStore
from pydantic import JsonValue

from evidence_first import Evidence, EvidenceStatus, InvalidRequestError
from evidence_first.adapters import SourceSelection, select_sources

__all__ = [
    "DocumentTexts",
    "MetadataKeys",
    "NodeSelection",
    "json_safe_metadata",
    "select_nodes",
    "to_evidence",
]

logger = logging.getLogger("llama_index.response_synthesizers.evidence_first")

_STATUSES: tuple[str, ...] = get_args(EvidenceStatus)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Nested metadata deeper than this is dropped: it is provenance, not a data store, and a
# self-referencing structure must not recurse forever.
_MAX_METADATA_DEPTH = 16


@dataclass(frozen=True)
class MetadataKeys:
    """The node metadata keys read into the fields the model sees.

    Attributes:
        speaker: Key of who said or wrote the text (a string).
        observed_at: Key of when it was said: Unix milliseconds (int), an aware ``datetime``,
            or an ISO 8601 string with a UTC offset.
        status: Key of ``"current"``, ``"superseded"`` or ``"contradicted"``.
    """

    speaker: str = "speaker"
    observed_at: str = "observed_at"
    status: str = "status"

    def __post_init__(self) -> None:
        for name in ("speaker", "observed_at", "status"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                msg = f"{name}_key must be a non-empty string"
                raise InvalidRequestError(msg, field=f"{name}_key")


class DocumentTexts:
    """The original documents' texts at hand, by document ID: passed in, or in a docstore.

    A citation gets offsets into its node's document only when that document's text is here
    and the node's text equals the document's slice at the node's offsets. Offsets alone
    prove nothing: a node edited after parsing (a same-length redaction) keeps them, and
    ``TextNode.hash`` is recomputed from the node's current text.

    Args:
        documents: LlamaIndex documents (their ``doc_id`` and ``text``), or a mapping from
            document ID to text.
        docstore: A docstore holding the original documents by ID (an ingestion pipeline's
            docstore, for example), looked up when ``documents`` lacks one.

    Raises:
        InvalidRequestError: ``documents`` or ``docstore`` is of the wrong type.
    """

    def __init__(
        self,
        documents: Iterable[BaseNode] | Mapping[str, str] | None = None,
        docstore: BaseDocumentStore | None = None,
    ) -> None:
        self._texts: dict[str, str] = {}
        if isinstance(documents, Mapping):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in documents.items()):
                msg = "documents must map document IDs (str) to texts (str)"
                raise InvalidRequestError(msg, field="documents")
            self._texts.update(documents)
        elif documents is not None:
            for document in documents:
                if not isinstance(document, BaseNode):
                    msg = "documents must be LlamaIndex documents or a mapping of ID to text"
                    raise InvalidRequestError(msg, field="documents")
                self._texts[document.node_id] = document.get_content(MetadataMode.NONE)
        if docstore is not None and not isinstance(docstore, BaseDocumentStore):
            msg = f"docstore must be a LlamaIndex docstore, got {type(docstore).__name__}"
            raise InvalidRequestError(msg, field="docstore")
        self._docstore = docstore

    def text(self, doc_id: str) -> str | None:
        """The document's text, or ``None`` when it is not at hand."""
        if doc_id in self._texts:
            return self._texts[doc_id]
        if self._docstore is None:
            return None
        document = self._docstore.get_document(doc_id, raise_error=False)
        return None if document is None else document.get_content(MetadataMode.NONE)


@dataclass(frozen=True)
class NodeSelection:
    """The evidence selection for the core, and each node by the source ID it became.

    Attributes:
        selection: What the core considers, and what was set aside first (``duplicate_id``,
            ``over_source_limit``).
        nodes: The first node retrieved under each source ID.
    """

    selection: SourceSelection
    nodes: Mapping[str, NodeWithScore]

    def sent(self, used_source_ids: Iterable[str]) -> list[NodeWithScore]:
        """The nodes behind the sources the model read, in the order they were sent."""
        return [self.nodes[source_id] for source_id in used_source_ids]


def select_nodes(
    nodes: Sequence[NodeWithScore], keys: MetadataKeys, documents: DocumentTexts | None = None
) -> NodeSelection:
    """Map nodes to evidence, then set aside repeated IDs and nodes past the 64-source limit."""
    by_id: dict[str, NodeWithScore] = {}
    evidence = []
    for node in nodes:
        item = to_evidence(node, keys, documents)
        by_id.setdefault(item.id, node)
        evidence.append(item)
    return NodeSelection(select_sources(evidence), by_id)


def to_evidence(
    node_with_score: NodeWithScore, keys: MetadataKeys, documents: DocumentTexts | None = None
) -> Evidence:
    """Map one retrieved node to `Evidence`, keeping the node for provenance.

    With ``documents``, a node whose text is exactly its document's slice at its offsets
    gives its citations offsets into that document.

    The text is the node's content with ``MetadataMode.NONE``, so no metadata reaches the
    prompt. Metadata values that are unusable for a field (a status outside the three, a naive
    or unparsable timestamp) leave that field unset and are logged by key, never by value.
    """
    node = node_with_score.node
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    metadata = node.metadata
    evidence = Evidence(
        id=node.node_id,
        text=text,
        speaker=_speaker(metadata.get(keys.speaker), node.node_id, keys.speaker),
        observed_at=_observed_at(metadata.get(keys.observed_at), node.node_id, keys.observed_at),
        status=_status(metadata.get(keys.status), node.node_id, keys.status),
        metadata=json_safe_metadata(metadata),
        score=_score(node_with_score.score),
    )
    doc_id, doc_char_start = _document_offset(node_with_score, text, documents)
    if doc_id is None or doc_char_start is None:
        return evidence.with_provenance(node)
    return evidence.with_provenance(node, doc_id=doc_id, doc_char_start=doc_char_start)


def json_safe_metadata(metadata: Mapping[str, object]) -> dict[str, JsonValue]:
    """Keep the JSON-safe metadata entries; drop the rest.

    JSON-safe means strings, finite numbers, booleans, ``None``, and lists, tuples or
    string-keyed dicts of those. Anything else (a datetime, an object) is dropped rather than
    stringified, so no object representation leaks into results; the node itself stays
    reachable through ``EvidenceAnswer.source_object``.
    """
    kept: dict[str, JsonValue] = {}
    for key, value in metadata.items():
        safe, converted = _json_value(value, 0)
        if isinstance(key, str) and safe:
            kept[key] = converted
    return kept


def _json_value(value: object, depth: int) -> tuple[bool, JsonValue]:
    if depth > _MAX_METADATA_DEPTH:
        return False, None
    if value is None or isinstance(value, (str, bool, int)):
        return True, value
    if isinstance(value, float):
        return math.isfinite(value), value
    if isinstance(value, (list, tuple)):
        items: list[JsonValue] = []
        for item in value:
            safe, converted = _json_value(item, depth + 1)
            if not safe:
                return False, None
            items.append(converted)
        return True, items
    if isinstance(value, dict):
        entries: dict[str, JsonValue] = {}
        for key, item in value.items():
            safe, converted = _json_value(item, depth + 1)
            if not isinstance(key, str) or not safe:
                return False, None
            entries[key] = converted
        return True, entries
    return False, None


def _speaker(value: object, node_id: str, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    _log_unusable(node_id, key, "is not a string")
    return None


def _status(value: object, node_id: str, key: str) -> EvidenceStatus | None:
    if value is None:
        return None
    if isinstance(value, str) and value in _STATUSES:
        return value  # type: ignore[return-value]
    _log_unusable(node_id, key, f"is not one of {', '.join(_STATUSES)}")
    return None


def _observed_at(value: object, node_id: str, key: str) -> int | datetime | None:
    if value is None:
        return None
    moment: int | datetime | None = None
    if isinstance(value, (int, datetime)) and not isinstance(value, bool):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if isinstance(moment, datetime) and moment.utcoffset() is None:
        # A naive time is ambiguous by up to a day; leaving it out beats guessing a zone.
        _log_unusable(node_id, key, "has no UTC offset")
        return None
    if moment is None or not _in_range(moment):
        _log_unusable(
            node_id, key, "is not Unix milliseconds, an aware datetime or ISO 8601 with offset"
        )
        return None
    return moment


def _in_range(moment: int | datetime) -> bool:
    try:
        instant = _EPOCH + timedelta(milliseconds=moment) if isinstance(moment, int) else moment
        instant.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return False
    return True


def _score(score: object) -> float | None:
    # Retrievers report numpy floats or ints too; a NaN or infinite score counts as unscored.
    if score is None or isinstance(score, bool):
        return None
    try:
        number = float(score)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _document_offset(
    node_with_score: NodeWithScore, text: str, documents: DocumentTexts | None
) -> tuple[str | None, int | None]:
    """Where ``text`` starts in the node's source document, when that can be checked.

    LlamaIndex's node parsers set ``start_char_idx``/``end_char_idx`` by locating the node's
    text in its source document. They are trusted only when the document's text is at hand
    and its slice at those offsets is exactly the text sent.
    """
    node = node_with_score.node
    doc_id = node.ref_doc_id
    start = getattr(node, "start_char_idx", None)
    end = getattr(node, "end_char_idx", None)
    if (
        documents is None
        or not isinstance(doc_id, str)
        or not isinstance(start, int)
        or not isinstance(end, int)
        or isinstance(start, bool)
        or start < 0
        or end - start != len(text)
    ):
        return None, None
    document = documents.text(doc_id)
    if document is None or document[start:end] != text:
        return None, None
    return doc_id, start


def _log_unusable(node_id: str, key: str, problem: str) -> None:
    # Only the node ID and the key are logged: the value may be private data.
    logger.warning("node %s: metadata[%r] %s; the field is left unset", node_id, key, problem)
