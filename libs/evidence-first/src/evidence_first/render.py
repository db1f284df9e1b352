"""Render an answer for people: Markdown, HTML or plain text, with cited spans highlighted.

Every string the answer holds (source text, model output, IDs, anything a stored answer carries)
is printed under one rule: control characters, line separators and the characters that open a
bidirectional scope are written as visible escapes (:func:`~evidence_first._rendering.inert`;
the terminal report escapes every invisible character, line feeds included), then escaped for
the format, and in HTML isolated in its own ``<bdi>``. So a source containing ``<script>``
renders as text, no string starts a report line of its own, and none reorders the renderer's
text. Each citation is shown inside an excerpt of its source, with the source's own span
``source.text[char_start:char_end]`` highlighted, never a quote the citation carries. Each
segment of the answer is followed by the numbers of the spans its facts cite; a segment no
marker ties to a fact, or whose facts' cited text lacks their objects, carries a note saying so.
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evidence_first._evidence import Evidence
from evidence_first._rendering import (
    SEGMENT_NOTES,
    AnswerPart,
    answer_parts,
    around,
    excerpts,
    inert,
    notes,
    printable,
    source_label,
)
from evidence_first._vocabulary import FLAG_DESCRIPTIONS

if TYPE_CHECKING:  # types only: the answer renders itself in notebooks with this module
    from evidence_first._answer import Citation, CitationCheck, EvidenceAnswer

__all__ = ["render_html", "render_markdown", "render_text"]

_CONTEXT_CHARS = 80
_TEXT_CONTEXT_CHARS = 60
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&])")
_LINE_ENDING = re.compile(r"\r\n|\r|\n")
_Span = tuple[str, int, int]  # source ID, char_start, char_end


def _h(text: str) -> str:
    """A string of the answer in HTML: inert, escaped, and isolated in its own direction."""
    return f"<bdi>{html.escape(inert(text))}</bdi>"


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
    cited, numbers = excerpts(answer, context_chars)

    def link(n: int) -> str:
        return f'<sup><a href="#{e(anchor)}-{n}">[{n}]</a></sup>'

    def refs(citations: tuple[Citation, ...]) -> str:
        return "".join(map(link, dict.fromkeys(numbers[id(c)] for c in citations)))

    def shown(part: AnswerPart) -> str:
        sup = "".join(map(link, part.footnotes))
        if part.note is None:
            return _h(part.text) + sup
        note, title = SEGMENT_NOTES[part.note]
        return (
            f'<span class="segment {part.note}" title="{e(title)}">{_h(part.text)}{sup}'
            f'<small class="segment-note"> [{e(note)}]</small></span>'
        )

    all_citations = tuple(c for fact in answer.facts for c in fact.citations)
    parts = [f'<div class="evidence-answer status-{e(answer.status)}">']
    parts.append(f'<p class="status"><strong>{e(answer.status)}</strong></p>')
    parts.extend(f'<p class="note">{e(note)}</p>' for note in notes(answer))
    segmented = answer_parts(answer, numbers)
    if segmented is not None:
        parts.append(f'<p class="answer">{"".join(shown(part) for part in segmented)}</p>')
    elif answer.answer is not None:
        parts.append(f'<p class="answer">{_h(answer.answer)}{refs(all_citations)}</p>')
    if answer.inference is not None:
        parts.append(f'<p class="inference"><em>Inference:</em> {_h(answer.inference)}</p>')
    if answer.facts:
        parts.append('<ol class="facts">')
        parts.extend(
            f"<li>{_h(f.subject)} — {_h(f.relation)} — {_h(f.object)}{refs(f.citations)}</li>"
            for f in answer.facts
        )
        parts.append("</ol>")
    if answer.missing_evidence:
        parts.append('<p class="missing">Missing evidence:</p><ul class="missing">')
        parts.extend(f"<li>{_h(item)}</li>" for item in answer.missing_evidence)
        parts.append("</ul>")
    if answer.validation_errors:
        parts.append('<p class="rejected">Rejected:</p><ul class="rejected">')
        parts.extend(
            f"<li><code>{e(issue.code)}</code> at <code>{_h(issue.path)}</code>: "
            f"{_h(issue.detail)}</li>"
            for issue in answer.validation_errors
        )
        parts.append("</ul>")
    if answer.diagnostic:
        parts.append(f'<p class="diagnostic">{_h(answer.diagnostic)}</p>')
    if cited:
        parts.append('<ol class="citations">')
        for item in cited:
            c = item.citation
            label = " · ".join(_h(part) for part in source_label(item.source))
            excerpt = (
                f"{e(inert(item.before))}<mark>{e(inert(item.span))}</mark>{e(inert(item.after))}"
            )
            parts.append(
                f'<li id="{e(anchor)}-{item.number}"><code>{_h(c.source_id)}</code>'
                f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
                + "".join(f' <strong class="flag">⚠ {e(w)}</strong>' for w in item.warnings())
                + f"<blockquote><bdi>{excerpt}</bdi></blockquote></li>"
            )
        parts.append("</ol>")
    parts.append("</div>")
    return "\n".join(parts)


def _one_line(text: str) -> str:
    """Every CommonMark line ending (LF, CR, CRLF) as a space: no string can end our line."""
    return _LINE_ENDING.sub(" ", text)


def _md(text: str) -> str:
    """A string of the answer in Markdown: on one line, inert, Markdown and inline HTML escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", inert(_one_line(text)))


