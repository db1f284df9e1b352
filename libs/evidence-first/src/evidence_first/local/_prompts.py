"""The system prompt's state, kept on disk so that a new server does not read it again.

Every request opens with the same system prompt, about 560 of the reader's tokens: llama.cpp's
prompt cache reuses it from one question to the next, but a new server (each ``ask``, each
demo, each ``with LocalModel()``) would read it again before its first answer, about 14 s on 2
cores. llama.cpp's slot files (``--slot-save-path``; ``POST /slots/0?action=save|restore``,
tools/server/README.md) keep it: after a server's first answer under a system prompt, the
store sends that system prompt with an empty question (one output token), saves the slot, and
keeps the file only if it holds exactly that request's tokens, so no question or source is
ever written to disk. The next server restores it before its first request.

A file is named by the model's pinned SHA-256 and the system prompt's, so a changed prompt or
model never meets another's state. Anything that fails here (a server refusing the action, a
file from another llama.cpp) only costs the time it would have saved: the request is sent as
it would have been, and a file that does not restore is deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["PromptStore"]

_TIMEOUT_SECONDS = 120.0


class PromptStore:
    """One server's use of the saved system-prompt states in ``folder``.

    Args:
        folder: The server's slot folder (``--slot-save-path``).
        server: The server's root URL, such as ``http://127.0.0.1:41234``.
        model: The model's name, sent in the priming request.
        model_sha256: The model file's pinned SHA-256: part of each file's name.
    """

    def __init__(self, folder: Path, server: str, model: str, model_sha256: str) -> None:
        self.folder = folder
        self.server = server
        self.model = model
        self.model_sha256 = model_sha256
        self._restored: set[str] = set()
        self._saved: set[str] = set()
        self._lock = threading.Lock()

    def _first(self, seen: set[str], system: str) -> bool:
        """Whether this is the first call for ``system`` (across threads)."""
        with self._lock:
            if system in seen:
                return False
            seen.add(system)
            return True

    def file_name(self, system: str) -> str:
        """The slot file of ``system`` for this model (a bare name, as llama.cpp asks)."""
        digest = hashlib.sha256(f"{self.model_sha256}\n{system}".encode()).hexdigest()
        return f"system-{digest[:32]}.bin"

    def before(self, system: str) -> None:
        """Before the first request under ``system``: restore its saved state, if any."""
        if not self._first(self._restored, system):
            return
        name = self.file_name(system)
        if not (self.folder / name).is_file():
            return
        if self._post("/slots/0?action=restore", {"filename": name}) is None:
            with contextlib.suppress(OSError):
                (self.folder / name).unlink()
        else:
            self._first(self._saved, system)

    def after(self, system: str) -> None:
        """After a request under ``system``: save its state once, if no file holds it yet."""
        if not self._first(self._saved, system):
            return
        primed = self._post(
            "/v1/chat/completions",
            {
                "model": self.model,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": ""},
                ],
                "max_tokens": 1,
                "temperature": 0.0,
            },
        )
        if primed is None:
            return
        timings = primed.get("timings", {})
        # The slot holds the prompt's tokens (the one written is never read back in).
        tokens = timings.get("cache_n", 0) + timings.get("prompt_n", 0)
        name = self.file_name(system)
        partial = f"{name}.{os.getpid()}.part"
        saved = self._post("/slots/0?action=save", {"filename": partial})
        path = self.folder / partial
        # Kept only when it holds the priming request alone: another request that reached
        # the server in between would have put its question and sources in the file.
        if saved is not None and saved.get("n_saved") == tokens and path.is_file():
            os.replace(path, self.folder / name)
        else:
            with contextlib.suppress(OSError):
                path.unlink()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        request = urllib.request.Request(
            f"{self.server}{path}",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as reply:
                payload: dict[str, Any] = json.loads(reply.read())
        except (OSError, ValueError):  # URLError, HTTPError and timeouts are OSErrors
            return None
        return payload
