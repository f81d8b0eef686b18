"""The built wheel carries the benchmark: installed into a fresh environment, the README's main job and
``ncp demo`` play the bundled NCP-Bench specs from an empty directory.

Offline: the wheel is built without build isolation (setuptools comes with the test extra) and installed
with ``--no-index --no-deps``; the fresh environment borrows this one's dependencies through a ``.pth``
file, which does not run this environment's own ``.pth`` hooks (so an editable install of the project here
cannot shadow the wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.packaging

# What the build reads: the sdist's content, without the tests and docs.
SOURCES = ("pyproject.toml", "README.md", "pytest_ncp", "specs", "calibration")
BENCH_SPECS = len(list((ROOT / "specs").glob("*.yaml")))


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the built wheel installed in it: returns its bin/ folder."""
    try:
        from importlib.metadata import version

        setuptools_major = int(version("setuptools").split(".")[0])
    except Exception:  # noqa: BLE001 - absent or unreadable: the same advice
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
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-q",
          "-w", str(dist), str(src)], cwd=base)
    wheel = next(dist.glob("pytest_ncp-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=base).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          str(wheel)], cwd=base)
    return venv / "bin"


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    here = tmp_path / "studio"
    here.mkdir()
    return here


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NCP_")) and k != "PYTHONPATH"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def test_the_wheel_holds_the_benchmark_and_imports_from_the_fresh_env(wheel_env: Path, empty_dir: Path):
    out = _run([str(wheel_env / "python"), "-c", "import pytest_ncp, pathlib; "
                "from pytest_ncp.core.bundled import bundled_folder; "
                "print(pytest_ncp.__file__); print(bundled_folder('ncp-bench')); print(bundled_folder('ncp-gold'))"],
               cwd=empty_dir, env=_env()).stdout.split()
    package, bench, gold = (Path(p) for p in out)
    venv = wheel_env.parent
    assert package.is_relative_to(venv) and bench.is_relative_to(venv) and gold.is_relative_to(venv)
    assert len(list(bench.glob("*.yaml"))) == BENCH_SPECS
    assert (gold / "cases").is_dir() and (gold / "specs").is_dir()


def test_ncp_demo_and_validate_run_the_bundled_specs_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    env = _env()
    _run([str(wheel_env / "ncp"), "validate", "ncp-bench"], cwd=empty_dir, env=env)
    _run([str(wheel_env / "ncp"), "demo", "--max-turns", "2", "--out", "runs/demo"], cwd=empty_dir, env=env)
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert sorted(p.name for p in empty_dir.iterdir()) == ["runs"]  # nothing borrowed from a clone
    check = _run([str(wheel_env / "ncp"), "calibrate", "--check"], cwd=empty_dir, env=env)
    assert "0 problem(s)" in check.stdout


def test_the_readme_main_job_runs_from_the_wheel_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    """The README's first command with a short story: every bundled spec collected and played."""
    proc = subprocess.run(
        [str(wheel_env / "python"), "-m", "pytest", "--ncp-specs=ncp-bench", "--ncp-demo",
         "--ncp-narrator=pytest_ncp.narrators:LLMNarrator", "--ncp-max-turns=2", "--ncp-min-survival=0.05@2",
         "--ncp-report=runs/demo", "-q", "-p", "no:cacheprovider"],
        cwd=empty_dir, env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert (empty_dir / "runs" / "demo" / "report.html").is_file()
