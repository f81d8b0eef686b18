"""pytest_ncp.traces: where recorded traces are found, how traces are read, how results.json is checked."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.analysis.results import load_results, parse_results
from pytest_ncp.core.traces import (
    RunFileError, episode_trace, find_spec_file, read_trace, resolve_trace, start_event, trace_reference,
)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def events(*kinds):
    return "".join(json.dumps({"event": k, "n": i}) + "\n" for i, k in enumerate(kinds))


def test_trace_inside_the_results_folder_is_recorded_relative_to_it(tmp_path, monkeypatch):
    run = tmp_path / "runs" / "today"
    assert trace_reference(run / "traces" / "a--r0.jsonl", run) == "traces/a--r0.jsonl"
    monkeypatch.chdir(tmp_path)  # the runner is often given a relative --out
    assert trace_reference("runs/today/traces/a--r0.jsonl", "runs/today") == "traces/a--r0.jsonl"
    assert trace_reference("elsewhere/a--r0.jsonl", "runs/today") == "elsewhere/a--r0.jsonl"
    assert trace_reference(None, run) is None


def test_a_relative_trace_is_tried_against_the_results_folder_then_the_cwd(tmp_path, monkeypatch):
    run, cwd = tmp_path / "run", tmp_path / "cwd"
    in_run = write(run / "traces" / "a.jsonl", events("start"))
    in_cwd = write(cwd / "traces" / "a.jsonl", events("start"))
    monkeypatch.chdir(cwd)
    assert resolve_trace("traces/a.jsonl", run) == run / "traces" / "a.jsonl"
    in_run.unlink()
    assert resolve_trace("traces/a.jsonl", run).resolve() == in_cwd.resolve()
    in_cwd.unlink()
    assert resolve_trace("traces/a.jsonl", run) is None
    assert resolve_trace(None, run) is None


def test_an_absolute_trace_is_taken_as_is_else_found_by_name_in_the_moved_run(tmp_path):
    elsewhere = write(tmp_path / "old" / "x.jsonl", events("start"))
    run = tmp_path / "run"
    assert resolve_trace(str(elsewhere), run) == elsewhere
    elsewhere.unlink()
    moved = write(run / "traces" / "x.jsonl", events("start"))
    assert resolve_trace(str(elsewhere), run) == moved  # e.g. a run folder downloaded from CI
    moved.unlink()
    beside = write(run / "x.jsonl", events("start"))
    assert resolve_trace(str(elsewhere), run) == beside


def test_spec_files_are_found_next_to_the_run_the_cwd_or_above_the_run(tmp_path, monkeypatch):
    spec = write(tmp_path / "specs" / "a.yaml", "id: a\n")
    monkeypatch.chdir(tmp_path / "specs")
    run = tmp_path / "runs" / "today"
    run.mkdir(parents=True)
    assert find_spec_file("specs/a.yaml", run).resolve() == spec.resolve()  # a parent of the run folder
    assert find_spec_file("a.yaml", run).resolve() == spec.resolve()        # the working directory
    assert find_spec_file(str(spec), run) == spec
    assert find_spec_file(str(tmp_path / "gone.yaml"), run) is None and find_spec_file(None, run) is None


def test_a_torn_last_line_is_skipped_and_other_bad_lines_are_strict_errors(tmp_path):
    path = write(tmp_path / "t.jsonl", events("start", "turn") + '{"event": "turn", "tu')
    strict = read_trace(path, strict=True)
    assert [e["event"] for e in strict.events] == ["start", "turn"] and strict.bad_lines == 1
    write(path, events("start") + "{not json\n" + "[1, 2]\n" + events("end"))
    with pytest.raises(RunFileError, match=rf"^{path}:2: invalid JSON in trace"):
        read_trace(path, strict=True)
    lenient = read_trace(path)
    assert [e["event"] for e in lenient.events] == ["start", "end"] and lenient.bad_lines == 2
    assert lenient.start["event"] == "start" and lenient.end == {"event": "end", "n": 0}
    write(path, events("start", "turn"))
    assert read_trace(path).end is None  # an interrupted episode
    write(path, events("turn") + '{"no event": 1}\n')
    with pytest.raises(RunFileError, match=r":2: not a trace event"):
        read_trace(path, strict=True)
    path.write_bytes(b'{"event": "start", "x": "\xff"}\n')
    with pytest.raises(RunFileError, match="not UTF-8"):
        read_trace(path, strict=True)
    assert read_trace(path).events[0]["x"] == "\ufffd"


def test_start_event_reads_only_the_start(tmp_path):
    assert start_event(write(tmp_path / "a.jsonl", events("start", "turn"))) == {"event": "start", "n": 0}
    assert start_event(write(tmp_path / "b.jsonl", events("turn"))) is None
    assert start_event(tmp_path / "missing.jsonl") is None


def test_episode_trace_says_why_there_are_no_events(tmp_path):
    run = tmp_path / "run"
    write(run / "traces" / "a.jsonl", events("start", "turn", "end"))
    assert len(episode_trace("traces/a.jsonl", run).of("turn")) == 1
    assert episode_trace("traces/gone.jsonl", run).problem == "trace not found: traces/gone.jsonl"
    assert episode_trace(None, run).problem == "no trace was recorded for this episode"


def test_results_are_checked_the_same_on_disk_and_in_memory(tmp_path):
    episode = {"spec_id": "a", "repeat": 0, "termination": "success", "turns": 3, "progress": 1.0,
               "satisfied": 1.0, "trace": "traces/a--r0.jsonl"}
    run = tmp_path / "run"
    write(run / "results.json", json.dumps({"version": 1, "episodes": [episode]}))
    assert [e.model_dump(exclude_unset=True) for e in load_results(run).episodes] == [episode]
    with pytest.raises(RunFileError, match=r"^base: episodes\[0\]\.repeat: expected a whole number >= 0"):
        parse_results({"episodes": [{**episode, "repeat": -1}]}, "base")
    with pytest.raises(RunFileError, match=r"^new: episodes\[0\]: missing 'repeat'"):
        parse_results({"episodes": [{k: v for k, v in episode.items() if k != "repeat"}]}, "new")
    with pytest.raises(RunFileError, match=r"episodes\[0\]\.trace: expected text \(a string\), got 3"):
        parse_results({"episodes": [{**episode, "trace": 3}]}, "x")
    assert issubclass(RunFileError, ValueError)  # callers that catch ValueError keep working
