"""What tests of every folder share: a scripted model, the ledger builders and a raw server.

Importable as ``_support`` from any test module (``pythonpath`` in ``pyproject.toml``); the
fixtures ``scripted``, ``make_ledger`` and ``make_fact`` of ``tests/conftest.py`` hand out the
same objects.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from evidence_first import ModelRequest, ModelResponse

__all__ = ["RawServer", "ScriptedModel", "fact", "forged", "ledger", "ledger_dict"]


class ScriptedModel:
    """A sync model that returns a fixed response and records each request it gets.

    The response is a ``ModelResponse`` or text returned as it is, a ledger mapping (sent as
    JSON, non-ASCII text kept), or ``response(request)`` giving each one.
    """

    def __init__(
        self, response: ModelResponse | str | dict[str, Any] | Callable[[ModelRequest], Any]
    ) -> None:
        self._response = (
            json.dumps(response, ensure_ascii=False) if isinstance(response, dict) else response
        )
        self.requests: list[ModelRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    def generate(self, request: ModelRequest) -> ModelResponse | str:
        self.requests.append(request)
        if callable(self._response):
            return self._response(request)
        return self._response


def ledger_dict(
    facts: Iterable[dict[str, Any]] | None = None,
    *,
    answer: str | None = "an answer",
    inference: str | None = None,
    missing_evidence: Iterable[str] | None = None,
) -> dict[str, Any]:
    """A ledger's four keys, in the order the schema gives them."""
    return {
        "facts": list(facts) if facts is not None else [],
        "answer": answer,
        "inference": inference,
        "missing_evidence": list(missing_evidence) if missing_evidence is not None else [],
    }


def ledger(
    facts: Iterable[dict[str, Any]] | None = None,
    *,
    answer: str | None = "an answer",
    inference: str | None = None,
    missing_evidence: Iterable[str] | None = None,
) -> str:
    """:func:`ledger_dict` as the JSON text a model replies with (non-ASCII text kept)."""
    built = ledger_dict(
        facts, answer=answer, inference=inference, missing_evidence=missing_evidence
    )
    return json.dumps(built, ensure_ascii=False)


def fact(
    *citations: tuple[str, str] | dict[str, Any],
    subject: str = "s",
    relation: str = "r",
    obj: str = "o",
) -> dict[str, Any]:
    """A ledger fact; each citation a ``(source_id, quote)`` pair or a citation mapping."""
    return {
        "subject": subject,
        "relation": relation,
        "object": obj,
        "citations": [
            c if isinstance(c, dict) else {"source_id": c[0], "quote": c[1]} for c in citations
        ],
    }


def forged(answer: Any, **fields: Any) -> Any:
    """A copy of ``answer`` with ``fields`` set past every check, as no load or copy allows.

    For the tests of what only reads an answer (renderers, metadata): they must hold whatever
    object they are given, even one no path of the package builds.
    """
    copy = answer.model_copy()
    for name, value in fields.items():
        object.__setattr__(copy, name, value)
    return copy


class RawServer:
    """A one-connection-at-a-time HTTP server on 127.0.0.1 that writes what ``respond`` yields.

    It records each request's head and body, how many bytes it managed to send, and when the
    client closed the connection.
    """

    def __init__(self, respond: Callable[[], Iterator[bytes]]) -> None:
        self.respond = respond
        self.sent = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    @property
    def url(self) -> str:
        return f"{self.origin}/v1"

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()

    def _serve(self) -> None:
        with self._listener:
            while not self._stop.is_set():
                try:
                    connection, _ = self._listener.accept()
                except OSError:
                    return
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            head, body = self._read_request(connection)
            self.heads.append(head)
            self.bodies.append(body)
            try:
                for part in self.respond():
                    if self._stop.is_set():
                        return
                    connection.sendall(part)
                    self.sent += len(part)
            except OSError:
                self.closed.set()
                return
            # Everything written: wait for the client to close its end.
            connection.settimeout(10)
            try:
                while connection.recv(65536):
                    pass
            except OSError:
                pass
            self.closed.set()

    @staticmethod
    def _read_request(connection: socket.socket) -> tuple[bytes, bytes]:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        while len(body) < length:
            body += connection.recv(65536)
        return head, body
