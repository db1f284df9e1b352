"""The README and the docs site: it builds strictly, and every code block in it is run by a test.

A page holds its code itself, so that it reads the same on GitHub as on the site. A Python
block is either executed here (it must run offline, without a model server), or is an excerpt
of a cookbook recipe, which `tests/cookbook` runs: a block right under
`<!-- excerpt: cookbook/<file>.py[:<section>] -->` that must equal that section (or the whole
recipe), as `docs/scripts/excerpts.py` writes it; text copied from another page sits between
`<!-- excerpt: <file>.md:<section> -->` and `<!-- end excerpt -->` under the same check. A
README's Python block must be such an excerpt, and must bind every name it uses. A shell
block's commands must name what exists: `evidence-first` commands parse with the CLI's own
parser, scripts exist, and installed packages are ours or in the lock file.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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
# A pymdownx.snippets include line: GitHub shows it as it is, instead of what it includes.
INCLUDE = re.compile(r'^\s*-+8<-+\s+["\']')
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


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


excerpts = script("excerpts")


def excerpt_of(block: Block) -> re.Match[str] | None:
    """The `<!-- excerpt: ... -->` marker right above a code block, if there is one."""
    return excerpts.MARKER.match(block.preceding.strip())


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


@pytest.mark.parametrize("page", [*READMES, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_excerpt_equals_what_it_copies(page):
    text = page.read_text(encoding="utf-8")
    fresh = excerpts.refresh(text)
    assert fresh == text, (
        f"{page.relative_to(ROOT)}: an excerpt differs from its source; "
        "run `uv run python docs/scripts/excerpts.py`"
    )


@pytest.mark.parametrize("page", [*READMES, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_shows_an_include_line_instead_of_its_content(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    includes = [number for number, line in enumerate(lines, 1) if INCLUDE.match(line)]
    assert not includes, f"{page.relative_to(ROOT)}:{includes}: put the copy in the page"


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.page not in READMES], ids=lambda b: b.name
)
def test_docs_code_blocks_are_excerpts_or_run(block, tmp_path, monkeypatch):
    marker = excerpt_of(block)
    if marker is not None:
        # Its text is checked against the recipe above; the recipe runs in tests/cookbook.
        assert marker["path"].startswith("cookbook/"), marker["path"]
        return
    if block.language == "python":
        monkeypatch.chdir(tmp_path)
        # As a reader runs it: without this module's `from __future__ import annotations`,
        # which would leave a TypedDict's annotations as strings no module can resolve.
        code = compile(block.code, block.name, "exec", dont_inherit=True)
        exec(code, {"__name__": "__docs__"})
        return
    check_shell(block)


README_PYTHON = [b for b in ALL_BLOCKS if b.page in READMES and b.language == "python"]


@pytest.mark.parametrize("block", README_PYTHON, ids=lambda b: b.name)
def test_readme_python_blocks_are_cookbook_sections(block):
    marker = excerpt_of(block)
    assert marker is not None, f"{block.name}: mark it <!-- excerpt: cookbook/...py:section -->"
    assert marker["path"].startswith("cookbook/")
    assert block.code == excerpts.excerpt(marker["path"], marker["sections"])


def unbound_names(code: str) -> set[str]:
    """The names `code` reads that it neither imports, assigns, defines nor takes as arguments."""
    tree = ast.parse(code)
    bound = set(dir(builtins))
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


@pytest.mark.parametrize("block", README_PYTHON, ids=lambda b: b.name)
def test_readme_python_blocks_run_as_shown(block):
    # A reader copies the block as it is: every name it uses is imported or defined in it.
    assert unbound_names(block.code) == set(), block.name


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
        assert f"<!-- excerpt: cookbook/{recipe.name} -->" in page, recipe.name


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
    screenshot = script("screenshot")
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

    assert screenshot.main(
        ["--page", str(page), "--output", str(output), "--chromium", str(chromium)]
    )

    assert output.read_text() == "PNG"
    args = (tmp_path / "args").read_text().split()
    assert "--headless" in args
    assert f"--screenshot={output}" in args
    assert args[-1] == page.resolve().as_uri()
