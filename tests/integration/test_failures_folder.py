"""Stored failures as fixtures: a session keeps the fork point of every confirmed conflict; later sessions
run them first as fork[<spec>@t<turn>] tests until the narrator is fixed (also under pytest-xdist)."""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_ncp.cli import main
from pytest_ncp.testing import opening

AGENTS = textwrap.dedent('''
    class Breaks:
        def respond(self, player_input, context):
            if context.turn == 3:
                return "Alan laughs at the door, alive and well."
            return f"The fair is loud. You {player_input.lower().rstrip('.')}."

    class Fixed(Breaks):
        def respond(self, player_input, context):
            if context.turn == 3:
                return "Alan's grave lies quiet beneath the rain."
            return super().respond(player_input, context)
''')


@pytest.fixture
def studio(project):
    project.pytester.makepyfile(studio=AGENTS)
    project.server.add(step="conflict_check", regex=opening("narration") + r"[^<]*Alan laughs", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
        "explanation": "Alan was stated dead."}]})
    return project


def test_a_confirmed_conflict_is_stored_small_and_replayed_first(studio):
    folder = studio.pytester.path / "failures"
    first = studio.run("-v", f"--ncp-failures={folder}", narrator="studio:Breaks", max_turns=5)
    first.assert_outcomes(failed=1, passed=4, skipped=2)  # the episode; the two achievements never reached
    stored = folder / "caligari@t3.jsonl"
    assert stored.is_file()
    events = [json.loads(line) for line in stored.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "turn", "turn", "turn"]
    assert events[-1]["confirmed"][0]["quote"] == "Alan laughs at the door"
    assert "auditor_calls" not in events[-1] and "api_base" not in events[0]["config"]
    assert events[0]["spec_path"] == "../specs/caligari.yaml"
    assert stored.stat().st_size < 8000
    first.stdout.fnmatch_lines(["*stored 1 new failure(s) in *failures: caligari@t3*"])

    before = len(studio.server.requests)
    again = studio.run("-v", f"--ncp-failures={folder}", "--ncp-failures-only", narrator="studio:Breaks")
    again.assert_outcomes(failed=1, deselected=7)
    again.stdout.fnmatch_lines(["*failures/caligari@t3.jsonl::fork[[]caligari@t3[]] FAILED*",
                                "*still failing: 3 of 3 sample(s) at turn 3*",
                                "*stored failures: 0 of 1 pass*"])
    # Only turn 3 was played and audited: nothing before it was generated again.
    turns = {r.text.split("TURN ")[1].split(".")[0] for r in studio.server.requests[before:] if r.step}
    assert turns == {"3"}

    fixed = studio.run("-v", f"--ncp-failures={folder}", "--ncp-failures-only", narrator="studio:Fixed")
    fixed.assert_outcomes(passed=1, deselected=7)
    fixed.stdout.fnmatch_lines(["*stored failures: 1 of 1 pass*"])
    assert json.loads((folder / ".passes.json").read_text()) == {"caligari@t3.jsonl": 1}

    # A full session: the stored failure runs before the episodes; it never joins their metrics.
    full = studio.run("-v", f"--ncp-failures={folder}", f"--ncp-report={studio.pytester.path / 'out'}",
                      narrator="studio:Fixed", max_turns=5)
    lines = [l for l in full.stdout.lines if "::" in l and ("PASSED" in l or "FAILED" in l)]
    assert "fork[caligari@t3]" in lines[0], lines
    data = json.loads((studio.pytester.path / "out" / "results.json").read_text())
    assert len(data["episodes"]) == 1 and "fork" not in data["episodes"][0]
    assert json.loads((folder / ".passes.json").read_text()) == {"caligari@t3.jsonl": 2}

    # ncp failures list / prune: pruned after 2 passing sessions in a row.
    assert main(["failures", "list", str(folder)]) == 0
    assert main(["failures", "prune", str(folder), "--passed", "2"]) == 0
    assert not stored.exists()


