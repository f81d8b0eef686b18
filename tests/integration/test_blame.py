"""Who owns an outcome, seen from pytest: a player fault or a split verdict is a pytest error
(an unknown outcome), never a failure; the summary shows the blame table; --ncp-audit-votes works."""

from __future__ import annotations

import itertools
import json

from tests.integration.conftest import FACT_CONFLICT

GOD_MODE = "The guard falls asleep and I take his keys."


def god_mode(project):
    project.server.add(role="player", reply=GOD_MODE)
    project.server.add(step="input_screen", reply={"fair": False, "explanation": "A world event.", "problems": [
        {"rule": "world_event", "quote": "The guard falls asleep", "explanation": "The narrator decides that."}]})


# A conflict the unfair input caused: the narration went along with the event the input dictated.
CAUSED = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                         "quote": "You the guard falls asleep", "explanation": "The player decided the world."}]}


def test_a_player_fault_is_an_error_with_its_owner_not_a_narrator_failure(project, tmp_path):
    god_mode(project)
    project.conflict_at(2, CAUSED)
    report = tmp_path / "report"
    result = project.run("-q", "--ncp-player=adversarial", "--ncp-player-model=openai/player",
                         f"--ncp-report={report}", "-k", "episode")
    result.assert_outcomes(errors=1, failed=1)  # the failed test is the exceeded error budget's
    out = result.stdout.str()
    assert "caligari: player fault at turn 2: an unfair simulated input provoked a fact conflict (F2)" in out
    assert "unfair player input (after 3 attempt(s))" in out and GOD_MODE in out
    # A priced model: each row says what its episodes cost, the player fault's included.
    result.stdout.fnmatch_lines(["who owns each outcome*", "  narrator * 0  $0.0000", "  player simulator * 1  $0.0*"
                                 "  player fault 1: caligari[[]r0[]]", "*", "*", "*", "*", "*", "  total * 1  $0.0*"])
    assert result.ret == 6  # the error budget (0) is exceeded: a player fault proves nothing about the narrator
    data = json.loads((report / "results.json").read_text())
    assert data["episodes"][0]["termination"] == "player_fault"
    assert data["metrics"]["blame"]["owners"]["player"]["episodes"] == ["caligari--r0"]
    assert data["metrics"]["unknown"] == 1 and data["metrics"]["judged"] == 0
    assert data["config"]["player_retries"] == 2 and data["config"]["audit_votes"] == 1
    html = (report / "report.html").read_text()
    assert "player fault" in html and "UNFAIR INPUT" in html and 'href="#r0-e0">caligari[r0]</a>' in html


def test_a_split_majority_under_votes_fails_the_narrator_and_shows_the_split(project, tmp_path):
    project.conflict_at(2, FACT_CONFLICT)
    votes = itertools.count()
    project.server.add(step="conflict_confirmation", reply=lambda request: {
        "confirmed": next(votes) % 3 != 1, "explanation": "Scripted vote."})
    report = tmp_path / "report"
    # The error budget does not matter: a conflict a majority confirmed is the narrator's, not an unknown.
    result = project.run("-q", "--ncp-audit-votes=3", "--ncp-max-error-rate=1", f"--ncp-report={report}",
                         "-k", "episode")
    result.assert_outcomes(failed=1, passed=1)  # the error budget (above 0) is a passed test of its own
    result.stdout.fnmatch_lines(["  narrator * 1  $*  fact conflict 1 (split votes: 1 at 2/3): caligari[[]r0[]]"])
    assert result.ret == 1
    episode = json.loads((report / "results.json").read_text())["episodes"][0]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["agreement"] == {"yes": 2, "of": 3}
    html = (report / "report.html").read_text()
    assert "votes 2/3" in html
    assert len([r for r in project.server.requests if r.step == "conflict_confirmation"]) == 3


def test_unanimous_votes_fail_the_narrator_with_the_agreement_in_the_failure(project):
    project.conflict_at(2, FACT_CONFLICT)
    result = project.run("-q", "--ncp-audit-votes=3", "-k", "episode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["caligari: fact conflict at turn 2 (F2)*", "*",
                                 "auditor finding:*", "*", "quoted from the narration:", "*",
                                 "confirmation (3/3 votes confirmed it):"])


def test_a_bad_vote_count_is_a_usage_error(project):
    result = project.run("--ncp-audit-votes=0")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--ncp-audit-votes='0': expected a whole number >= 1*"])
