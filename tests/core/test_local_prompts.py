"""The embedded server's saved system-prompt state (``local._prompts``), against a loopback
stand-in for llama.cpp's slot actions (tools/server/README.md: ``POST /slots/{id}?action=save``
answers ``n_saved``, the tokens the slot held; ``?action=restore`` loads a file).

The live round trip, a second server answering its first question with the system prompt
read from its cache, is ``tests/live/test_local_model.py``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evidence_first.local._prompts import PromptStore

SYSTEM = "You answer one question using only the sources in the user message."
PROMPT_TOKENS = 21


def _llama_cpp(folder: Path, *, saved_tokens: int = PROMPT_TOKENS) -> Any:
    """A reply function for the loopback: the slot actions write and read ``folder``."""

    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/slots/0?action=save":
            (folder / body["filename"]).write_bytes(b"state")
            return {"id_slot": 0, "filename": body["filename"], "n_saved": saved_tokens}
        if path == "/slots/0?action=restore":
            return {"id_slot": 0, "filename": body["filename"], "n_restored": saved_tokens}
        timings = {"cache_n": 0, "prompt_n": PROMPT_TOKENS, "predicted_n": 1}
        return {"choices": [{"message": {"content": "{"}}], "timings": timings}

    return reply


def _store(folder: Path, loopback: Any, model_sha256: str = "a" * 64) -> PromptStore:
    return PromptStore(folder, loopback.url, "qwen2.5-coder-1.5b", model_sha256)


def test_the_first_answer_saves_the_system_prompt_alone(tmp_path, loopback):
    loopback.reply = _llama_cpp(tmp_path)
    store = _store(tmp_path, loopback)
    store.after(SYSTEM)
    primed, saved = loopback.posts
    assert primed.path == "/v1/chat/completions"
    assert primed.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": ""},
    ]
    assert primed.body["max_tokens"] == 1
    assert saved.path == "/slots/0?action=save"
    # Saved under a partial name, then renamed into place: no reader meets half a file.
    assert saved.body["filename"] != store.file_name(SYSTEM)
    assert sorted(path.name for path in tmp_path.iterdir()) == [store.file_name(SYSTEM)]
    store.after(SYSTEM)  # once per server
    assert len(loopback.posts) == 2


def test_a_slot_that_holds_another_request_is_not_kept(tmp_path, loopback):
    # Another request reached the server between the priming request and the save: its
    # question and sources would be in the file.
    loopback.reply = _llama_cpp(tmp_path, saved_tokens=PROMPT_TOKENS + 400)
    _store(tmp_path, loopback).after(SYSTEM)
    assert list(tmp_path.iterdir()) == []


def test_a_new_server_restores_the_saved_state_before_its_first_request(tmp_path, loopback):
    loopback.reply = _llama_cpp(tmp_path)
    store = _store(tmp_path, loopback)
    (tmp_path / store.file_name(SYSTEM)).write_bytes(b"state")
    store.before(SYSTEM)
    store.before(SYSTEM)
    (restore,) = loopback.posts
    assert restore.path == "/slots/0?action=restore"
    assert restore.body == {"filename": store.file_name(SYSTEM)}
    store.after(SYSTEM)  # restored: nothing to save
    assert len(loopback.posts) == 1


def test_nothing_is_restored_where_nothing_was_saved(tmp_path, loopback):
    _store(tmp_path, loopback).before(SYSTEM)
    assert loopback.posts == []


def test_a_file_that_does_not_restore_is_deleted(tmp_path, loopback):
    loopback.answering(400, {"error": {"message": "failed to restore slot"}})
    store = _store(tmp_path, loopback)
    (tmp_path / store.file_name(SYSTEM)).write_bytes(b"from another llama.cpp")
    store.before(SYSTEM)
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_refuses_the_actions_costs_nothing_but_the_time(tmp_path, loopback):
    loopback.answering(501, {"error": {"message": "This server does not support slots action"}})
    store = _store(tmp_path, loopback)
    store.before(SYSTEM)
    store.after(SYSTEM)
    assert list(tmp_path.iterdir()) == []


def test_each_model_and_system_prompt_has_its_own_file(tmp_path, loopback):
    store = _store(tmp_path, loopback)
    other_model = _store(tmp_path, loopback, model_sha256="b" * 64)
    names = {
        store.file_name(SYSTEM),
        store.file_name(SYSTEM + " "),
        other_model.file_name(SYSTEM),
    }
    assert len(names) == 3
    assert all(name.startswith("system-") and name.endswith(".bin") for name in names)
