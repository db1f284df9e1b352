"""The README and the docs site: it builds strictly, and every code block in it is run by a test.

A Python block is either executed here (it must run offline, without a model server), or is
an excerpt of a cookbook recipe, which `tests/cookbook` runs: on the site, a snippet include
(`--8<-- "cookbook/<file>.py:<section>"`) of that recipe; in the README, which GitHub renders
without includes, a block after `<!-- excerpt: cookbook/<file>.py:<section> -->` that must equal
the section. A shell block's commands must name what exists: `evidence-first` commands parse
with the CLI's own parser, scripts exist, and installed packages are ours or in the lock file.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from evidence_first import cli

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
# The READMEs GitHub and PyPI show: their Python blocks must be cookbook sections.
READMES = [
    README,
    *sorted(ROOT.glob("libs/*/README.md")),
    *sorted(ROOT.glob("integrations/*/README.md")),
]
PAGES = sorted(DOCS.glob("*.md"))
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"$')
EXCERPT = re.compile(r"<!-- excerpt: (?P<path>[^:\s]+):(?P<section>[\w-]+) -->\s*$")
WORKSPACE_DISTRIBUTIONS = {
    "evidence-first",
    "langchain-evidence-first",
    "llama-index-response-synthesizers-evidence-first",
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    preceding: str  # the source line just above the fence

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "fence" and token.map is not None:
            start = token.map[0]
            above = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
            language = token.info.split()[0] if token.info else ""
            found.append(Block(page, start + 1, language, token.content, above))
    return found


ALL_BLOCKS = [block for page in [*READMES, *PAGES] for block in blocks(page)]


def section(path: str, name: str | None) -> str:
    """What `pymdownx.snippets` includes for `path:name` (with `dedent_subsections`)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if name is None:
        return text
    match = re.search(
        rf"^[^\n]*--8<-- \[start:{name}\][^\n]*\n(.*?)^[^\n]*--8<-- \[end:{name}\]",
        text,
        re.DOTALL | re.MULTILINE,
    )
    assert match is not None, f"{path} has no section {name!r}"
    body = "\n".join(line for line in match.group(1).splitlines() if "--8<--" not in line)
    return textwrap.dedent(body).strip("\n") + "\n"


def snippet_includes(block: Block) -> list[re.Match[str]] | None:
    lines = [line for line in block.code.splitlines() if line.strip()]
    matches = [SNIPPET.match(line.strip()) for line in lines]
    if lines and all(matches):
        return [m for m in matches if m is not None]
    return None


def test_the_site_builds_strictly(tmp_path):
    # Strict: a broken link, anchor, include or API reference is an error.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for page in PAGES:
        assert (tmp_path / ("" if page.stem == "index" else page.stem) / "index.html").is_file()
    reference = (tmp_path / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("answer_from_evidence", "EvidenceAnswerer", "EvidenceSynthesizer"):
        assert f'id="{name}' in reference or f"{name}</code>" in reference, name


def test_every_page_is_in_the_navigation():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f": {page.name}\n" in config, page.name


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.page not in READMES], ids=lambda b: b.name
)
def test_docs_code_blocks_are_excerpts_or_run(block, tmp_path, monkeypatch):
    includes = snippet_includes(block)
    if includes is not None:
        for include in includes:
            path, name = include["path"], include["section"]
            assert path.startswith("cookbook/") or path.endswith(".md"), path
            assert section(path, name).strip()
        return
    if block.language == "python":
        monkeypatch.chdir(tmp_path)
        exec(compile(block.code, block.name, "exec"), {"__name__": "__docs__"})
        return
    check_shell(block)


@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if b.page in READMES and b.language == "python"],
    ids=lambda b: b.name,
)
def test_readme_python_blocks_are_cookbook_sections(block):
    marker = EXCERPT.match(block.preceding.strip())
    assert marker is not None, f"{block.name}: mark it <!-- excerpt: cookbook/...py:section -->"
    assert marker["path"].startswith("cookbook/")
    assert block.code == section(marker["path"], marker["section"])


