"""Map retrieved LlamaIndex nodes to `Evidence`: text without metadata, score, provenance."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore
from llama_index.core.storage.docstore.types import BaseDocumentStore

from evidence_first import Evidence, InvalidRequestError
from evidence_first.adapters import (
    SourceSelection,
    json_safe_metadata,
    metadata_fields,
    select_sources,
)

__all__ = ["DocumentTexts", "MetadataKeys", "NodeSelection", "select_nodes", "to_evidence"]


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
    """Map nodes to evidence, then set aside repeated IDs and nodes past the 64-source limit.

    Raises:
        InvalidRequestError: A node's metadata value mapped to a field is unusable
            (``field`` is ``sources[i].metadata``, ``i`` the node's position in ``nodes``).
    """
    by_id: dict[str, NodeWithScore] = {}
    evidence = []
    for index, node in enumerate(nodes):
        item = to_evidence(node, index, keys, documents)
        by_id.setdefault(item.id, node)
        evidence.append(item)
    return NodeSelection(select_sources(evidence), by_id)


def to_evidence(
    node_with_score: NodeWithScore,
    index: int,
    keys: MetadataKeys,
    documents: DocumentTexts | None = None,
) -> Evidence:
    """Map one retrieved node to `Evidence`, keeping the node for provenance.

    The text is the node's content with ``MetadataMode.NONE``, so no metadata reaches the
    prompt. Speaker, time and status come from metadata keys, and the rest of the metadata is
    kept JSON-safe, by the policy of :mod:`evidence_first.adapters`. With ``documents``, a node
    whose text is exactly its document's slice at its offsets gives its citations offsets into
    that document.

    Raises:
        InvalidRequestError: A metadata value mapped to a field is unusable (a status outside
            the three, a naive or unparsable time...): ``field`` is ``sources[index].metadata``
            and the message names the key, never the value.
    """
    node = node_with_score.node
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    fields = metadata_fields(
        node.metadata,
        f"sources[{index}]",
        {"speaker": keys.speaker, "observed_at": keys.observed_at, "status": keys.status},
    )
    evidence = Evidence(
        id=node.node_id,
        text=text,
        **fields,
        metadata=json_safe_metadata(node.metadata),
        score=_score(node_with_score.score),
    )
    doc_id, doc_char_start = _document_offset(node_with_score, text, documents)
    if doc_id is None or doc_char_start is None:
        return evidence.with_provenance(node)
    return evidence.with_provenance(node, doc_id=doc_id, doc_char_start=doc_char_start)


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
