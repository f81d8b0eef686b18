"""example_tests/ is what a studio copies: it runs unchanged in a new project with only the package
installed (no conftest.py of this repository, no specs/ folder beside it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.packaging.conftest import clean_env

pytestmark = pytest.mark.packaging


def test_the_examples_pass_when_copied_into_a_new_project(wheel_env: Path, empty_dir: Path):
    shutil.copytree(ROOT / "example_tests", empty_dir / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    assert not (empty_dir / "conftest.py").exists() and not (empty_dir / "specs").exists()
    proc = subprocess.run([str(wheel_env / "python"), "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"],
                          cwd=empty_dir, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "error" not in proc.stdout.splitlines()[-1]