@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if b.page in READMES and b.language != "python"],
    ids=lambda b: b.name,
)
def test_readme_shell_blocks_name_what_exists(block):
    check_shell(block)


@functools.cache
def locked_packages() -> set[str]:
    lock = (ROOT / "uv.lock").read_text(encoding="utf-8")
    return set(re.findall(r'^name = "([^"]+)"$', lock, re.MULTILINE))


def check_shell(block: Block) -> None:
    assert block.language == "sh", f"{block.name}: a fenced block needs a language: python or sh"
    packages = locked_packages() | WORKSPACE_DISTRIBUTIONS
    for line in block.code.splitlines():
        command = line.split("#", 1)[0].strip()
        if not command:
            continue
        for part in command.split("&&"):
            words = shlex.split(part)
            check_command(words, packages, block.name)


def check_command(words: list[str], packages: set[str], where: str) -> None:
    if words[:2] == ["uv", "run"]:
        words = words[2:]
        while words and words[0].startswith("--"):
            words = words[2:] if words[0] == "--extra" else words[1:]
    if words[:1] == ["evidence-first"]:
        try:
            cli._parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{where}: `{shlex.join(words)}` does not parse")
    elif words[:1] == ["python"] and words[1:2] and words[1].endswith(".py"):
        assert (ROOT / words[1]).is_file(), f"{where}: {words[1]} does not exist"
    elif words[:2] in (["pip", "install"], ["uv", "pip"]):
        words = words[2:]
        for index, word in enumerate(words):
            takes_value = index > 0 and words[index - 1] in ("--find-links", "-f", "--python")
            if word.startswith("-") or takes_value or "/" in word or word == "install":
                continue
            name = re.split(r"[\[<>=]", word, maxsplit=1)[0].lower()
            assert name in packages, f"{where}: {name} is neither ours nor in uv.lock"
    else:
        allowed = (["pytest"], ["uv", "build"], ["python3", "-m"], ["mkdocs"], ["git", "clone"])
        assert any(words[: len(a)] == a for a in allowed), f"{where}: `{shlex.join(words)}`"


def test_the_cookbook_page_includes_every_recipe():
    page = (DOCS / "cookbook.md").read_text(encoding="utf-8")
    for recipe in sorted((ROOT / "cookbook").glob("*.py")):
        assert f'--8<-- "cookbook/{recipe.name}"' in page, recipe.name


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    first = blocks(README)[0]
    commands = [line.split("#", 1)[0].strip() for line in first.code.splitlines()]
    assert commands == ["uv run --no-dev --extra demo evidence-first demo", "uv run pytest"]
    assert text.index("```sh") < text.index("\n## ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == "uv run pytest"


def test_the_readme_picture_is_the_screenshot_of_render_html():
    text = README.read_text(encoding="utf-8")
    assert "](docs/assets/render_html.png)" in text
    png = (DOCS / "assets" / "render_html.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width >= 600
    assert height >= 200


def test_the_screenshot_script_renders_a_page_with_headless_chromium(tmp_path):
    spec = importlib.util.spec_from_file_location("screenshot", DOCS / "scripts" / "screenshot.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # A stand-in for Chromium that records its arguments and writes the PNG it is asked for.
    chromium = tmp_path / "chromium"
    chromium.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path / "args"}\n'
        'for a in "$@"; do case "$a" in --screenshot=*) printf "PNG" > "${a#--screenshot=}";; '
        "esac; done\n"
    )
    chromium.chmod(0o755)
    page = tmp_path / "answer.html"
    page.write_text("<p>answer</p>")
    output = tmp_path / "shot.png"

    assert script.main(["--page", str(page), "--output", str(output), "--chromium", str(chromium)])

    assert output.read_text() == "PNG"
    args = (tmp_path / "args").read_text().split()
    assert "--headless" in args
    assert f"--screenshot={output}" in args
    assert args[-1] == page.resolve().as_uri()
