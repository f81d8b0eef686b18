"""The built wheel carries the benchmark: installed into a fresh environment (conftest.py), the README's
main job and ``ncp demo`` play the bundled NCP-Bench specs from an empty directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.packaging.conftest import clean_env, run

pytestmark = pytest.mark.packaging

BENCH_SPECS = len(list((ROOT / "specs").glob("*.yaml")))


def test_the_wheel_holds_the_benchmark_and_imports_from_the_fresh_env(wheel_env: Path, empty_dir: Path):
    out = run([str(wheel_env / "python"), "-c", "import pytest_ncp, pathlib; "
                "from pytest_ncp.core.bundled import bundled_folder; "
                "print(pytest_ncp.__file__); print(bundled_folder('ncp-bench')); print(bundled_folder('ncp-gold'))"],
               cwd=empty_dir, env=clean_env()).stdout.split()
    package, bench, gold = (Path(p) for p in out)
    venv = wheel_env.parent
    assert package.is_relative_to(venv) and bench.is_relative_to(venv) and gold.is_relative_to(venv)
    assert len(list(bench.glob("*.yaml"))) == BENCH_SPECS
    assert (gold / "cases").is_dir() and (gold / "specs").is_dir()


def test_ncp_demo_and_validate_run_the_bundled_specs_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    env = clean_env()
    run([str(wheel_env / "ncp"), "validate", "ncp-bench"], cwd=empty_dir, env=env)
    run([str(wheel_env / "ncp"), "demo", "--max-turns", "2", "--out", "runs/demo"], cwd=empty_dir, env=env)
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert sorted(p.name for p in empty_dir.iterdir()) == ["runs"]  # nothing borrowed from a clone
    check = run([str(wheel_env / "ncp"), "calibrate", "--check"], cwd=empty_dir, env=env)
    assert "0 problem(s)" in check.stdout


def test_the_readme_main_job_runs_from_the_wheel_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    """The README's first command with a short story: every bundled spec collected and played."""
    proc = subprocess.run(
        [str(wheel_env / "python"), "-m", "pytest", "--ncp-specs=ncp-bench", "--ncp-demo",
         "--ncp-narrator=pytest_ncp.narrators:LLMNarrator", "--ncp-max-turns=2", "--ncp-min-survival=0.05@2",
         "--ncp-report=runs/demo", "-q", "-p", "no:cacheprovider"],
        cwd=empty_dir, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert (empty_dir / "runs" / "demo" / "report.html").is_file()
