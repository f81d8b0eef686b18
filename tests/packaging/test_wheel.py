"""The built wheel carries the benchmark: installed into a fresh environment (conftest.py), the README's
main job and ``ncp demo`` play the bundled NCP-Bench specs from an empty directory."""

from __future__ import annotations

import json
import shlex
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
    # The gold set v4 on the live specs: no frozen spec copies, and the v3 snippets (calibration/legacy/) stay out.
    cases = sorted(p.name for p in (gold / "cases").glob("*.yaml"))
    assert cases == sorted(p.name for p in (ROOT / "calibration" / "cases").glob("*.yaml"))
    assert cases and all(name.endswith("-v4.yaml") for name in cases)
    assert not (gold / "specs").exists() and not (gold / "legacy").exists()


def test_ncp_demo_and_validate_run_the_bundled_specs_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    env = clean_env()
    run([str(wheel_env / "ncp"), "validate", "ncp-bench"], cwd=empty_dir, env=env)
    run([str(wheel_env / "ncp"), "demo", "--max-turns", "2", "--out", "runs/demo"], cwd=empty_dir, env=env)
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert sorted(p.name for p in empty_dir.iterdir()) == ["runs"]  # nothing borrowed from a clone
    check = run([str(wheel_env / "ncp"), "calibrate", "--check"], cwd=empty_dir, env=env)
    assert "0 problem(s)" in check.stdout


def readme_main_job() -> tuple[str, list[str]]:
    """The README's first command: (how it installs, the pytest command as a list)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.split("```bash\n", 1)[1].splitlines()[0]
    install, _, job = first.split("#", 1)[0].partition(" && ")
    return install.strip(), shlex.split(job)


def test_the_readme_main_job_runs_from_the_wheel_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    """The README's first command, with a short story: every bundled spec collected and played."""
    install, job = readme_main_job()
    assert install == "pip install -e ."  # the main job needs no test extra
    assert job[:3] == ["python", "-m", "pytest"] and "--ncp-max-turns=20" in job and "--ncp-min-survival=0.05@20" in job
    short = [{"--ncp-max-turns=20": "--ncp-max-turns=2", "--ncp-min-survival=0.05@20": "--ncp-min-survival=0.05@2"}
             .get(a, a) for a in job[3:]]
    proc = subprocess.run([str(wheel_env / "python"), "-m", "pytest", *short, "-q", "-p", "no:cacheprovider"],
                          cwd=empty_dir, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((empty_dir / "runs" / "demo" / "results.json").read_text(encoding="utf-8"))
    assert len(results["episodes"]) == BENCH_SPECS
    assert (empty_dir / "runs" / "demo" / "report.html").is_file()


def test_the_ci_workflow_commands_run_from_the_wheel_in_an_empty_directory(wheel_env: Path, empty_dir: Path):
    """docs/ci.md's pytest and report commands, offline: the demo's scripted models stand in for the real ones
    (which have the prices the cost cap needs, so the cap is left out), two of the bundled specs (the README's
    main job plays all of them), a short story, one process."""
    from tests.engine.test_ci_recipe import _commands, _workflow

    commands = _commands(_workflow())
    gated = next(c for c in commands if c[:3] == ["python", "-m", "pytest"])
    swap = {"--ncp-narrator=my_agent:Narrator": "--ncp-narrator=pytest_ncp.narrators:LLMNarrator",
            "--ncp-max-turns=20": "--ncp-max-turns=2", "--ncp-min-survival=0.4@20": "--ncp-min-survival=0.05@2"}
    args = [swap.get(a, a) for a in gated[3:] if not a.startswith("--ncp-max-cost=")]
    assert "--ncp-specs=ncp-bench" in args and args[args.index("-n"):][:2] == ["-n", "4"]
    args[args.index("-n") + 1] = "0"
    at = args.index("--ncp-specs=ncp-bench")
    args[at:at + 1] = ["--ncp-specs=ncp-bench/caligari.yaml", "--ncp-specs=ncp-bench/dracula.yaml"]
    proc = subprocess.run([str(wheel_env / "python"), "-m", "pytest", *args, "--ncp-demo", "-q", "-p",
                           "no:cacheprovider"], cwd=empty_dir, env=clean_env(), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (empty_dir / "runs" / "ci" / "junit.xml").is_file() and any((empty_dir / "cassettes").iterdir())
    report = next(c for c in commands if c[:2] == ["ncp", "report"])
    out = run([str(wheel_env / "ncp"), *report[1:]], cwd=empty_dir, env=clean_env()).stdout
    assert "survival@" in out


def test_bundled_specs_named_on_the_command_line_run_under_xdist(wheel_env: Path, empty_dir: Path):
    """Workers get the installed folder as their argument: they must collect it as specs too."""
    proc = subprocess.run(
        [str(wheel_env / "python"), "-m", "pytest", "ncp-bench/caligari.yaml", "ncp-bench/dracula.yaml", "-n", "2",
         "--ncp-demo", "--ncp-narrator=pytest_ncp.narrators:LLMNarrator", "--ncp-max-turns=3",
         "--ncp-min-survival=0.05@3", "--ncp-report=runs/x", "-q", "-p", "no:cacheprovider"],
        cwd=empty_dir, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((empty_dir / "runs" / "x" / "results.json").read_text(encoding="utf-8"))
    assert sorted(e["spec_id"] for e in results["episodes"]) == ["caligari", "dracula"]
