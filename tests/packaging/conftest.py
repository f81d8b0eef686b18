"""A fresh environment with only the built wheel of this project installed, for the tests that play the
package as a studio gets it.

Offline: the wheel is built without build isolation (setuptools comes with the test extra) and installed
with ``--no-index --no-deps``; the fresh environment borrows this one's dependencies through a ``.pth``
file, which does not run this environment's own ``.pth`` hooks (so an editable install of the project here
cannot shadow the wheel).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Sequence

import pytest

from tests.conftest import ROOT

# What the build reads: the sdist's content, without the tests and docs.
SOURCES = ("pyproject.toml", "README.md", "pytest_ncp", "specs", "calibration")


def run(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def clean_env() -> dict[str, str]:
    """This process's environment without what pytest or a developer's shell would leak into a studio's run."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "NCP_")) and k not in ("PYTHONPATH", "COV_CORE_SOURCE")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


@pytest.fixture(scope="session")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the built wheel installed in it: returns its bin/ folder."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        setuptools_major = int(version("setuptools").split(".")[0])
    except PackageNotFoundError:
        setuptools_major = 0
    assert setuptools_major >= 77, "building the wheel offline needs setuptools>=77: pip install -e '.[test]'"
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, src / name)
    dist = base / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-q",
         "-w", str(dist), str(src)], cwd=base)
    wheel = next(dist.glob("pytest_ncp-*.whl"))
    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=base).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    # pip comes with the borrowed dependencies: run under the fresh interpreter, it installs into the fresh venv.
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=base)
    # pytest comes with the borrowed dependencies, its `pytest` program does not: the one pip would write.
    launcher = venv / "bin" / "pytest"
    launcher.write_text(f"#!{python}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n",
                        encoding="utf-8")
    launcher.chmod(0o755)
    return venv / "bin"


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    here = tmp_path / "studio"
    here.mkdir()
    return here
