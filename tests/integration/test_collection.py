"""Collection: ids carry spec and commitment ids, deterministic and sorted; -k and bad specs behave."""

from __future__ import annotations

from tests.integration.conftest import FACT_CONFLICT


def test_ids_for_episodes_and_commitments(project):
    project.twin("a-twin")
    result = project.run("--collect-only", "-q")
    lines = [x for x in result.stdout.lines if "::" in x]
    assert lines == [
        "specs/a-twin.yaml::episode[a-twin]",
        *[f"specs/a-twin.yaml::commitment[a-twin:C{i}]" for i in range(1, 7)],
        "specs/caligari.yaml::episode[caligari]",
        *[f"specs/caligari.yaml::commitment[caligari:C{i}]" for i in range(1, 7)],
    ]


def test_repeats_get_their_own_ids(project):
    result = project.run("--collect-only", "-q", "--ncp-repeats=2")
    result.stdout.fnmatch_lines(["specs/caligari.yaml::episode?caligari-r0?",
                                 "specs/caligari.yaml::commitment?caligari-r1:C6?"])


def test_keyword_selection_runs_only_what_was_asked(project):
    result = project.run("-k", "caligari and C3", "-q")
    result.stdout.fnmatch_lines(["*1 passed, 6 deselected*"])
    # The episode ran once for the selected commitment test.
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 4


def test_marker_selects_narrative_tests(project):
    project.pytester.makepyfile(test_plain="def test_ok(): pass")
    result = project.run("-m", "not ncp", "-q")
    result.stdout.fnmatch_lines(["*1 passed, 7 deselected*"])


def test_invalid_spec_is_an_error_for_that_file_only(project):
    bad = (project.pytester.path / "specs" / "caligari.yaml").read_text().replace("kind: ordering", "kind: sequence", 1)
    project.add_spec("broken.yaml", bad.replace("id: caligari\n", "id: broken\n", 1))
    result = project.run("-q")
    project.succeed_at(3)
    result = project.run("-q")
    result.stdout.fnmatch_lines(["*specs/broken.yaml:*: commitments?2?.kind: got 'sequence'*",
                                 "*7 passed, 1 error*"])


def test_duplicate_spec_ids_are_reported(project):
    project.add_spec("copy.yaml", (project.pytester.path / "specs" / "caligari.yaml").read_text())
    project.succeed_at(3)
    result = project.run("-q")
    result.stdout.fnmatch_lines(["*duplicate spec id 'caligari'*", "*7 passed, 1 error*"])


def test_episode_runs_once_for_all_its_tests(project):
    result = project.run("-q")
    # Nothing fulfilled the two achievements within 4 turns (not reached: skipped); every other commitment held.
    result.assert_outcomes(passed=5, skipped=2)
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 4


def test_last_failed_reruns_only_the_failed_narrative_tests(project):
    project.pytester.makepyfile(test_plain="def test_ok(): pass")
    text = (project.pytester.path / "specs" / "caligari.yaml").read_text()
    project.add_spec("other.yaml", text.replace("id: caligari\n", "id: other\n", 1)
                     .replace("title: The Cabinet of Dr. Caligari", "title: Another Cabinet", 1))
    project.succeed_at(2)
    project.server.add(step="conflict_check", contains="TURN 1.", regex="STORY: The Cabinet", reply=FACT_CONFLICT)
    first = project.run("-q", "-p", "cacheprovider")
    # caligari: the episode fails, its two achievements were not reached (skipped); everything else passes.
    first.assert_outcomes(passed=12, failed=1, skipped=2)

    project.server.reset()
    project.succeed_at(2)  # the narrator "got fixed"
    again = project.run("-q", "-p", "cacheprovider", "--lf")
    # Only the failed test ran (pytest 8.0 skips the other files whole, 9.x deselects them).
    outcomes = again.parseoutcomes()
    assert outcomes.get("passed") == 1 and set(outcomes) <= {"passed", "deselected"}, outcomes
