"""Render an answer for people: Markdown, HTML or plain text, with cited spans highlighted.

What every rendering shows, in order, is one view of the answer
(:mod:`evidence_first.render._view`):
each cited span inside an excerpt of its source, as ``source.text[char_start:char_end]`` and
never a quote the citation carries, and each segment followed by its spans' numbers or a note.
The renderers here only format its parts. Every string the answer holds (source text, model
output, IDs, anything a stored answer carries) is printed under one rule: control characters,
line separators and the characters that open a bidirectional scope are written as visible
escapes (:func:`~evidence_first.render._escaping.inert`; the terminal report escapes every invisible
character, line feeds included), then escaped for the format, and in HTML isolated in its own
``<bdi>``. So a source containing ``<script>`` renders as text, no string starts a report line
of its own, and none reorders the renderer's text. A bracketed number the model wrote shows as
``(2)`` (:func:`~evidence_first.render._escaping.unbracketed`), so every ``[n]`` is a span's number.
"""

from __future__ import annotations

import html
import json
import secrets
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evidence_first._shapes.evidence import Evidence
from evidence_first._shapes.public import publish
from evidence_first._shapes.vocabulary import FLAG_DESCRIPTIONS
from evidence_first.render._escaping import in_html as _h
from evidence_first.render._escaping import in_markdown as _md
from evidence_first.render._escaping import inert, printable
from evidence_first.render._escaping import markdown_code as _code
from evidence_first.render._view import (
    SEGMENT_NOTES,
    AnswerPart,
    AnswerView,
    CheckView,
    Excerpt,
    FactView,
    answer_view,
    around,
    source_label,
)

if TYPE_CHECKING:
    from evidence_first._engine.result import EvidenceAnswer

__all__ = ["render_html", "render_markdown", "render_text"]

_CONTEXT_CHARS = 80
_TEXT_CONTEXT_CHARS = 60


def _footnotes(numbers: Sequence[int]) -> str:
    """Span numbers as the Markdown and text renderings write them: ``[1][2]``."""
    return "".join(f"[{n}]" for n in numbers)


def _html_links(anchor: str, numbers: Sequence[int]) -> str:
    """Span numbers as superscript links to their excerpts, ``<anchor>-<n>``."""
    return "".join(f'<sup><a href="#{html.escape(anchor)}-{n}">[{n}]</a></sup>' for n in numbers)


def _html_block(opening: str, items: Sequence[str], closing: str) -> list[str]:
    """A list of items between its opening and closing tags; nothing when it has none."""
    return [opening, *items, closing] if items else []


def _html_part(part: AnswerPart, anchor: str) -> str:
    links = _html_links(anchor, part.footnotes)
    if part.note is None:
        return _h(part.text) + links
    note, title = SEGMENT_NOTES[part.note]
    return (
        f'<span class="segment {part.note}" title="{html.escape(title)}">{_h(part.text)}{links}'
        f'<small class="segment-note"> [{html.escape(note)}]</small></span>'
    )


def _html_answer(view: AnswerView, anchor: str) -> list[str]:
    if view.segments is not None:
        shown = "".join(_html_part(part, anchor) for part in view.segments)
    elif view.answer is not None:
        shown = _h(view.answer) + _html_links(anchor, view.footnotes)
    else:
        return []
    return [f'<p class="answer">{shown}</p>']


def _countered(fact: FactView, numbers: str) -> str:
    """The words before a fact's counter-evidence numbers; nothing when it has none."""
    return f" contradicted by {numbers}" if fact.countered else ""


def _html_fact(fact: FactView, anchor: str) -> str:
    countered = _html_links(anchor, fact.counter_numbers)
    return (
        f"<li>{_h(fact.subject)} — {_h(fact.relation)} — {_h(fact.object)}"
        f"{_html_links(anchor, fact.footnotes)}"
        + (f'<small class="countered">{_countered(fact, countered)}</small>' if countered else "")
        + "</li>"
    )


def _html_excerpt(item: Excerpt, anchor: str) -> str:
    e = html.escape
    c = item.citation
    label = " · ".join(_h(part) for part in source_label(item.source))
    excerpt = f"{e(inert(item.before))}<mark>{e(inert(item.span))}</mark>{e(inert(item.after))}"
    return (
        f'<li id="{e(anchor)}-{item.number}"><code>{_h(c.source_id)}</code>'
        f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
        + "".join(f' <strong class="flag">⚠ {e(w)}</strong>' for w in item.warnings())
        + f"<blockquote><bdi>{excerpt}</bdi></blockquote></li>"
    )