def test_a_stored_failure_whose_spec_changed_is_an_error_naming_the_change(studio):
    studio.pytester.makeini("[pytest]\npythonpath = .\nncp_failures = failures\n")  # the ini key, relative to where pytest runs
    folder = studio.pytester.path / "failures"
    studio.run(narrator="studio:Breaks", max_turns=5)
    assert (folder / "caligari@t3.jsonl").is_file()
    spec = studio.pytester.path / "specs" / "caligari.yaml"
    spec.write_text(spec.read_text().replace("title: The Cabinet of Dr. Caligari", "title: The Cabinet"))
    result = studio.run("--ncp-failures-only", narrator="studio:Fixed")
    result.assert_outcomes(errors=1, deselected=7)
    result.stdout.fnmatch_lines(["*changed: title*", "*ncp failures prune*"])
    assert main(["failures", "prune", str(folder)]) == 0
    assert not (folder / "caligari@t3.jsonl").exists()


def test_stored_failures_are_stored_and_run_under_xdist(studio):
    folder = studio.pytester.path / "failures"
    first = studio.run_subprocess("-n", "2", f"--ncp-failures={folder}", narrator="studio:Breaks", max_turns=5)
    first.assert_outcomes(failed=1, passed=4, skipped=2)
    assert [p.name for p in folder.glob("*.jsonl")] == ["caligari@t3.jsonl"]  # stored by the controller
    result = studio.run_subprocess("-n", "2", f"--ncp-failures={folder}", narrator="studio:Fixed", max_turns=5)
    result.assert_outcomes(passed=6, skipped=2)  # the fork passes; the two achievements are never reached
    result.stdout.fnmatch_lines(["*stored failures: 1 of 1 pass*"])
    assert json.loads((folder / ".passes.json").read_text()) == {"caligari@t3.jsonl": 1}


def test_a_stored_failure_reads_no_episode():
    from pytest_ncp.plugin.collect import episode_of

    assert episode_of("failures/caligari@t3.jsonl::fork[caligari@t3]", 1) is None
    assert episode_of("specs/caligari.yaml::episode[caligari]", 1) == "caligari--r0"


def test_stored_failures_replay_from_cassettes(studio):
    folder, tapes = studio.pytester.path / "failures", studio.pytester.path / "tapes"
    studio.run(f"--ncp-failures={folder}", narrator="studio:Breaks", max_turns=5)
    tape = (f"--ncp-failures={folder}", "--ncp-failures-only", f"--ncp-cassettes={tapes}")
    studio.run(*tape, "--ncp-record-mode=once", narrator="studio:Breaks").assert_outcomes(failed=1, deselected=7)
    assert sorted(p.name for p in tapes.iterdir()) == [f"caligari--fork-t3-s{k}.yaml" for k in range(3)]
    args = studio.args(*tape, "--ncp-record-mode=none", narrator="studio:Breaks")
    studio.server.stop()  # replay only: no request may reach the server
    replayed = studio.pytester.runpytest(*args)
    replayed.assert_outcomes(failed=1, deselected=7)
    replayed.stdout.fnmatch_lines(["*still failing: 3 of 3 sample(s) at turn 3*"])


def test_named_test_paths_leave_stored_failures_out_unless_failures_only(studio):
    folder = studio.pytester.path / "failures"
    studio.run(f"--ncp-failures={folder}", narrator="studio:Breaks", max_turns=5)
    named = studio.run("specs/caligari.yaml", f"--ncp-failures={folder}", narrator="studio:Fixed", max_turns=5)
    named.assert_outcomes(passed=5, skipped=2)  # the spec's 7 tests, no fork[...]
    only = studio.run("specs/caligari.yaml", f"--ncp-failures={folder}", "--ncp-failures-only", narrator="studio:Fixed")
    only.assert_outcomes(passed=1, deselected=7)
