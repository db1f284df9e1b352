"""The sources each hop offers the answerer: earlier ones first, new ones deduplicated after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import MAX_SOURCES

__all__ = ["Retrieval", "merge"]


@dataclass(frozen=True)
class Retrieval:
    """What one hop's retrievals returned, added and left out past 64, by source ID."""

    hop: int
    queries: tuple[str, ...]
    retrieved_ids: tuple[str, ...]
    new_source_ids: tuple[str, ...]
    dropped_source_ids: tuple[str, ...]


def _identity(item: object, id_key: str | None) -> tuple[str | None, tuple[str, object]]:
    """The ID the answerer gives ``item`` (``None``: by position), and the key it is deduped by."""
    source_id: object = None
    text: object = item
    if isinstance(item, Evidence):
        source_id, text = item.id, item.text
    elif isinstance(item, Document):
        source_id, text = item.id, item.page_content
        if not (isinstance(source_id, str) and source_id) and id_key is not None:
            source_id = (item.metadata or {}).get(id_key)
            if isinstance(source_id, int) and not isinstance(source_id, bool):
                source_id = str(source_id)
    elif isinstance(item, Mapping):
        source_id, text = item.get("id"), item.get("text")
    if isinstance(source_id, str) and source_id:
        return source_id, ("id", source_id)
    # An unsupported item is kept apart by identity, so the answerer's error reports it.
    return None, (("text", text) if isinstance(text, str) else ("object", id(item)))


def merge(
    hop: int,
    queries: tuple[str, ...],
    sources: list[Any],
    found: list[Any],
    id_key: str | None,
) -> tuple[list[Any], Retrieval]:
    """Add what each query found to ``sources``: new items only, in order, at most 64 in all.

    An item is new unless an earlier one has its source ID (``Document.id``, then
    ``metadata[id_key]``) or, without an ID, its text. Items without an ID are named as the
    answerer names them, by their place in the sources (``doc-3``).

    Raises:
        InvalidRequestError: A retrieval returned something other than a list (``retriever``).
    """
    merged = list(sources)
    named: dict[tuple[str, object], str] = {}
    for position, item in enumerate(merged):
        source_id, key = _identity(item, id_key)
        named.setdefault(key, source_id or f"doc-{position + 1}")
    retrieved: list[str] = []
    new: list[str] = []
    dropped: list[str] = []
    for items in found:
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            msg = f"the retriever must return a list of documents, got {type(items).__name__}"
            raise InvalidRequestError(msg, field="retriever")
        for item in items:
            source_id, key = _identity(item, id_key)
            if key not in named:
                # Positional names count the dropped too, as if every item had been offered.
                name = source_id or f"doc-{len(merged) + len(dropped) + 1}"
                named[key] = name
                if len(merged) < MAX_SOURCES:
                    merged.append(item)
                    new.append(name)
                else:
                    dropped.append(name)
            retrieved.append(named[key])
    retrieval = Retrieval(hop, queries, tuple(retrieved), tuple(new), tuple(dropped))
    return merged, retrieval