def _code(text: str) -> str:
    """A code span of ``text``: on one line, inert, without the backticks that would close it."""
    return f"`{inert(_one_line(text)).replace('`', '')}`"


def render_markdown(answer: EvidenceAnswer, *, context_chars: int = _CONTEXT_CHARS) -> str:
    """Render ``answer`` as Markdown; each cited span is bold inside its source excerpt.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
    """
    cited, numbers = excerpts(answer, context_chars)

    def refs(citations: tuple[Citation, ...]) -> str:
        return "".join(f"[{n}]" for n in dict.fromkeys(numbers[id(c)] for c in citations))

    def shown(part: AnswerPart) -> str:
        sup = "".join(f"[{n}]" for n in part.footnotes)
        note = f"_{_md(f'[{SEGMENT_NOTES[part.note][0]}]')}_" if part.note else ""
        return " ".join(piece for piece in (_md(part.text), sup, note) if piece)

    all_citations = tuple(c for fact in answer.facts for c in fact.citations)
    lines = [f"**Status:** `{answer.status}`", ""]
    lines += [item for note in notes(answer) for item in (f"_{_md(note)}_", "")]
    segmented = answer_parts(answer, numbers)
    if segmented is not None:
        lines += [f"**Answer:** {''.join(shown(part) for part in segmented)}".rstrip(), ""]
    elif answer.answer is not None:
        lines += [f"**Answer:** {_md(answer.answer)} {refs(all_citations)}".rstrip(), ""]
    if answer.inference is not None:
        lines += [f"**Inference:** {_md(answer.inference)}", ""]
    if answer.facts:
        lines.append("**Facts:**")
        lines += [
            f"{i}. {_md(f.subject)} — {_md(f.relation)} — {_md(f.object)} {refs(f.citations)}"
            for i, f in enumerate(answer.facts, start=1)
        ]
        lines.append("")
    if answer.missing_evidence:
        lines.append("**Missing evidence:**")
        lines += [f"- {_md(item)}" for item in answer.missing_evidence]
        lines.append("")
    if answer.validation_errors:
        lines.append("**Rejected:**")
        lines += [
            f"- `{issue.code}` at {_code(issue.path)}: {_md(issue.detail)}"
            for issue in answer.validation_errors
        ]
        lines.append("")
    if answer.diagnostic:
        lines += [f"_{_md(answer.diagnostic)}_", ""]
    for item in cited:
        c = item.citation
        label = " · ".join(_md(part) for part in source_label(item.source))
        lines.append(
            f"[{item.number}] {_code(c.source_id)}"
            f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
            + "".join(f" · **⚠ {_md(w)}**" for w in item.warnings())
        )
        lines.append(f"> {_md(item.before)}**{_md(item.span)}**{_md(item.after)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _in_context(source: Evidence, start: int, end: int, context_chars: int) -> str:
    text = source.text
    before, after = around(text, start, end, context_chars)
    return printable(f"{before}⟦{text[start:end]}⟧{after}".replace("\n", " "))


def _spans_in_context(
    answer: EvidenceAnswer, citation: Citation, indent: str, context_chars: int, number: str
) -> list[str]:
    source = answer.source(citation.source_id)
    labels = f" (passages {', '.join(citation.passages)})" if citation.passages else ""
    lines = [f"    ✓ verified  {number}{printable(citation.source_id)}{printable(labels)}:"]
    lines.extend(
        f"{indent}chars {span.char_start}-{span.char_end}: "
        f"{_in_context(source, span.char_start, span.char_end, context_chars)}"
        for span in citation.evidence_spans
    )
    return lines


def _check_line(
    answer: EvidenceAnswer, check: CitationCheck, context_chars: int, spans: dict[_Span, int]
) -> list[str]:
    if check.verdict == "verified" and check.citation is not None:
        c = check.citation
        number = spans.get((c.source_id, c.char_start, c.char_end))
        label = "" if number is None else f"[{number}] "
        flags = [f"      ⚠ flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in check.flags]
        return _spans_in_context(answer, c, "      ", context_chars, label) + flags
    quote = check.quote if len(check.quote) <= 120 else check.quote[:117] + "..."
    return [
        f"    ✗ rejected  {printable(check.source_id)}: {check.code}",
        f"      the model quoted: {printable(json.dumps(quote, ensure_ascii=False))}",
    ]


def _text_part(part: AnswerPart) -> str:
    """A part of the answer, then its footnotes ``[1][2]`` and its note, if any."""
    sup = "".join(f"[{n}]" for n in part.footnotes)
    note = f"[{SEGMENT_NOTES[part.note][0]}]" if part.note else ""
    return " ".join(piece for piece in (printable(part.text), sup, note) if piece)


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


def _fact_lines(answer: EvidenceAnswer, numbers: dict[int, int]) -> list[str]:
    """One line per distinct fact, naming the numbered spans it cites (shown in context below)."""
    p = printable
    facts: Counter[str] = Counter()
    for fact in answer.facts:
        spans = ", ".join(
            f"[{numbers[id(c)]}] {p(c.source_id)} chars {c.char_start}-{c.char_end}"
            for c in fact.citations
        )
        facts[f"{p(fact.subject)} | {p(fact.relation)} | {p(fact.object)}  {spans}"] += 1
    return [
        f"  Fact {number}: {line}" + (f"  (the same fact x{count})" if count > 1 else "")
        for number, (line, count) in enumerate(facts.items(), start=1)
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
    cited, numbers = excerpts(answer, context_chars)
    spans = {
        (i.citation.source_id, i.citation.char_start, i.citation.char_end): i.number for i in cited
    }
    lines = [f"Question: {p(answer.question)}  [{answer.citation_mode} mode]"]
    sent = [f"{p(e.id)} ({e.status})" if e.status else p(e.id) for e in answer.evidence]
    lines.append(f"Sources sent: {', '.join(sent) or '-'}")
    if answer.omissions:
        lines.append(
            "Sources omitted: "
            + ", ".join(f"{p(i)} ({reason})" for i, reason in answer.omissions.items())
        )
    lines.append(f"Status: {answer.status}")
    lines.extend(notes(answer))
    segmented = answer_parts(answer, numbers)
    if segmented is not None:
        lines.append(f"Answer: {''.join(_text_part(part) for part in segmented)}")
    elif answer.answer is not None:
        lines.append(f"Answer: {p(answer.answer)}")
    if answer.inference is not None:
        lines.append(f"Inference (not from the sources): {p(answer.inference)}")
    lines.extend(_fact_lines(answer, numbers))
    if answer.missing_evidence:
        lines.append("Missing evidence:")
        lines.extend(_folded([f"  - {p(item)}" for item in answer.missing_evidence]))
    if answer.status == "invalid_response":
        lines.append(f"Reason codes: {', '.join(answer.reason_codes)}")
        lines.extend(
            _folded(
                [
                    f"  {issue.code} at {p(issue.path)}: {p(issue.detail)}"
                    for issue in answer.validation_errors
                ]
            )
        )
    if answer.diagnostic:
        lines.append(f"Diagnostic: {p(answer.diagnostic)}")
    if answer.citation_checks:
        verified = sum(check.verdict == "verified" for check in answer.citation_checks)
        lines.append(
            f"Citation checks ({verified} of {len(answer.citation_checks)} verified; "
            "diagnostics, not an answer):"
        )
        checks = Counter(
            tuple(_check_line(answer, check, context_chars, spans))
            for check in answer.citation_checks
        )
        for block, count in checks.items():
            repeat = f"  (the same citation x{count})" if count > 1 else ""
            lines.append(block[0] + repeat)
            lines.extend(block[1:])
    return "\n".join(lines)
