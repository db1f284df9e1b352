"""Render an answer for people: Markdown or HTML, numbered citations, cited spans highlighted.

All source text and model output is escaped: a source containing ``<script>`` renders as text.
Each citation is shown inside an excerpt of its source, with the exact span
``source.text[char_start:char_end]`` highlighted.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from evidence_first._answer import Citation, EvidenceAnswer
from evidence_first._evidence import Evidence
from evidence_first._injection import FLAG_DESCRIPTIONS, CitationFlag
from evidence_first._prompt import format_timestamp

__all__ = ["render_html", "render_markdown"]

_CONTEXT_CHARS = 80
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&])")
_LINE_ENDING = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class _Excerpt:
    number: int
    citation: Citation
    source: Evidence
    before: str
    after: str
    flags: tuple[CitationFlag, ...]

    def warnings(self) -> list[str]:
        return [f"flagged: the span {FLAG_DESCRIPTIONS[flag]}" for flag in self.flags]


def _excerpts(answer: EvidenceAnswer, context_chars: int) -> tuple[list[_Excerpt], dict[int, int]]:
    """Number each distinct cited span once, in order of first appearance."""
    numbers: dict[tuple[str, int, int], int] = {}
    flags: dict[tuple[str, int, int], tuple[CitationFlag, ...]] = {}
    for check in answer.citation_checks:
        if check.citation is not None and check.flags:
            c = check.citation
            flags[(c.source_id, c.char_start, c.char_end)] = check.flags
    excerpts: list[_Excerpt] = []
    by_citation: dict[int, int] = {}
    for fact in answer.facts:
        for citation in fact.citations:
            key = (citation.source_id, citation.char_start, citation.char_end)
            if key not in numbers:
                source = answer.source(citation.source_id)
                text = source.text
                start = max(0, citation.char_start - context_chars)
                end = min(len(text), citation.char_end + context_chars)
                numbers[key] = len(excerpts) + 1
                excerpts.append(
                    _Excerpt(
                        number=numbers[key],
                        citation=citation,
                        source=source,
                        before=("…" if start > 0 else "") + text[start : citation.char_start],
                        after=text[citation.char_end : end] + ("…" if end < len(text) else ""),
                        flags=flags.get(key, ()),
                    )
                )
            by_citation[id(citation)] = numbers[key]
    return excerpts, by_citation


def _source_label(source: Evidence) -> list[str]:
    parts = []
    if source.speaker:
        parts.append(source.speaker)
    if source.observed_at is not None:
        parts.append(format_timestamp(source.observed_at))
    if source.status:
        parts.append(source.status)
    return parts


def render_html(answer: EvidenceAnswer, *, context_chars: int = _CONTEXT_CHARS) -> str:
    """Render ``answer`` as a self-contained HTML fragment.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
    """
    e = html.escape
    excerpts, numbers = _excerpts(answer, context_chars)

    def refs(citations: tuple[Citation, ...]) -> str:
        unique = dict.fromkeys(numbers[id(c)] for c in citations)
        return "".join(f'<sup><a href="#evidence-{n}">[{n}]</a></sup>' for n in unique)

    all_citations = tuple(c for fact in answer.facts for c in fact.citations)
    parts = [f'<div class="evidence-answer status-{e(answer.status)}">']
    parts.append(f'<p class="status"><strong>{e(answer.status)}</strong></p>')
    if answer.answer is not None:
        parts.append(f'<p class="answer">{e(answer.answer)}{refs(all_citations)}</p>')
    if answer.inference is not None:
        parts.append(f'<p class="inference"><em>Inference:</em> {e(answer.inference)}</p>')
    if answer.facts:
        parts.append('<ol class="facts">')
        parts.extend(
            f"<li>{e(f.subject)} — {e(f.relation)} — {e(f.object)}{refs(f.citations)}</li>"
            for f in answer.facts
        )
        parts.append("</ol>")
    if answer.missing_evidence:
        parts.append('<p class="missing">Missing evidence:</p><ul class="missing">')
        parts.extend(f"<li>{e(item)}</li>" for item in answer.missing_evidence)
        parts.append("</ul>")
    if answer.validation_errors:
        parts.append('<p class="rejected">Rejected:</p><ul class="rejected">')
        parts.extend(
            f"<li><code>{e(issue.code)}</code> at <code>{e(issue.path)}</code>: "
            f"{e(issue.detail)}</li>"
            for issue in answer.validation_errors
        )
        parts.append("</ul>")
    if answer.diagnostic:
        parts.append(f'<p class="diagnostic">{e(answer.diagnostic)}</p>')
    if excerpts:
        parts.append('<ol class="citations">')
        for item in excerpts:
            c = item.citation
            label = " · ".join(e(part) for part in _source_label(item.source))
            parts.append(
                f'<li id="evidence-{item.number}"><code>{e(c.source_id)}</code>'
                f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
                + "".join(f' <strong class="flag">⚠ {e(w)}</strong>' for w in item.warnings())
                + f"<blockquote>{e(item.before)}<mark>{e(c.quote)}</mark>{e(item.after)}"
                "</blockquote></li>"
            )
        parts.append("</ol>")
    parts.append("</div>")
    return "\n".join(parts)


def _one_line(text: str) -> str:
    """Every CommonMark line ending (LF, CR, CRLF) as a space: no string can end our line."""
    return _LINE_ENDING.sub(" ", text)


def _md(text: str) -> str:
    """Escape Markdown and inline HTML; keep the text on one line."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _one_line(text))


def _code(text: str) -> str:
    """A code span of ``text``: on one line, without the backticks that would close it."""
    return f"`{_one_line(text).replace('`', '')}`"


def render_markdown(answer: EvidenceAnswer, *, context_chars: int = _CONTEXT_CHARS) -> str:
    """Render ``answer`` as Markdown; each cited span is bold inside its source excerpt.

    Args:
        answer: The answer to render.
        context_chars: Characters of source text shown on each side of a cited span.
    """
    excerpts, numbers = _excerpts(answer, context_chars)

    def refs(citations: tuple[Citation, ...]) -> str:
        return "".join(f"[{n}]" for n in dict.fromkeys(numbers[id(c)] for c in citations))

    all_citations = tuple(c for fact in answer.facts for c in fact.citations)
    lines = [f"**Status:** `{answer.status}`", ""]
    if answer.answer is not None:
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
            f"- `{issue.code}` at `{issue.path}`: {_md(issue.detail)}"
            for issue in answer.validation_errors
        ]
        lines.append("")
    if answer.diagnostic:
        lines += [f"_{_md(answer.diagnostic)}_", ""]
    for item in excerpts:
        c = item.citation
        label = " · ".join(_md(part) for part in _source_label(item.source))
        lines.append(
            f"[{item.number}] {_code(c.source_id)}"
            f"{' · ' + label if label else ''} · chars {c.char_start}-{c.char_end}"
            + "".join(f" · **⚠ {_md(w)}**" for w in item.warnings())
        )
        lines.append(f"> {_md(item.before)}**{_md(c.quote)}**{_md(item.after)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
