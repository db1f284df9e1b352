"""Record again everything a prompt change reaches: golden request bodies, digests, cassettes.

Run from the workspace root: ``uv run python tests/record.py``, with no other model server
running. First the golden files (``--record-golden``): each new prompt version's digest in
``tests/golden/prompt_versions.json`` (never rewriting a recorded one) and each request body
beside its version in ``tests/golden/requests/``. Then every cassette (``@pytest.mark.vcr``):
it starts the embedded tiny model (and a loopback stub for HTTP errors) and rewrites each
exchange; a recorded request body holds its system prompt as a marker naming the prompt
version, so after a prompt change the requests differ by that marker line. ``--golden`` or
``--cassettes`` records one part alone. Review the diff of ``tests/golden/`` and
``tests/cassettes/`` before committing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
GOLDEN = [
    "tests/core/test_prompt_versions.py",
    "tests/core/test_request_bytes.py",
    "tests/langchain/test_request_bytes.py",
    "tests/llamaindex/test_request_bytes.py",
    "--record-golden",
]
CASSETTES = ["tests", "-m", "vcr", "--record-mode=rewrite"]


def main(arguments: list[str]) -> int:
    """Record the parts named (both by default); the first failing run's exit status, or 0."""
    parts = [part for part in ("--golden", "--cassettes") if part in arguments] or [
        "--golden",
        "--cassettes",
    ]
    rest = [argument for argument in arguments if argument not in parts]
    for part in parts:
        command = [sys.executable, "-m", "pytest", *(GOLDEN if part == "--golden" else CASSETTES)]
        status = subprocess.call([*command, *rest], cwd=ROOT)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
