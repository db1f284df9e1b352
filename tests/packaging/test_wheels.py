"""Each built wheel holds what it should, installs alone in a fresh virtualenv, and works there.

Once per session, ``uv build --all-packages`` builds the three wheels and sdists into a temporary
directory. For each distribution, a fresh virtualenv gets that one wheel, with the built
directory as ``--find-links`` and every other dependency from the package index, as a user
installing from a checkout would. ``check_installed.py`` then runs on the virtualenv's own
interpreter, isolated (``-I``) and from a directory outside the repository: it answers one
question with a scripted model and checks that the other framework is absent.

Network: the package index only (uv's cache usually has every dependency). No model runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
# The MIT licence every distribution ships, from a copy in its own folder.
LICENSE = ROOT / "LICENSE"
CHECK_SCRIPT = Path(__file__).with_name("check_installed.py")
# Installs copy files out of uv's cache, as the workspace does: NLTK (under llama-index-core)
# refuses hardlinked data files. Hardlinks would save about 2 s of the run.
LINK_MODE = "copy"
# What a subprocess must not inherit: the workspace's virtualenv and any extra import path.
UNINHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")


@dataclass(frozen=True)
class Package:
    """One distribution of the workspace."""

    kind: str  # the argument check_installed.py takes
    project: Path  # the folder holding its pyproject.toml and README.md
    source_root: Path  # the folder the wheel's paths are relative to
    package: str  # the wheel path of its import package
    namespaces: tuple[str, ...] = ()  # wheel folders above it that must stay namespaces

    @property
    def metadata(self) -> dict[str, Any]:
        import tomllib  # Python 3.11+, as the workspace pins

        pyproject = tomllib.loads((self.project / "pyproject.toml").read_text(encoding="utf-8"))
        return dict(pyproject["project"])

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def version(self) -> str:
        return str(self.metadata["version"])

    @property
    def stem(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}"

    @property
    def wheel_name(self) -> str:
        return f"{self.stem}-py3-none-any.whl"

    @property
    def sdist_name(self) -> str:
        return f"{self.stem}.tar.gz"

    def sources(self) -> dict[str, Path]:
        """The package's files in the workspace, by the path each has in the wheel."""
        folder = self.source_root / self.package
        return {
            (PurePosixPath(self.package) / path.relative_to(folder).as_posix()).as_posix(): path
            for path in sorted(folder.rglob("*"))
            if path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in {".pyc", ".pyo", ".pyd"}
        }


CORE = Package(
    kind="core",
    project=ROOT / "libs/evidence-first",
    source_root=ROOT / "libs/evidence-first/src",
    package="evidence_first",
)
PACKAGES = {
    package.kind: package
    for package in [
        CORE,
        Package(
            kind="langchain",
            project=ROOT / "integrations/langchain",
            source_root=ROOT / "integrations/langchain",
            package="langchain_evidence_first",
        ),
        Package(
            kind="llamaindex",
            project=ROOT / "integrations/llama-index",
            source_root=ROOT / "integrations/llama-index",
            package="llama_index/response_synthesizers/evidence_first",
            namespaces=("llama_index", "llama_index/response_synthesizers"),
        ),
    ]
}
KINDS = sorted(PACKAGES)


def _uv() -> str:
    """The uv executable: ``uv run`` names itself in ``UV``; else the one on ``PATH``."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        pytest.fail("uv is needed to build and install the wheels: run the suite with `uv run`")
    return found


def _env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in UNINHERITED}


def _run(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    shown = " ".join(str(part) for part in command)
    assert result.returncode == 0, f"{shown}\n{result.stdout}\n{result.stderr}"
    return result


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _wheel(dist: Path, package: Package) -> zipfile.ZipFile:
    return zipfile.ZipFile(dist / package.wheel_name)


def _wheel_metadata(wheel: zipfile.ZipFile, package: Package) -> Message:
    return message_from_bytes(wheel.read(f"{package.stem}.dist-info/METADATA"))


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three wheels and three sdists, built once per session from the workspace."""
    out = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "--all-packages", "-o", out], cwd=ROOT)
    return out


@dataclass(frozen=True)
class Installed:
    """A fresh virtualenv holding one distribution (and its dependencies) and nothing else."""

    package: Package
    venv: Path
    work: Path  # a directory outside the repository, to run things from

    @property
    def python(self) -> Path:
        return _venv_python(self.venv)

    @property
    def purelib(self) -> Path:
        code = "import sysconfig; print(sysconfig.get_path('purelib'))"
        return Path(_run([self.python, "-I", "-c", code], cwd=self.work).stdout.strip())


