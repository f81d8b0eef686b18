"""Spec files are selected the pytest way: by path, by pasted node id, by test-file path; the header counts."""

from __future__ import annotations

import pytest


def two_specs_and_a_test(project):
    project.twin("other", title="Another Cabinet")
    project.pytester.makepyfile(test_plain="def test_ok(): pass")
    project.succeed_at(2)


def spec_ids(spec_id):
    """The node ids of one spec's tests: its episode, then one per commitment (C1-C6 in the fixture)."""
    return [f"specs/{spec_id}.yaml::episode[{spec_id}]",
            *(f"specs/{spec_id}.yaml::commitment[{spec_id}:C{i}]" for i in range(1, 7))]


def collected(result):
    return sorted(line for line in result.stdout.lines if "::" in line)


def test_a_spec_path_selects_only_that_spec(project):
    two_specs_and_a_test(project)
    result = project.run("specs/other.yaml", "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == ["specs/other.yaml::episode[other]", *[f"specs/other.yaml::commitment[other:C{i}]" for i in range(1, 7)]]


def test_a_pasted_node_id_selects_that_test(project):
    two_specs_and_a_test(project)
    result = project.run("specs/caligari.yaml::commitment[caligari:C3]", "-q")
    result.stdout.fnmatch_lines(["*1 passed*"])
    assert result.ret == pytest.ExitCode.OK
    # Only the caligari episode ran for it.
    assert {"The Cabinet of Dr"} == {r.text.split("STORY: ", 1)[1].split(".")[0]
                                    for r in project.server.requests if "STORY: " in r.text}


def test_a_spec_directory_selects_its_specs(project):
    two_specs_and_a_test(project)
    result = project.run("specs", "--collect-only", "-q")
    assert collected(result) == sorted(spec_ids("caligari") + spec_ids("other"))
    result.stdout.fnmatch_lines(["14 tests collected*"])


def test_a_test_file_path_does_not_drag_in_spec_tests(project):
    two_specs_and_a_test(project)
    result = project.run("test_plain.py", "-q")
    result.stdout.fnmatch_lines(["1 passed*"])
    assert project.server.requests == []


def test_without_paths_the_configured_specs_run_beside_the_tests(project):
    two_specs_and_a_test(project)
    result = project.run("--collect-only", "-q")
    assert collected(result) == sorted(spec_ids("caligari") + spec_ids("other") + ["test_plain.py::test_ok"])
    result.stdout.fnmatch_lines(["15 tests collected*"])


def test_specs_outside_the_configured_paths_are_not_collected_by_accident(project):
    project.pytester.mkdir("elsewhere")
    (project.pytester.path / "elsewhere" / "config.yaml").write_text("key: value\n")
    result = project.run("--collect-only", "-q")
    assert collected(result) == sorted(spec_ids("caligari"))  # nothing from elsewhere/config.yaml
    result.stdout.fnmatch_lines(["7 tests collected*"])


def test_the_header_counts_the_items_that_exist(project):
    two_specs_and_a_test(project)
    result = project.run("-k", "other and episode")
    result.stdout.fnmatch_lines(["collected 15 items / 14 deselected / 1 selected"])


def test_failed_first_and_stepwise_work_on_spec_items(project):
    project.twin("other", title="Another Cabinet")
    project.succeed_at(2)
    project.server.add(step="conflict_check", contains="TURN 1.", regex="STORY: Another", reply={"conflicts": [
        {"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "The fair is loud",
         "explanation": "Alan is said to be away."}]})
    first = project.run("-q", "-p", "cacheprovider")
    first.assert_outcomes(passed=11, failed=1, skipped=2)
    ff = project.run("-p", "cacheprovider", "--ff", "--collect-only", "-q")
    assert [line for line in ff.stdout.lines if "::" in line][0] == "specs/other.yaml::episode[other]"
    sw = project.run("-p", "cacheprovider", "--sw", "-q")
    sw.stdout.fnmatch_lines(["*1 failed*"])
