"""Hand-written narrator tests: run_episode, scripted players, assertion helpers, syrupy snapshots."""

from __future__ import annotations

import pytest

from tests.conftest import SPECS

CONFTEST = f'''
import pytest

@pytest.fixture
def ncp_api_base(ncp_model_server):
    return ncp_model_server.base_url

SPEC = {str(SPECS / "caligari.yaml")!r}
'''

TESTS = '''
import pytest
from conftest import SPEC
from pytest_ncp import assert_commitment, assert_no_conflict, assert_termination


class Echo:
    def respond(self, player_input, context):
        return "The fair is loud."


@pytest.mark.ncp(max_turns=2)
def test_marker_sets_turns(run_episode, scripted_player):
    result = run_episode(SPEC, narrator=Echo, player=scripted_player(["I look.", "I wait.", "I go."]))
    assert result.turns == 2 and result.termination.value == "turn_limit"
    assert_no_conflict(result)


def test_argument_beats_marker(run_episode, load_spec):
    result = run_episode(load_spec(SPEC), narrator=Echo(), player=["I look."], max_turns=5)
    assert_termination(result, "script_exhausted")


def test_conflict_helper_shows_the_ledger_diff(run_episode, ncp_model_server):
    ncp_model_server.add(step="conflict_check", reply={"conflicts": [{"type": "fact", "fact_ids": ["F5"],
        "commitment_ids": [], "quote": "The fair is loud", "explanation": "The fair left."}]})
    result = run_episode(SPEC, narrator=Echo, player=["I look."], max_turns=1)
    assert_no_conflict(result)


def test_commitment_helper(run_episode):
    result = run_episode(SPEC, narrator=Echo, player=["I look."], max_turns=1)
    assert_commitment(result, "C5")


def test_ledgers_compare_as_a_diff(run_episode, ncp_model_server):
    ncp_model_server.add(step="fact_update", reply={"added": [{"text": "It is loud.", "quote": "The fair is loud"}], "negated": []})
    first = run_episode(SPEC, narrator=Echo, player=["I look."], max_turns=1)
    second = run_episode(SPEC, narrator=Echo, player=["I look.", "I look."], max_turns=2)
    assert first.ledger == second.ledger


def test_snapshot(run_episode, ncp_snapshot):
    result = run_episode(SPEC, narrator=Echo, player=["I look.", "I wait."], max_turns=2)
    assert result == ncp_snapshot
'''


def test_fixtures_helpers_and_snapshots(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_narrator=TESTS)
    result = pytester.runpytest("-q", "--snapshot-update", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert "caligari: fact conflict at turn 1 (F5) " in out and "--- ledger after turn 0" in out
    assert "expected C5 SATISFIED, it is PENDING" in out
    assert "fact ledgers differ (active facts):" in out and "+ F11: It is loud." in out
    snap = next(pytester.path.rglob("test_snapshot.json")).read_text()
    assert '"termination": "turn_limit"' in snap and '"narrator": "The fair is loud."' in snap
    for volatile in ('"tokens"', '"cost_usd"', '"trace"', "latency"):
        assert volatile not in snap

    # Unchanged behaviour: the snapshot holds. A changed verdict: the snapshot test fails.
    result = pytester.runpytest("-q", "-p", "no:randomly", "-k", "snapshot")
    result.assert_outcomes(passed=1)
    pytester.makepyfile(test_narrator=TESTS.replace('return "The fair is loud."', 'return "The fair is quiet."'))
    result = pytester.runpytest("-q", "-p", "no:randomly", "-k", "snapshot")
    result.assert_outcomes(failed=1)
    assert "The fair is quiet." in result.stdout.str()


def test_ncp_narrator_fixture_without_configuration_says_how_to_fix(pytester):
    pytester.makepyfile("def test_x(ncp_narrator): pass")
    result = pytester.runpytest("-q")
    result.stdout.fnmatch_lines(["*no narrator configured: pass --ncp-narrator=module:Attr*"])


MARKED = '''
import pytest
from conftest import SPEC


class Echo:
    def respond(self, player_input, context):
        with open("narrations.txt", "a") as log:
            log.write("narrated\\n")
        return "The fair is loud."


@pytest.mark.ncp({marker})
def test_marked(run_episode):
    run_episode(SPEC, narrator=Echo, player=["I look.", "I wait.", "I go."])


def test_unmarked():
    pass
'''


@pytest.mark.parametrize("marker,message", [
    ("max_turn=1", "*test_marked: @pytest.mark.ncp(...): unknown argument max_turn=1; valid: max_turns= (a whole "
                   "number >= 1), player= (one of scripted, adversarial, natural), player_model= *narrator_model= *"),
    ("max_turns='1'", "*test_marked: @pytest.mark.ncp(...): max_turns='1': expected a whole number >= 1"),
    ("max_turns=0", "*max_turns=0: expected a whole number >= 1"),
    ("player='robot'", "*player='robot': expected one of scripted, adversarial, natural"),
    ("3", "*positional arguments (3,): give keyword arguments (max_turns= *"),
])
def test_a_wrong_ncp_marker_is_a_usage_error_naming_the_valid_arguments(pytester, marker, message):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_marked=MARKED.format(marker=marker))
    result = pytester.runpytest("-q", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-ncp: invalid markers:", message])
    assert not (pytester.path / "narrations.txt").exists()  # nothing ran


def test_a_valid_ncp_marker_sets_the_turns(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_marked=MARKED.format(marker="max_turns=1, player='scripted'"))
    result = pytester.runpytest("-q", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "narrations.txt").read_text().count("narrated") == 1


def test_under_xdist_a_wrong_ncp_marker_errors_its_test_with_the_same_words(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_marked=MARKED.format(marker="max_turn=1"))
    result = pytester.runpytest_subprocess("-q", "-p", "no:randomly", "-n", "2", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_marked: @pytest.mark.ncp(...): unknown argument max_turn=1; valid: max_turns=*"])
    assert not (pytester.path / "narrations.txt").exists()
