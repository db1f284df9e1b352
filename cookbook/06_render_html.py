"""Recipe 6: render an answer as an HTML page, each cited span highlighted in its source.

For: anyone who shows answers to people: a report, an internal tool, a review queue.

Shows: ``render_html`` in a standalone page, written to the file named on the command line
(default: a temporary file). Each citation's exact span is in a ``<mark>`` inside an excerpt of
its source; all source text and model output is escaped. The answer uses passage mode, where
the model cites labeled passages instead of copying quotes: the embedded reader verifies more
often that way. A rejected answer shows its reason codes instead. A verified citation proves
the span is in the source, not that it supports the answer.

Run: ``uv run python cookbook/06_render_html.py [answer.html]``
"""

from __future__ import annotations

import argparse
import html
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from evidence_first import Evidence, EvidenceAnswer, ReaderModel, answer_from_evidence
from evidence_first.local import LocalModel
from evidence_first.render import render_html

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
  body {{ font-family: system-ui, sans-serif; max-width: 48rem; margin: 2rem auto; }}
  mark {{ background: #fde68a; }}
  blockquote {{ border-left: 3px solid #ccc; margin: 0.5rem 0; padding-left: 0.75rem; }}
</style>
</head>
<body>
<h1>{title}</h1>
{body}
</body>
</html>
"""

SOURCES = [
    Evidence(
        id="standup-04-28",
        text="Standup, April 28. The launch moved to June 15 because the payment provider "
        "needs a security review first. Dana owns the security review.",
        speaker="Ravi",
        observed_at=datetime(2026, 4, 28, 9, 30, tzinfo=timezone.utc),
        status="current",
    ),
    Evidence(
        id="email-priya-05-02",
        text="Subject: budget. The budget review is on Friday, May 8, at 10:00. Priya",
        speaker="Priya",
        observed_at=datetime(2026, 5, 2, 16, 5, tzinfo=timezone.utc),
    ),
]


def write_page(answer: EvidenceAnswer, path: Path) -> None:
    """Write ``answer`` to ``path`` as a standalone HTML page."""
    page = PAGE.format(title=html.escape(answer.question), body=render_html(answer))
    path.write_text(page, encoding="utf-8")


def main(argv: Sequence[str] | None = None, model: ReaderModel | None = None) -> Path:
    """Answer, render and write the page; print and return its path.

    Args:
        argv: Command-line arguments; ``None`` reads ``sys.argv``.
        model: Any reader, such as a running ``LocalModel``; ``None`` starts the default reader.
    """
    parser = argparse.ArgumentParser(description="Render an answer as an HTML page.")
    parser.add_argument("output", nargs="?", type=Path, help="HTML file (default: a temp file)")
    args = parser.parse_args(argv)
    if model is None:
        with LocalModel() as local:
            return main(argv, local)

    answer = answer_from_evidence(
        "When is the launch, and why?",
        SOURCES,
        model,
        citation_mode="passage",
        max_output_tokens=512,  # on a busy CPU the model can take minutes
        timeout=300,
    )
    path: Path = args.output or Path(tempfile.mkdtemp(prefix="evidence-first-")) / "answer.html"
    write_page(answer, path)
    print(f"{answer.status}: wrote {path}")
    return path


if __name__ == "__main__":
    main()
