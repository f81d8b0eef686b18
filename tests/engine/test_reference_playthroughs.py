"""Reference playthroughs at work: the reference narrator, the auditor's figures on it, and v4 gold cases."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_ncp.cli import main
from pytest_ncp.core.spec import load_spec, load_specs
from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.core.endings import Termination
from pytest_ncp.engine.episode import Episode
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.llm import ModelClient
from pytest_ncp.engine.narrators import NarratorContext
from pytest_ncp.narrators import ReferenceNarrator
from pytest_ncp.testing import ScriptedModelServer
from pytest_ncp.testing.demo import install_demo_script
from pytest_ncp.testing.reference import install_reference_auditor
from tests.conftest import FIXTURES, SPECS

PLAYED = FIXTURES / "playthrough_spec.yaml"


def played_specs():
    """Every bundled spec with a playthrough, and the fixture (so the test runs before any spec has one)."""
    specs, errors = load_specs([SPECS])
    assert not errors, [str(e) for e in errors]
    return [load_spec(PLAYED)] + [s for s in specs if s.playthrough]


def test_reference_narrator_answers_with_the_playthrough_and_refuses_what_it_cannot_play(caligari):
    spec = load_spec(PLAYED)
    narrator = ReferenceNarrator()
    narrator.reset(spec)
    turn2 = NarratorContext(spec=spec, turn=2, history=())
    assert narrator.respond(spec.scripted_inputs[1], turn2) == spec.playthrough[1].narration
    with pytest.raises(ValueError, match="answers only its scripted input"):
        narrator.respond("I set fire to the tower.", turn2)
    with pytest.raises(ValueError, match="no turn 5"):
        narrator.respond("I wait.", NarratorContext(spec=spec, turn=5, history=()))
    with pytest.raises(ValueError, match="spec 'caligari' has no reference playthrough"):
        narrator.reset(caligari)


def test_the_reference_narrator_wins_every_played_spec_in_the_demo_against_the_labels():
    specs = played_specs()
    with ScriptedModelServer() as server:
        install_demo_script(server)  # the demo's models, whose auditor the labelled one overrides
        install_reference_auditor(server, specs)
        client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)

        async def play(spec):
            episode = Episode(spec=spec, narrator=ReferenceNarrator(), player=ScriptedPlayer.from_spec(spec),
                              auditor=LLMAuditor(client, "openai/demo-auditor"), max_turns=len(spec.scripted_inputs),
                              client=client)
            return await episode.run()

        results = [asyncio.run(play(s)) for s in specs]
    for spec, result in zip(specs, results):
        assert not result.termination.is_conflict and result.error is None, (spec.id, result.termination)
        assert result.node_index == len(spec.trajectory), (spec.id, result.nodes)
        assert result.termination is Termination.SUCCESS, (spec.id, result.termination)
        assert [n["id"] for n in result.nodes] == [n.id for n in spec.trajectory]


def test_without_the_labels_the_same_run_reaches_nothing():
    spec = load_spec(PLAYED)
    with ScriptedModelServer() as server:  # its default auditor sees nothing happen
        install_reference_auditor(server, [])
        client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
        episode = Episode(spec=spec, narrator=ReferenceNarrator(), player=ScriptedPlayer.from_spec(spec),
                          auditor=LLMAuditor(client, "openai/auditor"), max_turns=4, client=client)
        result = asyncio.run(episode.run())
    assert (result.termination, result.node_index) == (Termination.TURN_LIMIT, 0)


@pytest.mark.parametrize("mode, lines", [
    ("gold", ["false alarms: 0 of 4 turn(s) = 0.0% per turn",
              "progress recall: 2 of 2 node(s) = 100.0% (2 at the labelled turn, 0 later)",
              "negated: 2 agreed of 2 labelled, 2 predicted (recall 100.0%, precision 100.0%)",
              "satisfied: 1 agreed of 1 labelled, 1 predicted (recall 100.0%, precision 100.0%)"]),
    ("always", ["false alarms: 4 of 4 turn(s) = 100.0% per turn",
                "progress recall: 0 of 2 node(s) = 0.0% (0 at the labelled turn, 0 later)",
                "  missed node: gull-rock:cellar-opened (turn 2)"]),
    ("never", ["false alarms: 0 of 4 turn(s) = 0.0% per turn", "progress recall: 0 of 2 node(s) = 0.0%"]),
])
def test_calibrate_reference_reports_false_alarms_and_progress_recall(mode, lines, capsys, tmp_path):
    assert main(["calibrate", "--reference", str(PLAYED), "--scripted", mode, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for line in lines:
        assert line in out, out
    assert (tmp_path / "reference.json").exists()


def test_a_node_advanced_on_a_later_turn_counts_as_reached_late():
    from pytest_ncp.calibration.playthrough import reference_summary

    def row(case, turn, node, *, delta, pred_delta, trigger_done=False):
        gold = {"delta": delta, "trigger_done": trigger_done, "negated": [], "satisfied": []}
        pred = {"confirmed": [], "trigger": pred_delta, "delta": pred_delta, "negated": [], "satisfied": []}
        return {"case": case, "spec": "s", "node": node, "turn": turn, "gold": gold, "pred": pred}

    rows = [row("s-v4-t01", 1, "a", delta=True, pred_delta=False), row("s-v4-t02", 2, "b", delta=True,
                                                                         pred_delta=False)]
    late = [row("s-v4-t02-late-a", 2, "a", delta=True, pred_delta=True, trigger_done=True)]
    s = reference_summary(rows, late)
    assert (s["advanced_on_time"], s["advanced_late"], s["progress_recall"]) == (0, 1, 0.5)
    assert s["missed_nodes"] == ["s:b (turn 2)"]


# --- gold set v4 ---------------------------------------------------------------------------------------


@pytest.fixture
def v4(tmp_path):
    """A gold set built from a copy of the fixture spec: (set directory, spec path)."""
    gold = tmp_path / "calibration"
    (gold / "cases").mkdir(parents=True)
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "gull-rock.yaml"
    shutil.copy(PLAYED, spec)
    assert main(["calibrate", "--set", str(gold), "--from-playthroughs", str(spec)]) == 0
    return gold, spec


def cases_file(gold):
    return gold / "cases" / "gull-rock-v4.yaml"


def add_case(gold, **case):
    data = yaml.safe_load(cases_file(gold).read_text())
    data["cases"].append(case)
    cases_file(gold).write_text(yaml.safe_dump(data, sort_keys=False))


TURN4 = load_spec(PLAYED).playthrough[3]
LOW_WATER = TURN4.narration.replace("rest of the high water", "rest of the low water")


def test_playthrough_turns_become_clean_cases_on_the_live_spec(v4, capsys):
    gold, _ = v4
    data = yaml.safe_load(cases_file(gold).read_text())
    assert data["live"]["path"] == "../specs/gull-rock.yaml"
    assert [c["id"] for c in data["cases"]] == [f"gull-rock-v4-t0{t}" for t in (1, 2, 3, 4)]
    t2 = data["cases"][1]
    assert (t2["delta"], t2["negated"], data["points"]["t02"]["trigger_done"]) == (True, ["F3"], True)
    capsys.readouterr()
    assert main(["calibrate", "--check", "--set", str(gold)]) == 0
    assert "from playthroughs: 4 case(s) on 1 live spec(s), 0 violation(s)" in capsys.readouterr().out


def test_a_minimal_edit_is_a_violation_case_and_survives_a_rebuild(v4, capsys):
    gold, spec = v4
    add_case(gold, id="gull-rock-low-water", point="t04", from_turn=4, input=TURN4.input, response=LOW_WATER,
             conflict="commitment:C1", why="the boat works the rock at low water, which C1 rules out")
    capsys.readouterr()
    assert main(["calibrate", "--check", "--set", str(gold)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "1 violation(s) as minimal edits" in out and "length AUC (response words, violation vs clean): " in out
    assert main(["calibrate", "--set", str(gold), "--from-playthroughs", str(spec)]) == 0
    assert "gull-rock-low-water" in cases_file(gold).read_text()


@pytest.mark.parametrize("response, message", [
    (LOW_WATER.replace("The cellar is empty but for the smell of brandy.", "The cellar is empty."),
     "2 sentence(s) changed, added or removed"),
    (LOW_WATER + " " + " ".join(["The gulls cry over the empty rock all the long afternoon."] * 3),
     "a minimal edit keeps within 15%"),
    (TURN4.narration, "the response is playthrough turn 4 unchanged, which is clean"),
])
def test_an_edit_that_is_not_minimal_fails_the_check(v4, response, message, capsys):
    gold, _ = v4
    add_case(gold, id="gull-rock-bad-edit", point="t04", from_turn=4, input=TURN4.input, response=response,
             conflict="commitment:C1", why="an edit that breaks the rules")
    capsys.readouterr()
    assert main(["calibrate", "--check", "--set", str(gold)]) == 1
    assert message in capsys.readouterr().out


def test_cases_on_a_live_spec_fail_the_check_when_it_drifts_until_rebuilt(v4, capsys):
    gold, spec = v4
    spec.write_text(spec.read_text().replace("No boat reaches the rock except at high tide.",
                                             "No boat reaches the rock except at slack tide."))
    capsys.readouterr()
    assert main(["calibrate", "--check", "--set", str(gold)]) == 1
    assert "has changed since these cases were built" in capsys.readouterr().out
    assert main(["calibrate", "--set", str(gold), "--from-playthroughs", str(spec)]) == 0
    assert main(["calibrate", "--check", "--set", str(gold)]) == 0


def test_length_auc_is_direction_free_and_counts_ties_half():
    from types import SimpleNamespace

    from pytest_ncp.calibration.playthrough import length_auc

    def cases(violations, clean):
        return ([SimpleNamespace(response="w " * n, violation=True) for n in violations]
                + [SimpleNamespace(response="w " * n, violation=False) for n in clean])

    assert length_auc(cases([1, 2], [3, 4])) == 1.0
    assert length_auc(cases([3, 4], [1, 2])) == 1.0
    assert length_auc(cases([2, 2], [2, 2])) == 0.5
    assert length_auc(cases([1, 3], [2, 4])) == 0.75
    assert length_auc(cases([1], [])) is None


def test_building_into_the_default_set_writes_the_checkouts_calibration_never_a_folder_named_after_it(
        tmp_path, monkeypatch):
    """`ncp calibrate --from-playthroughs SPEC` with the default `--set ncp-gold`: in a checkout the cases go to its
    calibration/cases/ (the folder a build installs as the bundled gold set), not to a new ./ncp-gold/ in the
    working directory; where ncp-gold is only the copy installed inside the package, it says to give --set."""
    from pytest_ncp.core import bundled

    monkeypatch.chdir(tmp_path)
    assert bundled.writable_folder("ncp-gold") == Path(bundled.__file__).resolve().parents[2] / "calibration"
    assert bundled.writable_folder(tmp_path / "mine") == tmp_path / "mine"
    # An installed wheel: no checkout around the package.
    monkeypatch.setattr(bundled, "__file__", str(tmp_path / "site-packages" / "pytest_ncp" / "core" / "bundled.py"))
    assert bundled.writable_folder("ncp-gold") is None
    spec = tmp_path / "gull-rock.yaml"
    shutil.copy(PLAYED, spec)
    assert main(["calibrate", "--from-playthroughs", str(spec)]) == 2
    assert not (tmp_path / "ncp-gold").exists()
