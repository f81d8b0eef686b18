"""Failures read well: headline first, finding, transcript excerpt, ledger diff; errors are errors."""

from __future__ import annotations

import json

from tests.integration.conftest import FACT_CONFLICT


def test_conflict_fails_the_episode_with_a_headline_and_ledger_diff(project):
    project.server.add(step="fact_update", contains="TURN 1.", reply={
        "added": [{"text": "The fair is noisy.", "quote": "The fair is loud"}], "negated": []})
    project.conflict_at(3)
    result = project.run("-q")
    result.assert_outcomes(failed=1, passed=4, skipped=2)  # the episode; the two achievements were never reached
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*_ episode?caligari? _*",
        "caligari: fact conflict at turn 3 (F2) specs/caligari.yaml:*",
        "",
        "auditor finding:",
        "    Alan was said to be away.",
        "quoted from the narration:",
        '    "The fair is loud"',
    ])
    assert "turn 2 player:" in out and "turn 3 narrator:" in out
    assert "--- ledger after turn 0" in out and "+ F10: The fair is noisy.  (added at turn 1" in out
    assert "Captured ncp transcript call" in out
    assert "achievement not satisfied" not in out  # an achievement the story never got to is no failure


def test_commitment_conflict_fails_that_commitment(project):
    project.conflict_at(2, {"conflicts": [{"type": "commitment", "fact_ids": [], "commitment_ids": ["C1"],
                                          "quote": "The fair is loud", "explanation": "Cesare acts alone."}]})
    result = project.run("-q", "-k", "C1 or episode")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["caligari:C1: invariant violated at turn 2 specs/caligari.yaml:*"])


def test_narrator_exception_fails_the_narrator_and_the_rest_runs(project):
    project.twin("other")
    result = project.run("-q", narrator="agent:Exploding")
    # The narrator's own crash is its failure (the episode tests, and the session's narrator-errors check), not a
    # pytest error; the achievements it never reached are skipped.
    result.assert_outcomes(failed=3, passed=8, skipped=4)
    result.stdout.fnmatch_lines(["FAILED ncp::gate[[]narrator-errors[]] - ncp: 2 episode(s) ended in a narrator*"])
    project.succeed_at(3)
    result = project.run("-q", "-k", "caligari")
    result.assert_outcomes(passed=7)


def test_auditor_garbage_is_an_error(project):
    project.server.add(step="trajectory_update", reply="not json at all")
    result = project.run("-q", "-k", "episode")
    result.assert_outcomes(errors=1, failed=1)  # the failed test is the exceeded error budget's (exit 6)
    assert result.ret == 6
    result.stdout.fnmatch_lines(["*caligari: auditor error after turn 0: auditor step trajectory_update*"])


def test_success_passes_every_test(project):
    project.succeed_at(2)
    result = project.run("-q", "-rA")
    result.assert_outcomes(passed=7)
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 2


def _error_block(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if title in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("___", "===="))), len(lines))
    return lines[start:end]


def test_an_errored_episode_reads_in_a_few_lines_with_the_traceback_kept_in_the_trace(project):
    result = project.run(narrator="agent:Exploding")
    # A narrator error is the narrator's failure: a failed test, as short as any error.
    block = _error_block(result.stdout.lines, "_ episode[caligari] _")
    assert len(block) < 40, "\n".join(block)
    text = "\n".join(block)
    assert "caligari: narrator error after turn 1: RuntimeError: narrator backend fell over" in text
    assert "narrator error:" in text and "trace: " in text
    assert "Traceback" not in text and "pluggy" not in text and "_pytest" not in text
    trace = next(line.split("trace: ", 1)[1].split(" (", 1)[0] for line in block if line.startswith("trace: "))
    assert "Traceback (most recent call last)" in open(trace, encoding="utf-8").read()
    # The summary line names the failure, not a class path.
    # pytest 9 adds the headline to the summary line; 8.0 names the test only.
    result.stdout.fnmatch_lines(["FAILED specs/caligari.yaml::episode?caligari?*"])


def test_very_verbose_shows_the_narrator_traceback(project):
    result = project.run("-vv", "-k", "episode", narrator="agent:Exploding")
    block = "\n".join(_error_block(result.stdout.lines, "_ episode[caligari] _"))
    assert "Traceback (most recent call last)" in block and "narrator backend fell over" in block


def test_an_auditor_error_message_is_whole(project):
    project.server.add(step="trajectory_update", reply="not json at all")
    result = project.run("-k", "episode")
    block = "\n".join(_error_block(result.stdout.lines, "ERROR at setup of episode[caligari]"))
    trace = project.pytester.path / ".pytest_cache" / "ncp" / "traces" / "caligari--r0.jsonl"
    recorded = [json.loads(line) for line in trace.read_text().splitlines()]
    message = next(e["message"] for e in recorded if e["event"] == "error")
    assert f"auditor error:\n{message}" in block