@pytest.fixture(scope="session", params=KINDS)
def installed(
    request: pytest.FixtureRequest, dist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    """A virtualenv where ``uv pip install`` put one wheel, found its core in ``dist``."""
    package = PACKAGES[request.param]
    work = tmp_path_factory.mktemp(f"venv-{package.kind}")
    venv = work / "venv"
    # PyPI has no `evidence-first` today. Should a project of that name appear there, the pin
    # keeps a newer release of it out, and at the same version uv takes the --find-links file;
    # test_the_installed_files_are_those_of_our_wheels compares them byte for byte anyway.
    # uv's cache keys a --find-links wheel by its path, and pytest reuses its temporary paths
    # across sessions, so without a refresh a rebuilt wheel of the same version is installed
    # from an earlier session's copy.
    constraints = work / "constraints.txt"
    constraints.write_text(f"{CORE.name}=={CORE.version}\n")
    uv = _uv()
    _run([uv, "venv", venv, "--python", sys.executable, "--quiet"], cwd=work)
    _run(
        [
            uv,
            "pip",
            "install",
            "--python",
            _venv_python(venv),
            "--find-links",
            dist,
            "--constraint",
            constraints,
            f"--link-mode={LINK_MODE}",
            f"--refresh-package={CORE.name}",
            f"--refresh-package={package.name}",
            dist / package.wheel_name,
        ],
        cwd=work,
    )
    yield Installed(package=package, venv=venv, work=work)
    shutil.rmtree(venv)  # up to 200 MB each; the session keeps one at a time


def test_the_build_makes_three_wheels_and_three_sdists(dist):
    built = {path.name for path in dist.iterdir() if not path.name.startswith(".")}
    expected = {p.wheel_name for p in PACKAGES.values()} | {p.sdist_name for p in PACKAGES.values()}
    assert built == expected


@pytest.mark.parametrize("kind", KINDS)
def test_the_wheel_holds_exactly_the_package_and_its_metadata(dist, kind):
    package = PACKAGES[kind]
    sources = package.sources()
    with _wheel(dist, package) as wheel:
        names = wheel.namelist()
        info = f"{package.stem}.dist-info/"
        assert sorted(n for n in names if n.startswith(info)) == sorted(
            info + name
            for name in ["METADATA", "RECORD", "WHEEL", "licenses/LICENSE"]
            + (["entry_points.txt"] if kind == "core" else [])
        )
        assert wheel.read(f"{info}licenses/LICENSE") == LICENSE.read_bytes()
        files = {n for n in names if not n.startswith(info)}
        assert files == set(sources)  # nothing left out, nothing else (no tests, no caches)
        assert f"{package.package}/py.typed" in files
        for namespace in package.namespaces:
            assert f"{namespace}/__init__.py" not in files
        for name, path in sources.items():
            assert wheel.read(name) == path.read_bytes(), name
        metadata = _wheel_metadata(wheel, package)
    assert metadata["Name"] == package.name
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Version"] == package.version
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload() == (package.project / "README.md").read_text(encoding="utf-8")
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
    requires = metadata.get_all("Requires-Dist", [])
    if kind != "core":
        assert f"{CORE.name}>={CORE.version}" in requires


@pytest.mark.parametrize("kind", KINDS)
def test_each_distribution_folder_carries_the_root_licence(kind):
    assert (PACKAGES[kind].project / "LICENSE").read_bytes() == LICENSE.read_bytes()
    assert "Copyright (c) 2026 The evidence-first authors" in LICENSE.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
def test_the_sdist_holds_the_sources_readme_and_pyproject(dist, kind):
    package = PACKAGES[kind]
    top = package.stem
    with tarfile.open(dist / package.sdist_name) as sdist:
        names = set(sdist.getnames())
        licence = sdist.extractfile(f"{top}/LICENSE")
        assert licence is not None
        assert licence.read() == LICENSE.read_bytes()
    relative = package.source_root.relative_to(package.project)
    for name in ["PKG-INFO", "pyproject.toml", "README.md", "LICENSE"]:
        assert f"{top}/{name}" in names
    for name in package.sources():
        assert (PurePosixPath(top) / relative.as_posix() / name).as_posix() in names
    assert not any("/tests/" in name or name.endswith(".pyc") for name in names)


def test_the_installed_files_are_those_of_our_wheels(installed, dist):
    package = installed.package
    purelib = installed.purelib
    for ours in {CORE, package}:
        with _wheel(dist, ours) as wheel:
            for name in wheel.namelist():
                if name.endswith(".dist-info/RECORD"):
                    continue  # the installer writes its own
                assert (purelib / name).read_bytes() == wheel.read(name), name
            files = {n for n in wheel.namelist() if n.startswith(f"{ours.package}/")}
        present = {
            path.relative_to(purelib).as_posix()
            for path in (purelib / ours.package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        }
        assert present == files  # and no other file in the package's folder
    found = sorted(path.name for path in purelib.glob("evidence_first-*.dist-info"))
    assert found == [f"{CORE.stem}.dist-info"]
    for namespace in package.namespaces:
        assert not (purelib / namespace / "__init__.py").exists()


def test_the_package_answers_without_the_other_framework(installed):
    # The script answers one question with a scripted model and checks the verified span; it
    # fails if the other framework is installed, importable or imported.
    result = _run(
        [installed.python, "-I", CHECK_SCRIPT, installed.package.kind], cwd=installed.work
    )
    report = json.loads(result.stdout)
    purelib = Path(report["purelib"])
    assert purelib == installed.purelib
    # Every package came from the virtualenv, none from the workspace.
    for module, file in report["files"].items():
        assert Path(file).is_relative_to(purelib), (module, file)
        assert not Path(file).is_relative_to(ROOT), (module, file)
    assert {CORE.name, installed.package.name} <= set(report["distributions"])


def test_the_console_script_runs(installed):
    name = "Scripts/evidence-first.exe" if sys.platform == "win32" else "bin/evidence-first"
    result = _run([installed.venv / name, "--help"], cwd=installed.work)
    assert result.stdout.startswith("usage: evidence-first")
