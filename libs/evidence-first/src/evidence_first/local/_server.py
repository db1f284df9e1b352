"""The child process that serves the embedded model; `evidence_first.local` starts and stops it.

Run as ``python -m evidence_first.local._server MODEL PORT CONTEXT THREADS SEED SLOTS``. It
listens on 127.0.0.1 only and exits when its standard input closes, so it never outlives its
parent. SLOTS is the folder of saved system-prompt states (``local._prompts``).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def reader_params(
    model: str, port: int, context: int, threads: int, seed: int, slots: str | None
) -> Any:
    """The embedded model's llama.cpp parameters, an ``xllamacpp.CommonParams``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.seed = seed
    params.sampling.temp = 0.0
    params.verbosity = 0
    if slots is not None:
        params.slot_save_path = os.path.join(slots, "")  # llama.cpp appends the name as is
    # Every request looks in the server's prompt cache (host memory) for the earlier prompt
    # that shares the longest prefix with it: with the default similarity the slot keeps its
    # own prompt whenever the new one reuses half of it, as the fixed system prompt alone does
    # of a short question, and an earlier prompt of the same sources goes unused.
    params.slot_prompt_similarity = 1.0
    return params


def main(argv: list[str]) -> int:
    """Serve until standard input closes."""
    import xllamacpp

    model, port, context, threads, seed, slots = argv
    params = reader_params(model, int(port), int(context), int(threads), int(seed), slots)
    server = xllamacpp.Server(params)
    sys.stdin.read()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
