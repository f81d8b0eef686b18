"""The run history end to end: two real ``ncp history add`` processes at once, two runs of the scripted server on
two commits of a scratch git repository (list, trend, diff, the pull-request summary), the history page in
headless Chromium, and ``--estimate --history``."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ncp.analysis import history as h
from pytest_ncp.analysis.results import write_results
from pytest_ncp.cli import main
from tests.unit.test_history import BASE, NEW, provenance, run

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


def _ncp(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from pytest_ncp.cli import main; sys.exit(main(sys.argv[1:]))", *args]


def test_two_concurrent_adds_leave_a_consistent_database(tmp_path: Path) -> None:
    # Forty runs per process, twenty of them added by both: the writes contend with the other process's.
    folders = []
    for i in range(60):
        folder = tmp_path / f"run{i}"
        write_results(folder, run(BASE if i % 2 else NEW, provenance(f"{i:040x}", "main", f"2026-12-01T{10 + i // 60}:{i % 60:02d}:00")))
        folders.append(str(folder))
    mine, theirs = folders[:40], folders[20:]
    db = tmp_path / "h.sqlite"
    # Each process opens its FIFO for reading first, which blocks until this test opens the other end: both are
    # released at once, after both have started (no sleep, no timing).
    gates = [tmp_path / "go0", tmp_path / "go1"]
    for g in gates:
        os.mkfifo(g)
    # Everything is imported before the gate, so the two processes write at the same time, not one after the other.
    script = ("import sys; from pytest_ncp.cli import main; import pytest_ncp.analysis.history, "
              "pytest_ncp.analysis.results, pytest_ncp.cli.history; open(sys.argv[1]).read(); "
              "sys.exit(main(['history', 'add', '--db', sys.argv[2], *sys.argv[3:]]))")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(g), str(db), *runs], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for g, runs in zip(gates, (mine, theirs))]
    ends = [open(g, "w") for g in gates]  # blocks until that process is waiting on it
    for end in ends:
        end.close()
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 60
    assert conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 60 * 8
    assert conn.execute("SELECT COUNT(*) FROM commitments").fetchone()[0] == 60 * 16
    per_run = conn.execute("SELECT MIN(n), MAX(n) FROM (SELECT COUNT(*) n FROM episodes GROUP BY run_id)").fetchone()
    assert per_run == (8, 8)
    conn.close()
    # The twenty runs both added were recorded once, by whichever came first; the other said so.
    said = outputs[0][0] + outputs[1][0]
    assert said.count("already recorded") == 20


def _demo_narrator(repo: Path) -> None:
    """A narrator whose behaviour is in a file of the repository, so two commits play differently."""
    (repo / "history_narrator.py").write_text(
        "from pathlib import Path\n\n\n"
        "class Narrator:\n"
        "    def respond(self, player_input, context):\n"
        "        broken = Path(__file__).with_name('broken.txt').read_text().split()\n"
        "        if context.spec.id in broken and context.turn >= 1:\n"
        "            raise RuntimeError('narrator bug')\n"
        "        return f\"You {player_input.rstrip('.!?')[2:] or 'wait'}. The world answers, and the story moves.\"\n")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def two_commits(tmp_path: Path, ncp_model_server, monkeypatch: pytest.MonkeyPatch, capsys) -> dict[str, object]:
    """Two runs (scripted server, demo script) on two commits of a scratch repository, recorded into one database:
    on main the narrator breaks off aelita at turn 1; the fix on a branch lets aelita reach a commitment conflict."""
    from pytest_ncp.testing.demo import install_demo_script

    install_demo_script(ncp_model_server)
    repo = tmp_path / "repo"
    (repo / "specs").mkdir(parents=True)
    for name in ("aelita", "caligari", "metropolis", "nosferatu"):
        shutil.copy(SPECS / f"{name}.yaml", repo / "specs")
    _demo_narrator(repo)
    (repo / "broken.txt").write_text("aelita\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "v1")
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    for name in ("GITHUB_HEAD_REF", "GITHUB_BASE_REF", "GITHUB_REF_NAME", "GITHUB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    db = repo / "history.sqlite"
    args = ["run", "--narrator", "history_narrator:Narrator", "--specs", "specs", "--api-base",
            ncp_model_server.base_url, "--auditor-model", "openai/demo-auditor", "--max-turns", "20",
            "--workers", "1", "--history", str(db)]
    main([*args, "--out", "runs/v1"])
    first = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-qb", "fix")
    (repo / "broken.txt").write_text("\n")
    _git(repo, "commit", "-qam", "v2: aelita no longer breaks off")
    main([*args, "--out", "runs/v2"])
    capsys.readouterr()
    return {"repo": repo, "db": db, "first": first, "second": _git(repo, "rev-parse", "HEAD")}


def test_two_commits_list_diff_and_pull_request_summary(two_commits, capsys) -> None:
    db, first, second = str(two_commits["db"]), str(two_commits["first"]), str(two_commits["second"])
    assert main(["history", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert first[:10] in listed and second[:10] in listed and "group 2" not in listed
    assert "survival@20" in listed and "95% CI" in listed
    assert [line.split()[3] for line in listed.splitlines()[2:4]] == [first[:10], second[:10]]
    assert main(["history", "trend", "--db", db]) == 0
    trend = capsys.readouterr().out
    assert "survival@20: " in trend and first[:10] in trend

    assert main(["history", "diff", "--db", db, first[:8], "fix"]) == 0
    diff = capsys.readouterr().out
    assert "first-failure turns that moved: 1\n  aelita[r0]: error (narrator) at turn 1 -> conflict:commitment" in diff
    assert "commitments that stopped holding (violated in B, not in A): 1\n  aelita[r0] C4: PENDING -> VIOLATED" in diff
    assert "McNemar" in diff

    assert main(["report", "--history", db, "--markdown", "--base", "main"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("<!-- ncp-history -->\n## NCP-Bench: survival@20 on `fix` vs `main`")
    assert first[:10] in markdown and second[:10] in markdown
    assert "`aelita[r0]` `C4`: PENDING -> VIOLATED" in markdown

    # A run recorded twice (the folder again) is a no-op.
    assert main(["history", "add", "--db", db, str(two_commits["repo"] / "runs" / "v2")]) == 0
    assert "already recorded" in capsys.readouterr().out
    results = json.loads((two_commits["repo"] / "runs" / "v2" / "results.json").read_text())
    assert results["provenance"]["commit"] == second and results["provenance"]["branch"] == "fix"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_history_page_renders_in_headless_chromium(two_commits, tmp_path: Path, capsys) -> None:
    page = tmp_path / "history.html"
    assert main(["report", "--history", str(two_commits["db"]), "--html", str(page)]) == 0
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1200"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180,
                         check=True).stdout
    from tests.engine.test_report_html import elements

    found = elements(dom)
    points = [a for t, a in found.tags if t == "circle" and "point" in (a.get("class") or "")]
    assert len(points) == 2
    links = [a["href"] for t, a in found.tags if t == "a" and a.get("href")]
    # Each point opens its run's report (the pytest-less runs have results.json; a report.html when written).
    assert any(link.endswith("runs/v1/results.json") for link in links)
    assert any(link.endswith("runs/v2/results.json") for link in links)
    assert [a for t, a in found.tags if t == "line" and a.get("class") == "interval"]


def test_history_page_has_a_point_per_run_linking_to_its_report(two_commits, tmp_path: Path) -> None:
    """The same page without a browser: the points, their intervals and links, and nothing that runs."""
    page = tmp_path / "history.html"
    assert main(["report", "--history", str(two_commits["db"]), "--html", str(page)]) == 0
    from tests.engine.test_report_html import elements

    found = elements(page.read_text())
    assert len([a for t, a in found.tags if t == "circle" and "point" in (a.get("class") or "")]) == 2
    assert not {t for t, _ in found.tags} & {"script", "img", "iframe", "link"}
    hrefs = [a["href"] for t, a in found.tags if t == "a"]
    assert (tmp_path / hrefs[0]).resolve() == (two_commits["repo"] / "runs" / "v1" / "results.json").resolve()


def test_estimate_uses_the_last_comparable_runs_measured_tokens(two_commits, capsys) -> None:
    repo = two_commits["repo"]
    base = ["run", "--narrator", "history_narrator:Narrator", "--specs", "specs", "--auditor-model",
            "openai/demo-auditor", "--max-turns", "20", "--estimate"]
    assert main([*base, "--history", str(two_commits["db"])]) == 0
    out = capsys.readouterr().out
    conn = h.open_history(two_commits["db"])
    latest = h.list_runs(conn)[-1]
    conn.close()
    assert f"expected from history: {latest.tokens:,} tokens" in out and latest.run_id[:10] in out
    assert main([*base, "--max-turns", "15", "--history", str(two_commits["db"])]) == 0
    assert "no comparable run in the history" in capsys.readouterr().out


def test_shards_and_their_merge_from_real_runs_are_recorded_once(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # outside git: the provenance says so, and the shards still pair up
    specs = [str(SPECS / f"{n}.yaml") for n in ("aelita", "caligari", "metropolis", "nosferatu")]
    for i in (1, 2):
        assert main(["demo", "--specs", *specs, "--max-turns", "5", "--shard", f"{i}/2", "--out", f"s{i}"]) == 0
    assert main(["merge", "s1", "s2", "--out", "all"]) == 0
    capsys.readouterr()
    assert main(["history", "add", "s1", "s2", "all", "--db", "h.sqlite"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert ["recorded (2" in said[0], "2 more episode(s)" in said[1], "already recorded" in said[2]] == [True] * 3
    conn = h.open_history("h.sqlite")
    (row,) = h.list_runs(conn)
    conn.close()
    assert row.episodes == 4 and row.complete and row.commit is None
    assert "not in a git repository" in json.loads((tmp_path / "all" / "results.json").read_text())["provenance"]["git"]
