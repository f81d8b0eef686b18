"""The bundled benchmark by name (core/bundled.py), and pyproject's package list that installs it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_ncp.core.bundled import BENCH, GOLD, bundled_folder, resolve
from pytest_ncp.core.options import path_or_bundled
from tests.conftest import ROOT


def test_the_names_stand_for_the_benchmark_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    assert resolve(BENCH) == bundled_folder(BENCH)
    assert len(list(resolve(BENCH).glob("*.yaml"))) == len(list((ROOT / "specs").glob("*.yaml")))
    assert resolve(f"{BENCH}/caligari.yaml").read_text(encoding="utf-8") == (ROOT / "specs" / "caligari.yaml").read_text(encoding="utf-8")
    assert (resolve(GOLD) / "cases").is_dir()
    assert resolve(tmp_path / BENCH) == bundled_folder(BENCH)  # an ini's `paths` value: <inidir>/ncp-bench
    assert path_or_bundled(BENCH) == str(bundled_folder(BENCH))


def test_a_folder_of_that_name_wins_and_other_paths_stay_as_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / BENCH).mkdir()
    assert resolve(BENCH) == Path(BENCH)
    assert resolve("specs/x.yaml") == Path("specs/x.yaml")
    assert path_or_bundled("nosuch") == "nosuch"


def test_every_folder_of_the_package_is_built_and_the_benchmark_is_mapped_in():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {"pytest_ncp", *(f"pytest_ncp.{p.parent.name}" for p in (ROOT / "pytest_ncp").glob("*/__init__.py"))}
    assert set(setuptools["packages"]) == folders | {"pytest_ncp.bench.specs", "pytest_ncp.bench.calibration"}
    assert setuptools["package-dir"] == {"pytest_ncp.bench.specs": "specs",
                                         "pytest_ncp.bench.calibration": "calibration"}
