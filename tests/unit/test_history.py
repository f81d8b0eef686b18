"""The run history (analysis/history.py, report/history.py): identity, migrations, comparable groups, the diff
through ncp compare's paired test, the pull-request summary (golden), and provenance read from a real git."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_ncp.analysis import history as h
from pytest_ncp.analysis.results import RunResults, build_results, write_results
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.engine.provenance import collect_provenance
from pytest_ncp.report.history import (MARKER, diff_lines, list_lines, pull_request_markdown, sparkline,
                                       trend_lines)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "history"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
CONFIG = {"narrator": "my_agent:Narrator", "auditor_model": "openai/judge", "player": "scripted", "max_turns": 30,
          "repeats": 1, "seed": 0, "survival_turn": 20, "prompt_version": "ncp-prompts/5",
          "environment": {"pytest_ncp": "0.1.0", "prompts": "p1", "world_rules": "w1"},
          "models": {"narrator": None, "player": None, "auditor": "openai/judge"}}


def episode(spec: str, fail_at: int | None = None, *, repeat: int = 0, kind: str = "commitment",
            commitments: dict[str, str] | None = None) -> dict[str, Any]:
    states = dict(commitments or {"C1": "SATISFIED", "C2": "PENDING"})
    if fail_at is None:
        return {"spec_id": spec, "repeat": repeat, "termination": "turn_limit", "turns": 30, "progress": 0.5,
                "satisfied": 0.5, "commitments": states, "tokens": 1000, "cost_usd": 0.01}
    if kind == "commitment":
        states["C2"] = "VIOLATED"
    return {"spec_id": spec, "repeat": repeat, "termination": f"conflict:{kind}", "turns": fail_at, "progress": 0.2,
            "satisfied": 0.0, "commitments": states, "tokens": 500, "cost_usd": 0.005,
            "failure": {"turn": fail_at, "type": kind, "commitment_ids": ["C2"] if kind == "commitment" else [],
                        "fact_ids": ["F1"] if kind == "fact" else [], "explanation": "broke it"}}


def provenance(commit: str, branch: str, started: str, *, spec_set: str = "s" * 16, **more: Any) -> dict[str, Any]:
    return {"commit": commit, "branch": branch, "base_branch": more.pop("base_branch", None), "dirty": False,
            "git": None, "started": started, "config_fingerprint": "f" * 16, "narrator": CONFIG["narrator"],
            "models": CONFIG["models"], "spec_set": spec_set, "specs": 8, "pytest_ncp": "0.1.0",
            "ci_run": more.pop("ci_run", None), **more}


def run(episodes: list[dict[str, Any]], prov: dict[str, Any] | None, *, config: dict[str, Any] | None = None,
        **kw: Any) -> RunResults:
    records = [EpisodeRecord.model_validate(e) for e in episodes]
    return build_results(config or CONFIG, records, survival_turn=20, provenance=prov, **kw)


# Eight specs; on the feature branch three that survived on main fail, and one first-failure turn moves.
BASE = [episode(f"s{i}") for i in range(6)] + [episode("s6", 12), episode("s7", 5, kind="fact")]
NEW = ([episode("s0"), episode("s1"), episode("s2", 4), episode("s3", 9), episode("s4", 15, kind="fact"), episode("s5")]
       + [episode("s6", 7), episode("s7", 5, kind="fact")])


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    conn = h.open_history(tmp_path / "h.sqlite")
    yield conn
    conn.close()


def test_adding_the_same_run_twice_is_a_no_op(db: sqlite3.Connection) -> None:
    results = run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00+00:00"))
    first, again = h.add_run(db, results, "runs/a"), h.add_run(db, results, "runs/a")
    assert (first.outcome, first.episodes, again.outcome, again.episodes) == ("added", 8, "unchanged", 0)
    assert first.run_id == again.run_id
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 8
    assert db.execute("SELECT COUNT(*) FROM commitments").fetchone()[0] == 16
    rows = db.execute("SELECT spec_id, termination, owner, failure_turn, failure_type, progress FROM episodes "
                      "WHERE spec_id IN ('s0', 's6') ORDER BY spec_id").fetchall()
    assert rows == [("s0", "turn_limit", "none", None, None, 0.5), ("s6", "conflict:commitment", "narrator", 12,
                                                                        "commitment", 0.2)]
    # Another run of the same commit (another start time) is another run.
    h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T11:00:00+00:00")))
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def test_shards_and_their_merged_folder_are_one_run(db: sqlite3.Connection) -> None:
    keys = [f"s{i}--r0" for i in range(8)]
    half = [k for i, k in enumerate(keys) if i % 2 == 0]
    one = run([e for e in BASE if f"{e['spec_id']}--r0" in half], provenance("a" * 40, "main", "2026-12-01T10:00:00"),
              expected=half, shard={"index": 1, "count": 2})
    two = run([e for e in BASE if f"{e['spec_id']}--r0" not in half],
              provenance("a" * 40, "main", "2026-12-01T10:03:00"), expected=sorted(set(keys) - set(half)),
              shard={"index": 2, "count": 2})
    merged = run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00"), merge={"sources": ["1", "2"]})
    outcomes = [h.add_run(db, r) for r in (one, two, merged)]
    assert [o.outcome for o in outcomes] == ["added", "extended", "unchanged"]
    assert len({o.run_id for o in outcomes}) == 1
    (row,) = h.list_runs(db)
    assert row.episodes == 8 and row.complete
    # One shard alone is not the whole run.
    other = h.open_history(Path(db.execute("PRAGMA database_list").fetchone()[2]).with_name("other.sqlite"))
    h.add_run(other, one)
    assert not h.list_runs(other)[0].complete
    other.close()


def test_a_database_of_a_newer_version_is_refused_and_an_empty_one_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    conn = h.open_history(path)
    assert h.schema_version(conn) == h.SCHEMA_VERSION
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {
        "meta", "runs", "episodes", "commitments"}
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(h.HistoryError, match=r"schema version 99 was written by a newer pytest-ncp.*upgrade"):
        h.open_history(path)
    (tmp_path / "junk.sqlite").write_text("not a database at all " * 100)
    with pytest.raises(h.HistoryError, match="not a usable history database"):
        h.open_history(tmp_path / "junk.sqlite")
    with pytest.raises(h.HistoryError, match="no history database here"):
        h.open_history(tmp_path / "missing.sqlite", create=False)


def test_runs_that_are_not_comparable_are_listed_apart_and_never_diffed(db: sqlite3.Connection) -> None:
    h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00")))
    h.add_run(db, run(NEW, provenance("b" * 40, "main", "2026-12-02T10:00:00")))
    other_auditor = {**CONFIG, "auditor_model": "openai/other-judge"}
    h.add_run(db, run(NEW, provenance("c" * 40, "main", "2026-12-03T10:00:00"), config=other_auditor))
    h.add_run(db, run(NEW, provenance("d" * 40, "main", "2026-12-04T10:00:00", spec_set="t" * 16)))
    runs = h.list_runs(db)
    assert [len(g) for g in h.groups(runs)] == [2, 1, 1]
    text = "\n".join(list_lines(runs))
    assert text.count("group ") == 3 and "auditor openai/other-judge" in text
    diff = h.diff_runs(db, runs[0], runs[2])
    assert not diff.comparable and diff.comparison is None
    assert diff.apart == ("auditor_model: openai/judge vs openai/other-judge",)
    assert "not comparable" in "\n".join(diff_lines(diff))


def test_the_diff_names_what_started_and_stopped_holding_with_the_paired_test(db: sqlite3.Connection) -> None:
    a = h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00")))
    b = h.add_run(db, run(NEW, provenance("b" * 40, "feature", "2026-12-02T10:00:00")))
    diff = h.diff_runs(db, h.find_run(db, a.run_id[:6]), h.find_run(db, "b" * 7))
    assert [c.spec_id for c in diff.specs_stopped] == ["s2", "s3", "s4"]
    assert [(c.spec_id, c.base_turn, c.new_turn) for c in diff.turns_moved] == [("s6", 12, 7)]
    assert [(c.spec_id, c.commitment_id, c.base, c.new) for c in diff.commitments_stopped] == [
        ("s2", "C2", "PENDING", "VIOLATED"), ("s3", "C2", "PENDING", "VIOLATED")]
    # The paired test is ncp compare's: the same Comparison a results.json pair gives.
    from pytest_ncp.analysis.compare import compare_runs

    direct = compare_runs(run(BASE, None), run(NEW, None), turn=20)
    assert (diff.comparison.b, diff.comparison.c, diff.comparison.p_value) == (direct.b, direct.c, direct.p_value)
    assert h.find_run(db, "feature").run_id == b.run_id


def test_the_pull_request_summary_is_the_golden_markdown(db: sqlite3.Connection) -> None:
    h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00")))
    h.add_run(db, run([episode(f"s{i}") for i in range(8)], provenance("e" * 40, "other", "2026-12-01T11:00:00")))
    new = h.add_run(db, run(NEW, provenance("b" * 40, "feature", "2026-12-02T10:00:00", base_branch="main")))
    row = h.find_run(db, new.run_id)
    diff = h.pull_request_diff(db, row)
    assert diff is not None and diff.base.commit == "a" * 40  # the base branch's run, not the later one elsewhere
    from pytest_ncp.report.history import episode_anchors

    text = pull_request_markdown(row, diff, base_branch="main", anchors=episode_anchors(h.rebuild(db, row.run_id)),
                                 report_url="https://ci.example/runs/{commit}/report.html")
    assert text.startswith(MARKER + "\n")
    golden = FIXTURES / "pr_summary.md"  # after an intended change: write `text` there, review the diff, commit
    assert text == golden.read_text(encoding="utf-8")


def test_the_summary_without_a_base_run_says_so(db: sqlite3.Connection) -> None:
    new = h.add_run(db, run(NEW, provenance("b" * 40, "feature", "2026-12-02T10:00:00")))
    row = h.find_run(db, new.run_id)
    assert h.pull_request_diff(db, row, base_branch="main") is None
    assert "**NO BASELINE**" in pull_request_markdown(row, None, base_branch="main")


def test_trend_has_a_sparkline_and_the_interval_per_commit(db: sqlite3.Connection) -> None:
    h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00")))
    h.add_run(db, run(NEW, provenance("b" * 40, "main", "2026-12-02T10:00:00")))
    lines = trend_lines(h.list_runs(db))
    assert lines[1].split(": ", 1)[1].startswith(sparkline([0.75, 0.375]))
    assert "aaaaaaaaaa" in lines[3] and "75.0%" in lines[3] and "%-" in lines[3]
    assert sparkline([0.0, 0.5, 1.0, None]) == "▁▅█·"


def test_filters_and_since(db: sqlite3.Connection) -> None:
    h.add_run(db, run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00+00:00")))
    h.add_run(db, run(NEW, provenance("b" * 40, "feature", "2026-12-03T10:00:00+00:00")))
    assert [r.commit[0] for r in h.list_runs(db, branch="feature")] == ["b"]
    assert [r.commit[0] for r in h.list_runs(db, since=h.parse_since("2026-12-02"))] == ["b"]
    assert [r.commit[0] for r in h.list_runs(db, since=h.parse_since("3d", now=NOW))] == ["a", "b"]
    assert len(h.list_runs(db, narrator="my_agent")) == 2 and h.list_runs(db, spec_set="zz") == []
    with pytest.raises(ValueError, match="--since 'yesterday'"):
        h.parse_since("yesterday")


# --- provenance from a real git ------------------------------------------------------------------------


class Spec:
    def __init__(self, id: str, fingerprint: str) -> None:
        self.id, self.fingerprint = id, fingerprint


def test_provenance_reads_commit_branch_and_dirty_flag_from_git(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", "trunk")
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    git("-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "one")
    prov = collect_provenance({**CONFIG, "api_base": "http://127.0.0.1:1234/v1"}, [Spec("x", "1")], cwd=tmp_path,
                              env={}, now=NOW)
    assert prov["commit"] == git("rev-parse", "HEAD") and len(prov["commit"]) == 40
    assert (prov["branch"], prov["dirty"], prov["git"], prov["base_branch"]) == ("trunk", False, None, None)
    (tmp_path / "a.txt").write_text("2")
    assert collect_provenance(CONFIG, [], cwd=tmp_path, env={})["dirty"] is True
    # On a pull request's merge checkout the CI names the branches; --branch wins over both.
    pr = collect_provenance(CONFIG, [], cwd=tmp_path, env={"GITHUB_HEAD_REF": "feat", "GITHUB_BASE_REF": "trunk",
                                                           "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "2"})
    assert (pr["branch"], pr["base_branch"], pr["ci_run"]) == ("feat", "trunk", "7.2")
    assert collect_provenance(CONFIG, [], cwd=tmp_path, env={"GITHUB_HEAD_REF": "feat"}, branch="mine")["branch"] == "mine"
    # The endpoint's URL is the host's, not the run's: the fingerprint ignores it.
    assert prov["config_fingerprint"] == collect_provenance(CONFIG, [], cwd=tmp_path, env={})["config_fingerprint"]
    assert prov["spec_set"] != collect_provenance(CONFIG, [Spec("x", "2")], cwd=tmp_path, env={})["spec_set"]


def test_outside_git_the_fields_are_null_and_say_why(tmp_path: Path) -> None:
    prov = collect_provenance(CONFIG, [], cwd=tmp_path, env={})
    assert (prov["commit"], prov["branch"], prov["dirty"]) == (None, None, None)
    assert "not in a git repository" in prov["git"]


def test_provenance_round_trips_through_results_json(tmp_path: Path) -> None:
    from pytest_ncp.analysis.results import load_results

    results = run(BASE, provenance("a" * 40, "main", "2026-12-01T10:00:00"))
    write_results(tmp_path, results)
    loaded = load_results(tmp_path)
    assert loaded.provenance is not None and loaded.provenance.commit == "a" * 40
    assert json.loads((tmp_path / "results.json").read_text())["provenance"]["branch"] == "main"
