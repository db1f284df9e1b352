r"""Defences against instructions planted in sources: the sent form, and what gets flagged.

The sent form is how caller text appears in the prompt. It differs from the caller's text
only by documented mappings, and never in what is verified: every citation is checked against,
and gives offsets into, the caller's original text.

- **Control strings never act as control tokens.** Chat-model servers (llama.cpp, vLLM)
  tokenize chat-template strings such as ``<|im_end|>`` or ``<end_of_turn>`` inside message
  content as the template's special tokens, so a source could close its own turn and open a
  forged one. In the JSON text of the user message every ``<`` and ``>`` is written as the
  JSON escape ``\u003c`` / ``\u003e``, and the ``[`` of a bracketed control word such as
  ``[INST]`` as ``\u005b``. A JSON reader decodes them back to exactly the caller's
  characters, and a model that copies a quote may write either form: the ledger's JSON decodes
  both to the same string.
- **Datamarking** (Hines et al., 2024, "Defending Against Indirect Prompt Injection Attacks
  With Spotlighting"), in passage mode only: every space of a passage's text is sent as
  U+02C6 MODIFIER LETTER CIRCUMFLEX ACCENT, and the system prompt says that marked text is
  source data. The model cites labels, never copies text, so the spans still come from the
  caller's original text.

A cited span whose sentences hold a known control string or an instruction-like phrase is
flagged in its ``CitationCheck.flags``: a diagnostic for people and policies, never a change
to the verdict or the text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, fields

from evidence_first._sending.passages import passages_around
from evidence_first._shapes.vocabulary import CitationFlag

__all__ = [
    "DATAMARK",
    "DEFAULT_DEFENCES",
    "Defences",
    "datamark",
    "escape_controls",
    "flags_of",
    "flags_of_spans",
    "touching_of",
]


@dataclass(frozen=True)
class Defences:
    """The injection defences a request is built with.

    The defaults are what every request gets, chosen by ``benchmarks/injection.py``; the
    other settings exist so that it can measure each defence against its absence.

    Attributes:
        escape_controls: Write ``<``, ``>`` and ``[INST]``-like brackets in caller text as JSON
            escapes, so no chat-template control string acts as a control token.
        datamark: In passage mode, send every space of a passage's text as U+02C6
            (:data:`DATAMARK`). Quote mode never datamarks: its model copies text, and a
            marked copy is no excerpt of the caller's text.
        restate_rules: Restate after the question that the sources are data. Measured, and
            off: it raised attack success on the embedded reader.
    """

    escape_controls: bool = True
    datamark: bool = True
    restate_rules: bool = False

    def version_suffix(self, applied: Collection[str]) -> str:
        """How the ``applied`` settings differ from the defaults, for the prompt version."""
        default = Defences()
        changed = [
            f"{field.name}={'on' if getattr(self, field.name) else 'off'}"
            for field in fields(self)
            if field.name in applied and getattr(self, field.name) != getattr(default, field.name)
        ]
        return "".join(f"+{change}" for change in changed)


DEFAULT_DEFENCES = Defences()

DATAMARK = "\u02c6"
"""The character every space of a passage's text is sent as, when datamarking."""

# Outside string values, the JSON this package writes holds only ``{}[],:"`` and literals, and
# a structural ``[`` is followed by ``{``, ``"``, ``]`` or a line break. So every ``<`` and
# ``>`` in it, and every ``[`` that opens a bracketed upper-case word, is inside a string.
_TO_ESCAPE = re.compile(r"[<>]|\[(?=/?[A-Z][A-Z_]*\])")
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "[": "\\u005b"}

# Chat-template control strings of common open-weight families: ChatML and Llama 3 style
# ``<|...|>``, DeepSeek's ``<...>`` with full-width bars (U+FF5C), Gemma's turn markers,
# SentencePiece ``<s>`` ``</s>``, and Mistral's bracketed words.
_CONTROL_STRING = re.compile(
    r"<\|[^<>|\s]{1,48}\|>"
    r"|<\uff5c[^<>\uff5c]{1,48}\uff5c>"
    r"|</?(?:start_of_turn|end_of_turn|bos|eos|pad|s)>"
    r"|\[/?(?:INST|SYSTEM_PROMPT|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS)\]"
)

# Phrases that address the model rather than state a fact. A heuristic for flagging only:
# English plus the languages of the project's injection set.
_INSTRUCTION_LIKE = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b.{0,40}\b(?:instructions?|rules?|prompts?)\b"
    r"|\b(?:system|developer|admin(?:istrator)?)\s+(?:note|message|prompt|override|instruction)"
    r"|\b(?:answer|reply|respond)\s+(?:every|all|any|each)\s+questions?\b"
    r"|\b(?:you\s+are\s+now|new\s+instructions?|from\s+now\s+on,?\s+you)\b"
    r"|\b(?:print|reveal|show)\s+(?:your|the)\s+system\s+prompt\b"
    r"|\bignorier(?:e|en)\b|\bignora\b|\bignorez\b|\bignorer\b"
    r"|忽略|无视|指示を無視|以前の指示",
    re.IGNORECASE | re.DOTALL,
)


def escape_controls(json_text: str) -> str:
    """Write ``<``, ``>`` and the ``[`` of ``[INST]``-like words in JSON text as escapes.

    ``json_text`` must be JSON written by this package (see the module docstring); the
    result decodes to the same value.
    """
    return _TO_ESCAPE.sub(lambda match: _ESCAPES[match.group()], json_text)


def datamark(text: str) -> str:
    """Send every space of ``text`` as :data:`DATAMARK`."""
    return text.replace(" ", DATAMARK)


def flags_of(text: str) -> tuple[CitationFlag, ...]:
    """The flags a cited span earns: a control string, an instruction-like phrase, or both."""
    flags: list[CitationFlag] = []
    if _CONTROL_STRING.search(text):
        flags.append("control_string")
    if _INSTRUCTION_LIKE.search(text):
        flags.append("instruction_like")
    return tuple(flags)


Touching = Callable[[int, int], Iterable[tuple[int, int]]]
"""Given a span, the bounds of the text's sentences (passages) it touches."""


def flags_of_spans(
    text: str, spans: Iterable[tuple[int, int]], touching: Touching | None = None
) -> tuple[CitationFlag, ...]:
    """The flags of cited ``[start, end)`` spans of ``text``, judged on their sentences.

    A sentence is a passage, as passage mode cuts it. ``touching`` finds the sentences a span
    touches (a citation style's, from passages already cut); by default they are cut from the
    span's neighbourhood alone (:func:`~evidence_first._sending.passages.passages_around`). Either
    way
    the cost grows with the cited text, not the whole text. A quote of a few words from a
    planted instruction ("Harbor is cancelled") reads like nothing on its own; its sentence does.
    """
    find = touching or (lambda start, end: passages_around(text, start, end))
    touched = sorted({sentence for start, end in spans for sentence in find(start, end)})
    return flags_of("\n".join(text[start:end] for start, end in touched))


def touching_of(sentences: Sequence[tuple[int, int]]) -> Touching:
    """A :data:`Touching` over sentences already cut (in order): a binary search per span."""
    ends = [end for _, end in sentences]

    def touching(start: int, end: int) -> Iterable[tuple[int, int]]:
        index = bisect.bisect_right(ends, start)
        while index < len(sentences) and sentences[index][0] < end:
            yield sentences[index]
            index += 1

    return touching
