"""Write the excerpts of the READMEs and docs pages from the files they are copied from.

A page holds its code and text itself, so that it reads the same on GitHub as on the site; what
it copies from a recipe or another page is marked, and ``tests/test_docs.py`` checks that each
copy equals its source. Two forms:

- A fenced block right under ``<!-- excerpt: <path>[:<section>[+<section>...]] -->`` holds
  those sections of the file, each marked in it by ``--8<-- [start:<section>]`` and
  ``--8<-- [end:<section>]`` (dedented, joined by two blank lines), or the whole file when no
  section is named.
- Text between ``<!-- excerpt: <path>:<section> -->`` and ``<!-- end excerpt -->`` holds that
  section of a Markdown file.

Run from the workspace root after changing a recipe or a copied section (``--check`` only
reports the pages that differ)::

    uv run python docs/scripts/excerpts.py [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[2]
MARKER = re.compile(r"^<!-- excerpt: (?P<path>[^:\s]+)(?::(?P<sections>[\w+-]+))? -->\s*$")
END = "<!-- end excerpt -->"
FENCE = re.compile(r"^(`{3,})")


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold excerpts: the READMEs GitHub and PyPI show, and the docs site."""
    return [
        root / "README.md",
        *sorted(root.glob("libs/*/README.md")),
        *sorted(root.glob("integrations/*/README.md")),
        *sorted((root / "docs").glob("*.md")),
    ]


def section(path: str, name: str, root: Path = ROOT) -> str:
    """The lines between a file's ``--8<-- [start:<name>]`` and ``[end:<name>]``, dedented."""
    text = (root / path).read_text(encoding="utf-8")
    match = re.search(
        rf"^[^\n]*--8<-- \[start:{name}\][^\n]*\n(.*?)^[^\n]*--8<-- \[end:{name}\]",
        text,
        re.DOTALL | re.MULTILINE,
    )
    if match is None:
        msg = f"{path} has no section {name!r}"
        raise ValueError(msg)
    body = "\n".join(line for line in match.group(1).splitlines() if "--8<--" not in line)
    return textwrap.dedent(body).strip("\n") + "\n"


def excerpt(path: str, sections: str | None, root: Path = ROOT) -> str:
    """What an excerpt of ``path`` holds: the named sections, or the whole file."""
    if sections is None:
        return (root / path).read_text(encoding="utf-8")
    return "\n\n".join(section(path, name, root) for name in sections.split("+"))


def refresh(text: str, root: Path = ROOT) -> str:
    """``text`` with every excerpt rewritten from its source."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        marker = MARKER.match(line)
        if marker is None:
            continue
        copied = excerpt(marker["path"], marker["sections"], root)
        fence = FENCE.match(lines[index]) if index < len(lines) else None
        if fence is not None:  # a code block: keep its fences, replace what is between them
            out.append(lines[index])
            close = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == fence[1])
            out.append(copied)
            index = close
            continue
        close = next((i for i in range(index, len(lines)) if lines[i].strip() == END), None)
        if close is None:
            msg = f"an excerpt of {marker['path']} has no code block under it and no {END}"
            raise ValueError(msg)
        out.append(f"\n{copied}\n")
        index = close
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    """Rewrite every page's excerpts; with ``--check``, list the pages that differ instead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a drift")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        fresh = refresh(text)
        if fresh != text:
            stale.append(page)
            if not args.check:
                page.write_text(fresh, encoding="utf-8")
    for page in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {page.relative_to(ROOT)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
