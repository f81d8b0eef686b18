"""docs/ci.md's history workflow: valid YAML, every ncp option exists, and its record step, run for real against a
local bare repository standing in for GitHub, keeps one results file per run on the ncp-history branch from which
the pull-request summary is built."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from pytest_ncp.analysis.results import write_results
from pytest_ncp.cli import _parser, main
from tests.conftest import ROOT
from tests.unit.test_history import BASE, NEW, provenance, run

DOC = ROOT / "docs" / "ci.md"


def _workflow() -> dict:
    section = DOC.read_text(encoding="utf-8").split("## A history and a pull-request comment", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "the history section of docs/ci.md has no yaml block"
    return yaml.safe_load(block.group(1))


def _step(workflow: dict, name: str) -> str:
    return next(s["run"] for s in workflow["jobs"]["ncp"]["steps"] if s.get("name", "").startswith(name))


def test_the_workflow_records_every_run_and_edits_one_comment() -> None:
    workflow = _workflow()
    assert set(workflow[True]) == {"pull_request", "push"}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "write", "pull-requests": "write"}
    steps = {s.get("name"): s for s in workflow["jobs"]["ncp"]["steps"]}
    for name in ("Record the run on the ncp-history branch", "Comment on the pull request"):
        assert steps[name]["if"].startswith("always()")  # a run whose gate failed is recorded and shown too
    comment = _step(workflow, "Comment on the pull request")
    assert 'startswith("<!-- ncp-history -->")' in comment and "gh api -X PATCH" in comment
    parser = _parser()
    commands = [shlex.split(line.split(">", 1)[0]) for line in comment.splitlines() if line.strip().startswith("ncp ")]
    assert [c[:2] for c in commands] == [["ncp", "history"], ["ncp", "report"]]
    for command in commands:  # argparse exits on an unknown option
        parser.parse_args(command[1:])


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_the_record_step_keeps_one_results_file_per_run_on_the_branch(tmp_path: Path, capsys) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "clone", "-q", str(origin), str(seed)], check=True, capture_output=True)
    (seed / "README").write_text("project\n")
    for args in (["add", "README"], ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "one"],
                 ["push", "-q", "origin", "HEAD:refs/heads/main"]):
        subprocess.run(["git", *args], cwd=seed, check=True, capture_output=True)
    record = _step(_workflow(), "Record the run on the ncp-history branch")
    for i, (episodes, branch) in enumerate(((BASE, "main"), (NEW, "feature"))):
        job = tmp_path / f"job{i}"  # each CI job starts from a fresh checkout
        subprocess.run(["git", "clone", "-q", "-b", "main", str(origin), str(job)], check=True, capture_output=True)
        write_results(job / "runs" / "ci", run(episodes, provenance(f"{i + 1:x}" * 40, branch, f"2026-12-0{i + 1}T10:00:00",
                                                                    base_branch="main" if i else None)))
        done = _bash(record, job, GITHUB_RUN_ID=str(100 + i), GITHUB_RUN_ATTEMPT="1", GITHUB_SHA=f"{i + 1:x}" * 40)
        assert done.returncode == 0, done.stderr
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", "ncp-history"], cwd=origin, check=True,
                           capture_output=True, text=True).stdout.split()
    assert len(files) == 2 and all(f.startswith("runs/") and f.endswith(".json") for f in files)
    # The comment step rebuilds the database from the branch and writes the summary.
    db = tmp_path / "job1" / ".ncp" / "history.sqlite"
    assert main(["history", "add", str(tmp_path / "job1" / ".ncp-history" / "runs"), "--db", str(db)]) == 0
    assert main(["report", "--history", str(db), "--markdown", "--run", "2" * 40]) == 0
    summary = capsys.readouterr().out
    assert "## NCP-Bench: survival@20 on `feature` vs `main`" in summary and "### Newly failing specs (3)" in summary


def test_two_jobs_pushing_at_once_both_land_on_the_branch(tmp_path: Path) -> None:
    """Both jobs commit on the same branch tip, then push together: one push is refused, that job rebases onto the
    other's commit (new files only: no conflict) and pushes again. Released by FIFOs from pre-push hooks."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "clone", "-q", str(origin), str(seed)], check=True, capture_output=True)
    (seed / "README").write_text("project\n")
    for args in (["add", "README"], ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "one"],
                 ["push", "-q", "origin", "HEAD:refs/heads/main"],
                 ["push", "-q", "origin", "HEAD:refs/heads/ncp-history"]):  # an existing history branch
        subprocess.run(["git", *args], cwd=seed, check=True, capture_output=True)
    record = _step(_workflow(), "Record the run on the ncp-history branch")
    jobs = []
    for i in range(2):
        job = tmp_path / f"job{i}"
        subprocess.run(["git", "clone", "-q", "-b", "main", str(origin), str(job)], check=True, capture_output=True)
        write_results(job / "runs" / "ci", run(BASE, provenance(f"{i + 1:x}" * 40, "main", f"2026-12-0{i + 1}T10:00")))
        ready, go = tmp_path / f"ready{i}", tmp_path / f"go{i}"
        os.mkfifo(ready)
        os.mkfifo(go)
        hook = job / ".git" / "hooks" / "pre-push"  # the first push of each job waits for the other's commit
        hook.write_text(f"#!/bin/sh\nif [ ! -e {tmp_path}/once{i} ]; then touch {tmp_path}/once{i}; "
                        f"echo > {ready}; cat {go} > /dev/null; fi\nexit 0\n")
        hook.chmod(0o755)
        jobs.append(subprocess.Popen(["bash", "-euo", "pipefail", "-c", record], cwd=job, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "GITHUB_RUN_ID": str(200 + i), "GITHUB_RUN_ATTEMPT": "1",
                                          "GITHUB_SHA": f"{i + 1:x}" * 40}))
    for i in range(2):  # both jobs have committed on the same tip and wait in their pre-push hook
        with open(tmp_path / f"ready{i}") as waiting:
            waiting.read()
    ends = [open(tmp_path / f"go{i}", "w") for i in range(2)]
    for end in ends:
        end.close()
    outputs = [j.communicate(timeout=120) for j in jobs]
    assert [j.returncode for j in jobs] == [0, 0], outputs
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", "ncp-history"], cwd=origin, check=True,
                           capture_output=True, text=True).stdout.split()
    assert len([f for f in files if f.startswith("runs/")]) == 2
