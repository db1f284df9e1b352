"""The embedded local model: loopback only, stopped on exit, and a clear error without its extra."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from evidence_first.local import TINY_MODEL, LocalModel


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on ``port``, from /proc/net/tcp{,6}."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                addresses.add(address)
    return addresses


def test_the_server_listens_on_loopback_only(tiny_model):
    assert tiny_model.host == "127.0.0.1"
    assert tiny_model.base_url.startswith("http://127.0.0.1:")
    # 0100007F is 127.0.0.1 in /proc's little-endian hex; 00000000 would be every interface.
    assert _listening_addresses(tiny_model.port) == {"0100007F"}


def test_the_server_stops_when_the_context_exits_even_on_error(no_model_server):
    model = LocalModel(TINY_MODEL, context_tokens=2048)
    seen: dict[str, object] = {}

    def fail_inside() -> None:
        with model:
            seen["port"], seen["running"] = model.port, model.running
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    port = seen["port"]
    assert seen["running"] is True
    assert not model.running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_tokenize_uses_the_models_own_tokenizer(tiny_model):
    assert 0 < len(tiny_model.tokenize("The launch moved to June 15.")) < 20


def test_a_new_server_reads_the_system_prompt_from_the_saved_state(no_model_server):
    from evidence_first import answer_from_evidence

    sources = [{"id": "note", "text": "The launch moved to June 15."}]
    with LocalModel(TINY_MODEL, context_tokens=4096) as first:
        answer_from_evidence("When is the launch?", sources, first)
    with LocalModel(TINY_MODEL, context_tokens=4096) as second:
        answer = answer_from_evidence("Who moved the launch?", sources, second)
    # A fresh server's first request: its prompt cache is empty, so every token it did not
    # read came from the system prompt's state the first server saved.
    assert answer.usage is not None
    assert answer.usage.cached_input_tokens is not None
    assert answer.usage.cached_input_tokens > 100


def test_a_question_reuses_the_earlier_prompt_that_shares_the_longest_prefix(local_model):
    from evidence_first import answer_from_evidence

    # The reader, not the tiny model: Gemma 3's sliding-window layers let llama.cpp go back in
    # a cached prompt only as far as its last checkpoint, so it reads the sources again.
    notes = {"id": "notes", "text": "The launch moved to June 15. " * 20}
    other = {"id": "other", "text": "The budget review is on Friday."}
    # A short output: llama.cpp loads a cached prompt only when the share of it that the new
    # prompt reuses is larger than the slot's own, and a long reply dilutes that share.
    limits = {"max_output_tokens": 48}
    first = answer_from_evidence("When is the launch?", [notes], local_model, **limits)
    answer_from_evidence("When is the review?", [other], local_model, **limits)
    again = answer_from_evidence("Who moved the launch?", [notes], local_model, **limits)
    # The second question shares only the system prompt with the first; the third shares the
    # first's sources too, and the server's prompt cache (host memory) gives them back.
    assert first.usage is not None
    assert first.usage.input_tokens is not None
    assert again.usage is not None
    assert again.usage.cached_input_tokens is not None
    shared_with_first = first.usage.input_tokens - 20  # all but the question's own tokens
    assert again.usage.cached_input_tokens > shared_with_first