def render_html(
    answer: EvidenceAnswer, *, context_chars: int = _CONTEXT_CHARS, anchor: str | None = None
) -> str:
    """Render ``answer`` as a self-contained HTML fragment.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
        anchor: The prefix of the fragment's element IDs (``<anchor>-1``...). By default a
            fresh ``evidence-<random>`` per call, so that two renderings on one page (a
            notebook's cells) never link into each other; pass one for a stable output.
    """
    e = html.escape
    anchor = f"evidence-{secrets.token_hex(4)}" if anchor is None else anchor
    view = answer_view(answer, context_chars)
    parts = [
        f'<div class="evidence-answer status-{e(view.status)}">',
        f'<p class="status"><strong>{e(view.status)}</strong></p>',
        *(f'<p class="note">{e(note)}</p>' for note in view.notes),
        *_html_answer(view, anchor),
    ]
    if view.inference is not None:
        parts.append(f'<p class="inference"><em>Inference:</em> {_h(view.inference)}</p>')
    parts += _html_block(
        '<ol class="facts">', [_html_fact(fact, anchor) for fact in view.facts], "</ol>"
    )
    parts += _html_block(
        '<p class="missing">Missing evidence:</p><ul class="missing">',
        [f"<li>{_h(item)}</li>" for item in view.missing_evidence],
        "</ul>",
    )
    parts += _html_block(
        '<p class="rejected">Rejected:</p><ul class="rejected">',
        [
            f"<li><code>{e(issue.code)}</code> at <code>{_h(issue.path)}</code>: "
            f"{_h(issue.detail)}</li>"
            for issue in view.rejections
        ],
        "</ul>",
    )
    if view.diagnostic:
        parts.append(f'<p class="diagnostic">{_h(view.diagnostic)}</p>')
    parts += _html_block(
        '<ol class="citations">', [_html_excerpt(item, anchor) for item in view.excerpts], "</ol>"
    )
    parts.append("</div>")
    return "\n".join(parts)


def _md_block(heading: str, items: Sequence[str]) -> list[str]:
    """A bold heading, its items and a blank line; nothing when it has no items."""
    return [heading, *items, ""] if items else []


def _md_part(part: AnswerPart) -> str:
    note = f"_{_md(f'[{SEGMENT_NOTES[part.note][0]}]')}_" if part.note else ""
    return " ".join(piece for piece in (_md(part.text), _footnotes(part.footnotes), note) if piece)


def _md_answer(view: AnswerView) -> list[str]:
    if view.segments is not None:
        shown = "".join(_md_part(part) for part in view.segments)
    elif view.answer is not None:
        shown = f"{_md(view.answer)} {_footnotes(view.footnotes)}"
    else:
        return []
    return [f"**Answer:** {shown}".rstrip(), ""]


def _md_excerpt(item: Excerpt) -> list[str]:
    c = item.citation
    label = " · ".join(_md(part) for part in source_label(item.source))
    return [
        f"[{item.number}] {_code(c.source_id)}"
        f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
        + "".join(f" · **⚠ {_md(w)}**" for w in item.warnings()),
        f"> {_md(item.before)}**{_md(item.span)}**{_md(item.after)}",
        "",
    ]


def render_markdown(answer: EvidenceAnswer, *, context_chars: int = _CONTEXT_CHARS) -> str:
    """Render ``answer`` as Markdown; each cited span is bold inside its source excerpt.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
    """
    view = answer_view(answer, context_chars)
    lines = [f"**Status:** `{view.status}`", ""]
    lines += [item for note in view.notes for item in (f"_{_md(note)}_", "")]
    lines += _md_answer(view)
    if view.inference is not None:
        lines += [f"**Inference:** {_md(view.inference)}", ""]
    lines += _md_block(
        "**Facts:**",
        [
            f"{i}. {_md(f.subject)} — {_md(f.relation)} — {_md(f.object)} {_footnotes(f.footnotes)}"
            + _countered(f, _footnotes(f.counter_numbers))
            for i, f in enumerate(view.facts, start=1)
        ],
    )
    lines += _md_block(
        "**Missing evidence:**", [f"- {_md(item)}" for item in view.missing_evidence]
    )
    lines += _md_block(
        "**Rejected:**",
        [
            f"- `{issue.code}` at {_code(issue.path)}: {_md(issue.detail)}"
            for issue in view.rejections
        ],
    )
    if view.diagnostic:
        lines += [f"_{_md(view.diagnostic)}_", ""]
    for item in view.excerpts:
        lines += _md_excerpt(item)
    return "\n".join(lines).rstrip() + "\n"


def _in_context(
    source: Evidence,
    start: int,
    end: int,
    context_chars: int,
    kept: tuple[tuple[int, int], ...] | None,
) -> str:
    text = source.text
    before, after = around(text, start, end, context_chars, kept)
    return printable(f"{before}⟦{text[start:end]}⟧{after}".replace("\n", " "))


