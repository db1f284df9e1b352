"""The LlamaIndex package's public surface, namespace layout and dependency boundary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import llama_index.response_synthesizers.evidence_first as package

ROOT = Path(__file__).parents[2]
PACKAGE_ROOT = ROOT / "integrations" / "llama-index"


def test_public_names_are_pinned():
    assert sorted(package.__all__) == [
        "EvidenceDecisionEvent",
        "EvidenceFactEvent",
        "EvidenceQueryEngine",
        "EvidenceSynthesizer",
        "StreamingNotEnabledError",
        "UnenforcedSettingsWarning",
        "profile_for",
    ]
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_the_import_path_is_a_namespace_package_like_other_llama_index_integrations():
    assert not (PACKAGE_ROOT / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE_ROOT / "llama_index" / "response_synthesizers" / "__init__.py").exists()
    assert (PACKAGE_ROOT / "llama_index" / "response_synthesizers" / "evidence_first").is_dir()
    # llama_index.core still resolves next to it.
    import llama_index.core

    assert llama_index.core.__file__ is not None


def test_the_package_imports_without_langchain_or_an_llm_provider_package():
    probe = (
        "import sys, llama_index.response_synthesizers.evidence_first\n"
        "loaded = [m for m in sys.modules if m.startswith(('langchain', 'llama_index.llms.'))]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr


def test_the_distribution_depends_only_on_the_core_and_llama_index_core():
    import tomllib

    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())["project"]
    names = sorted(dep.split(">")[0].split("<")[0].split("=")[0] for dep in project["dependencies"])
    assert names == ["evidence-first", "llama-index-core"]
