"""--ncp-history records the session's run (summary, episodes, commitments, provenance) at its end."""

from __future__ import annotations

import json
import sqlite3


def test_the_session_is_recorded_with_its_provenance_and_again_is_another_run(project):
    db = project.pytester.path / "hist" / "h.sqlite"
    out = project.pytester.path / "out"
    result = project.run("-q", f"--ncp-report={out}", f"--ncp-history={db}", "--ncp-branch=feature-x")
    result.stdout.fnmatch_lines([f"history: recorded in {db}"])
    prov = json.loads((out / "results.json").read_text())["provenance"]
    assert prov["branch"] == "feature-x" and prov["specs"] == 1 and len(prov["spec_set"]) == 16
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT branch, episodes, source FROM runs").fetchall() == [("feature-x", 1, str(out))]
    assert conn.execute("SELECT spec_id, termination FROM episodes").fetchall()[0][0] == "caligari"
    assert conn.execute("SELECT COUNT(*) FROM commitments").fetchone()[0] > 0
    conn.close()
    # A second session is a second run (another start), never a copy of the first.
    project.run("-q", f"--ncp-history={db}")
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    conn.close()


def test_a_history_of_a_newer_version_is_reported_and_the_verdict_stands(project):
    db = project.pytester.path / "h.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '42')")
    conn.commit()
    conn.close()
    result = project.run("-q", f"--ncp-history={db}")
    assert result.ret == project.run("-q").ret  # the verdict is the session's, recorded or not
    result.stdout.fnmatch_lines(["history: --ncp-history *h.sqlite: the run was not recorded: *schema version 42 "
                                 "was written by a newer pytest-ncp*"])


def test_the_spec_set_is_what_the_session_collected(project):
    project.twin("twin-a")
    out_all, out_one = project.pytester.path / "all", project.pytester.path / "one"
    project.run("-q", f"--ncp-report={out_all}")
    project.run("-q", "specs/caligari.yaml", f"--ncp-report={out_one}")
    every, one = (json.loads((o / "results.json").read_text())["provenance"] for o in (out_all, out_one))
    assert (every["specs"], one["specs"]) == (2, 1) and every["spec_set"] != one["spec_set"]