def _check_line(item: CheckView, context_chars: int) -> list[str]:
    check, c = item.check, item.check.citation
    if item.source is not None and c is not None:
        label = "" if item.number is None else f"[{item.number}] "
        passages = f" (passages {', '.join(c.passages)})" if c.passages else ""
        stance = ", contradicts its fact" if check.stance == "contradicts" else ""
        return [
            f"    ✓ verified  {label}{printable(c.source_id)}{printable(passages)}{stance}:",
            *(
                f"      chars {span.char_start}-{span.char_end}: "
                + _in_context(item.source, span.char_start, span.char_end, context_chars, item.kept)
                for span in c.evidence_spans
            ),
            *(f"      ⚠ flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in check.flags),
        ]
    quote = item.quote if len(item.quote) <= 120 else item.quote[:117] + "..."
    return [
        f"    ✗ rejected  {printable(item.source_id)}: {check.code}",
        f"      the model quoted: {printable(json.dumps(quote, ensure_ascii=False))}",
    ]


def _check_lines(checks: Sequence[CheckView], context_chars: int) -> list[str]:
    """The verdict on every citation, each distinct block once with a count when it repeats."""
    if not checks:
        return []
    verified = sum(item.check.verdict == "verified" for item in checks)
    lines = [f"Citation checks ({verified} of {len(checks)} verified; diagnostics, not an answer):"]
    blocks = Counter(tuple(_check_line(item, context_chars)) for item in checks)
    for block, count in blocks.items():
        repeat = f"  (the same citation x{count})" if count > 1 else ""
        lines.append(block[0] + repeat)
        lines.extend(block[1:])
    return lines


def _text_part(part: AnswerPart) -> str:
    """A part of the answer, then its footnotes ``[1][2]`` and its note, if any."""
    note = f"[{SEGMENT_NOTES[part.note][0]}]" if part.note else ""
    return " ".join(
        piece for piece in (printable(part.text), _footnotes(part.footnotes), note) if piece
    )


def _text_answer(view: AnswerView) -> list[str]:
    if view.segments is not None:
        return [f"Answer: {''.join(_text_part(part) for part in view.segments)}"]
    return [] if view.answer is None else [f"Answer: {printable(view.answer)}"]


def _folded(lines: Sequence[str]) -> list[str]:
    """Each distinct line once, in first-seen order, with a count when it repeats."""
    counts = Counter(lines)
    seen: set[str] = set()
    folded: list[str] = []
    for line in lines:
        if line not in seen:
            seen.add(line)
            folded.append(line if counts[line] == 1 else f"{line}  (x{counts[line]})")
    return folded


def _fact_lines(facts: Sequence[FactView]) -> list[str]:
    """One line per distinct fact, naming the numbered spans it cites (shown in context below)."""
    p = printable
    lines: Counter[str] = Counter()
    for fact in facts:
        spans, counter = (
            ", ".join(
                f"[{number}] {p(c.source_id)} chars {c.char_start}-{c.char_end}"
                for number, c in cited
            )
            for cited in (fact.cited, fact.countered)
        )
        lines[
            f"{p(fact.subject)} | {p(fact.relation)} | {p(fact.object)}  {spans}"
            + _countered(fact, counter)
        ] += 1
    return [
        f"  Fact {number}: {line}" + (f"  (the same fact x{count})" if count > 1 else "")
        for number, (line, count) in enumerate(lines.items(), start=1)
    ]


def render_text(answer: EvidenceAnswer, *, context_chars: int = _TEXT_CONTEXT_CHARS) -> str:
    """Render ``answer`` as the plain-text report the ``evidence-first`` command prints.

    Safe to print to a terminal. Each verified span is shown inside its source between ``⟦``
    and ``⟧``. Repeated facts, missing-evidence items and citation checks are folded into one
    line with a count, so no line of the model's repeats.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
    """
    p = printable
    view = answer_view(answer, context_chars)
    lines = [f"Question: {p(view.question)}  [{view.citation_mode} mode]"]
    sent = [f"{p(e.id)} ({e.status})" if e.status else p(e.id) for e in view.sent]
    lines.append(f"Sources sent: {', '.join(sent) or '-'}")
    if view.omissions:
        lines.append(
            "Sources omitted: "
            + ", ".join(f"{p(i)} ({reason})" for i, reason in view.omissions.items())
        )
    lines += [f"Status: {view.status}", *view.notes, *_text_answer(view)]
    if view.inference is not None:
        lines.append(f"Inference (not from the sources): {p(view.inference)}")
    lines += _fact_lines(view.facts)
    if view.missing_evidence:
        lines.append("Missing evidence:")
        lines += _folded([f"  - {p(item)}" for item in view.missing_evidence])
    if view.status == "invalid_response":
        lines.append(f"Reason codes: {', '.join(view.reason_codes)}")
        lines += _folded(
            [f"  {issue.code} at {p(issue.path)}: {p(issue.detail)}" for issue in view.rejections]
        )
    if view.diagnostic:
        lines.append(f"Diagnostic: {p(view.diagnostic)}")
    return "\n".join(lines + _check_lines(view.checks, context_chars))


# str(answer) is the text report and notebooks show the HTML view: the result's model holds no
# presentation, so the renderers give it theirs here (the package imports this module).


publish(globals())
