"""The package's public surface, and that it installs and imports without LlamaIndex."""

from __future__ import annotations

import subprocess
import sys

import pytest

import langchain_evidence_first
from evidence_first import local
from langchain_evidence_first import EvidenceAnswerer


def test_public_names_are_pinned():
    assert sorted(langchain_evidence_first.__all__) == [
        "EvidenceAnswerer",
        "UnenforcedSettingsWarning",
        "answer_of",
        "profile_for",
        "to_content_blocks",
    ]


def test_importing_the_package_does_not_import_llama_index():
    code = (
        "import sys, langchain_evidence_first\n"
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] == 'llama_index')\n"
        "assert not leaked, leaked\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_llm_and_without_the_local_extra_the_error_explains_llm(monkeypatch):
    monkeypatch.setattr(local, "is_installed", lambda: False)
    with pytest.raises(ImportError, match=r"llm=") as info:
        EvidenceAnswerer()
    assert "langchain-evidence-first[local]" in str(info.value)


def test_without_llm_the_local_model_is_used_when_installed(monkeypatch):
    class FakeLocal:
        def __init__(self) -> None:
            self.requests = []

        def generate(self, request):
            self.requests.append(request)
            return '{"facts": [], "answer": null, "inference": null, "missing_evidence": ["x"]}'

    fake = FakeLocal()
    monkeypatch.setattr(local, "is_installed", lambda: True)
    monkeypatch.setattr(local, "shared_local_model", lambda: fake)
    answer = EvidenceAnswerer().invoke({"question": "q?", "sources": ["Some text."]})
    assert answer.status == "insufficient_evidence"
    assert len(fake.requests) == 1
