"""The llama.cpp server's child process: a free loopback port, start, readiness, stop.

The child is :mod:`evidence_first.local._server`; its thread count is by default
:func:`idle_cores`, counted from ``/proc/stat``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from evidence_first._shapes.errors import LocalModelError

__all__ = ["HOST", "ServerProcess", "free_port", "idle_cores"]

HOST = "127.0.0.1"
_READY_TIMEOUT_SECONDS = 120.0
_STOP_SECONDS = 10.0


def _cpu_times() -> tuple[int, int] | None:
    """Total and idle jiffies of all CPUs, from ``/proc/stat``; ``None`` where there is none."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    values = [int(field) for field in fields]
    return sum(values), values[3] + values[4]  # idle + iowait


def idle_cores(window: float = 0.25) -> int:
    """How many cores are idle now: the default thread count of :class:`LocalModel`.

    llama.cpp's threads wait for each other at every step, so a thread that shares its core
    with another busy process slows them all: on 2 cores with one kept busy, the reader wrote
    9.8 tokens/s with 2 threads and 20.4 with 1 (``benchmarks/local_model.py``). This counts
    the cores left idle over ``window`` seconds, at least 1; all cores where ``/proc/stat`` is
    missing.
    """
    cores = os.cpu_count() or 1
    before = _cpu_times()
    if before is None:
        return cores
    time.sleep(window)
    after = _cpu_times()
    if after is None or after[0] <= before[0]:
        return cores
    idle = (after[1] - before[1]) / (after[0] - before[0])
    return max(1, min(cores, round(idle * cores)))


def free_port() -> int:
    """A port on loopback that no socket holds now (another may take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class ServerProcess:
    """One run of the server child process at a time, with its startup log.

    Attributes:
        process: The child process, while one was launched and not yet stopped.
        port: The port the child was told to listen on.
    """

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The child process's ID while it runs."""
        return self.process.pid if self.process is not None else None

    def launch(
        self, path: Path, *, context_tokens: int, threads: int, seed: int, slots: Path
    ) -> None:
        """Start serving the GGUF file at ``path`` on a free port, without waiting for it.

        ``slots`` is the folder of saved system-prompt states (``local._prompts``).
        """
        self.port = free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        command = [
            sys.executable,
            "-m",
            "evidence_first.local._server",
            str(path),
            str(self.port),
            str(context_tokens),
            str(threads),
            str(seed),
            str(slots),
        ]
        # The child exits when its stdin closes, so it never outlives this process.
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=self._log, stderr=self._log
        )

    def wait_until_ready(self) -> None:
        """Wait until the server answers ``/health``.

        Raises:
            LocalModelError: The child exited, or the server was not ready in time.
        """
        deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
        health = f"http://{HOST}:{self.port}/health"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                msg = f"the local model server exited while starting{self._log_tail()}"
                raise LocalModelError(msg)
            try:
                with urllib.request.urlopen(health, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        msg = f"the local model server was not ready within {_READY_TIMEOUT_SECONDS:g} s"
        raise LocalModelError(msg)

    def stop(self) -> None:
        """Stop the child and release its port and log. Safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            try:
                process.wait(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        self.port = None

    def _log_tail(self) -> str:
        # Startup output only (no prompt has been sent yet): llama.cpp's own messages.
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
        return ": " + " | ".join(lines) if lines else ""
