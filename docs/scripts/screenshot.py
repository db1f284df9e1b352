"""Take the README's picture: ``render_html`` output, screenshotted by headless Chromium.

Cookbook recipe 6 answers its question on the embedded default reader and writes the page;
Chromium (Debian's ``chromium`` package: ``apt-get install chromium``) renders it to
``docs/assets/render_html.png``.

Run: ``uv run python docs/scripts/screenshot.py [--page answer.html] [--output file.png]``
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "cookbook" / "06_render_html.py"
OUTPUT = ROOT / "docs" / "assets" / "render_html.png"


def chromium_command(chromium: str, page: Path, output: Path, width: int, height: int) -> list[str]:
    """The headless Chromium command that renders ``page`` to the PNG ``output``."""
    return [
        chromium,
        "--headless",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
        f"--screenshot={output}",
        page.as_uri(),
    ]


def write_recipe_page(path: Path) -> None:
    """Run recipe 6 on the embedded default reader, writing its page to ``path``."""
    spec = importlib.util.spec_from_file_location("recipe_06", RECIPE)
    assert spec is not None
    assert spec.loader is not None
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    recipe.main([str(path)])


def main(argv: Sequence[str] | None = None) -> Path:
    """Write the page (or take ``--page``), screenshot it, and return the PNG's path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, help="an HTML page (default: run recipe 6)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the PNG to write")
    parser.add_argument("--width", type=int, default=860)
    parser.add_argument("--height", type=int, default=380)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args(argv)
    page = args.page
    if page is None:
        page = Path(tempfile.mkdtemp(prefix="evidence-first-")) / "answer.html"
        write_recipe_page(page)
    command = chromium_command(args.chromium, page.resolve(), args.output, args.width, args.height)
    subprocess.run(command, check=True, capture_output=True)
    print(f"wrote {args.output}")
    return args.output


if __name__ == "__main__":
    main()
