"""Re-record every cassette: the local-model exchanges and the crafted provider errors.

Run from the workspace root: ``uv run python tests/record_cassettes.py``, with no other model
server running. It starts the embedded tiny model (and a loopback stub for HTTP errors) and
rewrites the cassette of every test marked ``@pytest.mark.vcr``. Each recorded request body
holds its system prompt as a marker naming the prompt version, so after a prompt change the
requests differ by that marker line. Review the diff of ``tests/cassettes/`` before committing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]

if __name__ == "__main__":
    command = [sys.executable, "-m", "pytest", "tests", "-m", "vcr", "--record-mode=rewrite"]
    sys.exit(subprocess.call([*command, *sys.argv[1:]], cwd=ROOT))
