"""core.files.atomic_write_text: the one way files are written whole (results, reviews, cassettes, specs)."""

from __future__ import annotations

import os

import pytest

from pytest_ncp.core import files
from pytest_ncp.core.files import atomic_write_text


def test_writes_the_text_exactly_creating_the_folder(tmp_path):
    target = tmp_path / "run" / "results.json"
    assert atomic_write_text(target, "a\r\nb\n\u00e9") == target
    assert target.read_bytes() == "a\r\nb\n\u00e9".encode("utf-8")
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]


def test_the_text_is_on_disk_before_the_rename(tmp_path, monkeypatch):
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(files.os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1])
    atomic_write_text(tmp_path / "x.json", "{}")
    assert order == ["fsync", "replace"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "reviews.json"
    target.write_text("old")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["reviews.json"]
