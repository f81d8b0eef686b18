"""docs/ci.md's GitHub Actions workflow is valid YAML whose ncp/pytest commands and options exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import yaml

from tests.conftest import ROOT

DOC = ROOT / "docs" / "ci.md"


def _workflow() -> dict:
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
