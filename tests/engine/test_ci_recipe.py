"""docs/ci.md's GitHub Actions workflow (and the one `ncp init` writes) is valid YAML whose ncp/pytest commands
and options exist, that caps the cost, keeps cassettes and reports when the gate fails, and says what a pull
request from a fork (no secrets) gets; docs/ci.md lists every exit code."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
import yaml

from pytest_ncp.core.exit_codes import EXIT_COST_CAP, EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tests.conftest import ROOT

DOC = ROOT / "docs" / "ci.md"
STARTER = ROOT / "pytest_ncp" / "cli" / "starter" / "narrator.yml.tmpl"


def _workflow(source: str = "doc") -> dict:
    if source == "starter":
        return yaml.safe_load(STARTER.read_text(encoding="utf-8"))
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/ci.md has no yaml block"
    return yaml.safe_load(block.group(1))


def _commands(workflow: dict) -> list[list[str]]:
    commands = []
    for step in workflow["jobs"]["ncp"]["steps"]:
        if "run" in step:
            text = " ".join(step["run"].split("\n")) if step["run"].startswith("python -m pytest") else step["run"]
            for line in text.splitlines():
                line = line.split("#", 1)[0].split(">>", 1)[0].strip()
                if line.startswith(("python -m pytest", "ncp ")):
                    commands.append(shlex.split(line))
    return commands


def test_the_workflow_is_valid_and_gates_with_the_plugin():
    workflow = _workflow()
    steps = workflow["jobs"]["ncp"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/cache") for u in uses) and any(u.startswith("actions/upload-artifact") for u in uses)
    commands = _commands(workflow)
    pytest_cmd = next(c for c in commands if c[:3] == ["python", "-m", "pytest"])
    assert any(a.startswith("--ncp-min-survival=") for a in pytest_cmd)
    assert any(a.startswith("--junit-xml=") for a in pytest_cmd)
    assert any(c[:2] == ["ncp", "report"] and "--markdown" in c for c in commands)


def test_every_option_in_the_workflow_exists():
    commands = _commands(_workflow())
    pytest_help = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True,
                                 cwd=ROOT, timeout=120).stdout
    for command in commands:
        if command[:3] == ["python", "-m", "pytest"]:
            help_text = pytest_help
        else:
            help_text = subprocess.run([sys.executable, "-m", "pytest_ncp.cli", *command[1:2], "--help"],
                                       capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
        for arg in command:
            if arg.startswith("-") and arg != "-n":
                flag = arg.split("=", 1)[0]
                assert flag in help_text, f"{flag} of {' '.join(command)} is not an option"
    assert "-n numprocesses" in pytest_help or "--numprocesses" in pytest_help


@pytest.mark.parametrize("source", ["doc", "starter"])
def test_the_workflow_caps_cost_keeps_cassettes_and_reports_whatever_the_gate_says(source: str):
    workflow = _workflow(source)
    steps = workflow["jobs"]["ncp"]["steps"]
    gated = next(c for c in _commands(workflow) if c[:3] == ["python", "-m", "pytest"] and
                 any(a.startswith("--ncp-min-survival=") for a in c))
    assert any(a.startswith("--ncp-max-cost=") for a in gated)
    uses = [s.get("uses", "") for s in steps]
    # actions/cache saves only after a successful job and only on a key miss: cassettes of a failed gate are lost.
    assert not any(u.startswith("actions/cache@") for u in uses)
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save"))
    assert "always()" in save["if"] and "github.run_id" in save["with"]["key"]
    for step in steps:
        if "ncp report" in str(step.get("run", "")) or step.get("uses", "").startswith("actions/upload-artifact"):
            assert "always()" in step.get("if", ""), step


@pytest.mark.parametrize("source", ["doc", "starter"])
def test_a_pull_request_without_secrets_is_told_so_and_runs_no_gate(source: str):
    steps = _workflow(source)["jobs"]["ncp"]["steps"]
    key = next(s for s in steps if "OPENAI_API_KEY" in str(s.get("env", {})) and "GITHUB_OUTPUT" in s.get("run", ""))
    assert "fork" in key["run"] and "GITHUB_STEP_SUMMARY" in key["run"]
    for step in steps:
        if "--ncp-min-survival" in str(step.get("run", "")):
            assert f"steps.{key['id']}.outputs.present == 'true'" in step["if"]


def test_the_exit_codes_section_lists_every_code():
    section = DOC.read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    listed = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert {EXIT_OK, EXIT_FAILED, EXIT_USAGE, 4, 5, EXIT_ERROR_BUDGET, EXIT_COST_CAP} <= listed
