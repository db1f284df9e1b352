"""The versioned system prompt, and the user message with the sources serialized as JSON data."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

from evidence_first._sending import prompt_text as text
from evidence_first._sending.injection import DEFAULT_DEFENCES, Defences, escape_controls
from evidence_first._shapes.evidence import Evidence, format_timestamp
from evidence_first._shapes.limits import MAX_FACTS
from evidence_first._shapes.markers import UNMARKED_SUFFIX

if TYPE_CHECKING:
    from evidence_first._sending.citing.base import CitationStyle
    from evidence_first._sending.options import AnswerOptions

__all__ = [
    "COMPRESSED_SUFFIX",
    "UserMessage",
    "prompt_order",
    "serialize_source",
    "system_prompt",
]

COMPRESSED_SUFFIX = "+compressed"
"""The prompt version's suffix when a compressed source was sent (its elision rule added)."""


def system_prompt(
    style: CitationStyle,
    defences: Defences = DEFAULT_DEFENCES,
    *,
    enforced_markers: bool = True,
    stance: bool = True,
    compressed: bool = False,
) -> tuple[str, str]:
    """The system prompt and its version for a citation style and set of defences.

    Its text and the style's version are declared in :mod:`evidence_first._sending.prompt_text`.

    No worked example: small models copy an example's content verbatim, and in passage mode
    a copied example lands on real labels and verifies, answering with facts no source
    states. The shape is described in words; schema-enforcing providers get it from the
    request schema.

    Args:
        style: The citation style.
        defences: The injection defences.
        enforced_markers: Whether the provider enforces the answer's shape (its dialect reads
            patterns): then the answer's claims are asked to end with fact markers
            (:data:`~evidence_first._sending.prompt_text.MARKER_RULE`). Otherwise no markers are
            asked
            for (a model without the grammar wrote markers alone as its answer), and the
            version ends with :data:`~evidence_first._shapes.markers.UNMARKED_SUFFIX`.
        stance: Whether a stance per citation is asked for (the model's profile's
            ``writes_stance``). Otherwise the prompt is the style's of before the key, under
            its own version.
        compressed: Whether a compressed source is sent: then the style's elision rule
            follows its rules, and the version carries :data:`COMPRESSED_SUFFIX` (before
            ``+unmarked``), so that the base versions name the same text as before.
    """
    rule = f" {text.MARKER_RULE}" if enforced_markers else ""
    answer_keys = Template(text.ANSWER_KEYS).substitute(marker_rule=rule, max_facts=MAX_FACTS)
    rules = Template(text.SYSTEM_RULES).substitute(stance_rule=text.STANCE_RULE if stance else "")
    facts_rule = style.facts_rule if stance else style.facts_rule_without_stance
    system = rules + facts_rule + answer_keys + style.rules(defences)
    base = style.prompt_version if stance else style.prompt_version_without_stance
    version = base + defences.version_suffix(style.defences)
    if compressed:
        system += style.elision_rule
        version += COMPRESSED_SUFFIX
    return system, version if enforced_markers else version + UNMARKED_SUFFIX


def prompt_order(sources: Sequence[Evidence], serialized: Sequence[str]) -> list[str]:
    """The sent sources' serialized forms in the order the prompt lists them.

    Sources with status ``"current"`` or none come first, then ``"superseded"`` and
    ``"contradicted"`` ones; each group keeps the packing order. The embedded reader tends to
    answer from the first source that states a value, whatever the status rule says: on the
    tune half, of the six questions for today's value whose superseded source came first, it
    gave the superseded value in 5 in quote mode and 3 in passage mode. Only the order the
    model reads changes: packing, ``used_source_ids``, the request schema and the result keep
    the packing order.
    """
    ranked = sorted(
        zip(sources, serialized, strict=True),
        key=lambda pair: pair[0].status not in (None, "current"),
    )
    return [item for _, item in ranked]


def serialize_source(
    evidence: Evidence,
    text_fields: Mapping[str, Any] | None = None,
    defences: Defences = DEFAULT_DEFENCES,
) -> str:
    """Serialize one source exactly as it appears in the prompt: only the fields the model sees.

    ``text_fields`` are the text as the citation style sends it (default: ``{"text": ...}``).
    The result is the sent form: ``defences`` escape control strings.
    """
    item: dict[str, Any] = {"id": evidence.id}
    if evidence.speaker is not None:
        item["speaker"] = evidence.speaker
    if evidence.observed_at is not None:
        item["observed_at"] = format_timestamp(evidence.observed_at)
    if evidence.status is not None:
        item["status"] = evidence.status
    item.update({"text": evidence.text} if text_fields is None else text_fields)
    return _sent_json(item, defences)


def _line(template: str, **values: str) -> str:
    """One line of the user message's frame, its ``$`` names filled in."""
    return Template(template).substitute(values)


def _sent_json(value: object, defences: Defences) -> str:
    encoded = json.dumps(value, ensure_ascii=False)
    return escape_controls(encoded) if defences.escape_controls else encoded


@dataclass(frozen=True)
class UserMessage:
    """The user message around the sources: the sources array first, then the question.

    The question comes last, where a small model reads it right before it answers. Every
    caller-supplied string is JSON-encoded (and, with ``defences.escape_controls``, its
    control strings escaped), so no question or source text can close or forge the framing
    around it.

    Attributes:
        head: The text before the serialized sources.
        tail: The text after them: question time, policies, language and the question.
    """

    head: str
    tail: str

    @classmethod
    def of(cls, question: str, options: AnswerOptions) -> UserMessage:
        """Render the framing for a question and its policies once.

        The options read are ``output_language``, ``question_time``, ``knowledge`` and the
        injection defences.
        """
        defences, output_language = options.defences, options.output_language
        question_time = options.question_time_text
        language = (
            text.QUESTION_LANGUAGE
            if output_language is None
            else _sent_json(output_language, defences)
        )
        lines = []
        if question_time is not None:
            lines.append(_line(text.QUESTION_TIME_LINE, question_time=question_time))
        lines.extend(
            [
                _line(text.KNOWLEDGE_POLICY_LINE, policy=text.POLICY_TEXT[options.knowledge]),
                _line(text.ANSWER_LANGUAGE_LINE, language=language),
                _line(text.QUESTION_LINE, question=_sent_json(question, defences)),
            ]
        )
        if defences.restate_rules:
            lines.append(text.RESTATED_RULES)
        return cls(head=text.SOURCES_HEADER + "\n[\n", tail="\n]\n" + "\n".join(lines))

    def with_sources(self, serialized_sources: Sequence[str]) -> str:
        """The whole message, with the sources as a JSON array, one per line.

        Built one source at a time: joining megabytes of sources in one call would hold the
        interpreter lock, and so an event loop waiting on the planning thread, for as long.
        """
        message = self.head
        for index, source in enumerate(serialized_sources):
            if index:
                message += ",\n"
            message += source
        return message + self.tail

    @property
    def frame(self) -> str:
        """The message without any source: what the question and its policies cost."""
        return self.head + self.tail
