"""Re-auditing recorded transcripts with another auditor (through the scripted server), and human review."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import sys

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.analysis.metrics import wilson
from pytest_ncp.analysis.reviews import dispute_line, dispute_rates, load_reviews
from pytest_ncp.report.review_walk import walk
from pytest_ncp.engine.runner import Runner
from pytest_ncp.core.spec import load_spec
from tests.conftest import ROOT, FIXTURES, SPECS

NARRATION = "Alan laughs at the door, alive and well."


def flag(kind="fact", facts=("F2",), commitments=(), quote="Alan laughs at the door"):
    return {"conflicts": [{"type": kind, "fact_ids": list(facts), "commitment_ids": list(commitments),
                           "quote": quote, "explanation": "Alan was stated dead."}]}


def record_run(server, out, *, specs=("caligari",), max_turns=4, narrator="pytest_ncp.narrators:LLMNarrator"):
    """A source run through the scripted server: LLM narrator and auditor 'old-auditor'."""
    config = RunConfig(narrator=narrator, narrator_model="openai/narrator", auditor_model="openai/old-auditor",
                       api_base=server.base_url, max_turns=max_turns)
    runner = Runner(config, out_dir=out)
    return asyncio.run(runner.run([load_spec(SPECS / f"{s}.yaml") for s in specs]))


def reaudit(server, source, out, *extra):
    return main(["reaudit", str(source), "--auditor-model", "openai/new-auditor", "--api-base", server.base_url,
                 "--out", str(out), *extra])


def results(path):
    return json.loads((path / "results.json").read_text())


# --- reaudit ----------------------------------------------------------------------------------------


def test_reaudit_gives_a_different_verdict_when_the_new_auditor_flags_a_conflict(ncp_model_server, tmp_path, capsys):
    ncp_model_server.add(role="narrator", reply=NARRATION)
    (source,) = record_run(ncp_model_server, tmp_path / "src")
    assert source.termination.value == "turn_limit"
    recorded_turns = [r for r in ncp_model_server.requests if r.role == "narrator"]
    assert len(recorded_turns) == 4
    ncp_model_server.add(step="conflict_check", model="new-auditor", contains="TURN 2.", reply=flag())
    before = len(ncp_model_server.requests)

    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new") == 0
    calls = ncp_model_server.requests[before:]
    assert {r.role for r in calls} == {"auditor"}  # the narrator and the player were not called again
    assert {r.model for r in calls} == {"new-auditor"}
    new = results(tmp_path / "new")
    (episode,) = new["episodes"]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["turn"] == 2
    assert episode["failure"]["quote"] == "Alan laughs at the door"
    assert new["config"]["reaudit_of"] == str(tmp_path / "src")
    assert new["config"]["auditor_model"] == "openai/new-auditor"
    assert new["config"]["narrator"] == "pytest_ncp.narrators:LLMNarrator"  # still the source's narrator
    out = capsys.readouterr().out
    assert "caligari[r0]: conflict:fact at turn 2 (F2)" in out
    assert "1 of 1 episode(s) end differently from the source" in out
    # The new trace holds the recorded exchange, judged anew.
    lines = [json.loads(x) for x in (tmp_path / "new" / "traces" / "caligari--r0.jsonl").read_text().splitlines()]
    turns = [x for x in lines if x["event"] == "turn"]
    assert [t["response"] for t in turns] == [NARRATION, NARRATION]
    assert turns[0]["player_input"] == load_spec(SPECS / "caligari.yaml").scripted_inputs[0]


def test_a_more_lenient_auditor_ends_at_the_recorded_transcript_as_an_unknown_outcome(ncp_model_server, tmp_path):
    ncp_model_server.add(role="narrator", reply=NARRATION)
    ncp_model_server.add(step="conflict_check", model="old-auditor", contains="TURN 3.", reply=flag())
    (source,) = record_run(ncp_model_server, tmp_path / "src", max_turns=10)
    assert source.termination.value == "conflict:fact" and source.turns == 3

    assert reaudit(ncp_model_server, tmp_path / "src" / "results.json", tmp_path / "new") == 0
    (episode,) = results(tmp_path / "new")["episodes"]
    # Past turn 3 nothing was recorded: an unknown outcome (player error, censored at turn 3), never
    # script_exhausted, which would count as surviving every later turn.
    assert episode["termination"] == "error" and episode["turns"] == 3
    assert episode["error"]["kind"] == "player" and "ended as conflict:fact" in episode["error"]["message"]
    assert episode["failure"] is None


def test_reaudit_judges_the_recorded_opening_as_turn_0(ncp_model_server, tmp_path, monkeypatch):
    (tmp_path / "opener.py").write_text(
        "class Narrator:\n"
        "    def opening(self):\n        return 'Fog lies on Holstenwall. Alan laughs at the fair.'\n"
        "    def respond(self, player_input, context):\n        return 'The fair is loud.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    record_run(ncp_model_server, tmp_path / "src", narrator="opener:Narrator", max_turns=2)
    ncp_model_server.add(step="conflict_check", model="new-auditor", contains="TURN 0.",
                         reply=flag(quote="Alan laughs at the fair"))

    # A directory of traces works as a source too.
    assert reaudit(ncp_model_server, tmp_path / "src" / "traces", tmp_path / "new") == 0
    (episode,) = results(tmp_path / "new")["episodes"]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["turn"] == 0
    sys.modules.pop("opener", None)


def test_a_source_episode_cut_short_by_an_error_stays_an_error(ncp_model_server, tmp_path):
    ncp_model_server.add(role="narrator", reply=NARRATION)
    ncp_model_server.add(step="fact_update", model="old-auditor", contains="TURN 3.", reply="not json")
    (source,) = record_run(ncp_model_server, tmp_path / "src", max_turns=6)
    assert source.termination.value == "error" and source.turns == 2

    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new") == 0
    (episode,) = results(tmp_path / "new")["episodes"]
    assert episode["termination"] == "error" and episode["turns"] == 2
    assert "source episode ended in error after turn 2" in episode["error"]["message"]


def test_reaudit_finds_moved_specs_with_specs_option(ncp_model_server, tmp_path, capsys, monkeypatch):
    record_run(ncp_model_server, tmp_path / "src", max_turns=2)
    trace = tmp_path / "src" / "traces" / "caligari--r0.jsonl"
    lines = trace.read_text().splitlines()
    start = json.loads(lines[0])
    start["spec_path"] = "gone/caligari.yaml"
    trace.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    before = len(ncp_model_server.requests)

    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new") == 2
    err = capsys.readouterr().err
    assert "spec file 'gone/caligari.yaml'" in err and "pass --specs DIR" in err and "nothing was run" in err
    assert len(ncp_model_server.requests) == before  # refused before any model call
    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new", "--specs", str(SPECS)) == 0
    assert results(tmp_path / "new")["episodes"][0]["termination"] == "turn_limit"


def test_reaudit_refuses_to_write_over_its_source_and_explains_bad_sources(ncp_model_server, tmp_path, capsys):
    record_run(ncp_model_server, tmp_path / "src", max_turns=1)
    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "src") == 2
    assert "is where the source traces are" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert reaudit(ncp_model_server, tmp_path / "empty", tmp_path / "new") == 2
    assert "no results.json and no *.jsonl traces" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "src" / "traces")
    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new") == 2
    assert "trace(s) not found: caligari[r0]" in capsys.readouterr().err


# --- human review -----------------------------------------------------------------------------------


@pytest.fixture
def conflict_run(ncp_model_server, tmp_path):
    """A run with three confirmed conflicts (caligari fact @2, metropolis player_input @1, nosferatu @3)."""
    ncp_model_server.add(role="narrator", reply=NARRATION)
    ncp_model_server.add(step="conflict_check", contains="STORY: The Cabinet of Dr. Caligari", regex="TURN 2\\.",
                         reply=flag())
    ncp_model_server.add(step="conflict_check", contains="STORY: Metropolis", regex="TURN 1\\.",
                         reply=flag("player_input", facts=(), quote="at the door"))
    ncp_model_server.add(step="conflict_check", contains="STORY: Nosferatu", regex="TURN 3\\.",
                         reply=flag(quote="alive   AND well"))
    record_run(ncp_model_server, tmp_path / "run", specs=("caligari", "metropolis", "nosferatu"), max_turns=4)
    terms = [e["termination"] for e in results(tmp_path / "run")["episodes"]]
    assert terms == ["conflict:fact", "conflict:player_input", "conflict:fact"], terms
    return tmp_path / "run"


def review(run_dir, answers, **kw):
    out = io.StringIO()
    summary = walk(run_dir, reviewer=kw.pop("reviewer", "ann"), stdin=io.StringIO(answers), stdout=out,
                   color=False, now=lambda: "2025-01-02T03:04:05+00:00", **kw)
    return summary, out.getvalue()


def test_review_shows_the_conflict_and_stores_labels(conflict_run):
    summary, out = review(conflict_run, "a\n\nd\nthe player was answered\nq\n")
    assert (summary.agreed, summary.disputed, summary.remaining, summary.quit) == (1, 1, 1, True)
    first = out.split("--- conflict 2/3")[0]
    assert "--- conflict 1/3: caligari[r0] (The Cabinet of Dr. Caligari), turn 2, fact conflict (F2) ---" in first
    assert "fact F2:" in first and "Alan was stated dead." in first
    assert "turn 1 narrator:" in first and "turn 2 player:" in first
    assert ">>Alan laughs at the door<<, alive and well." in first  # the quote, highlighted in place
    labels = load_reviews(conflict_run)["labels"]
    assert labels == [
        {"spec_id": "caligari", "repeat": 0, "turn": 2, "type": "fact", "label": "agree", "note": "",
         "reviewer": "ann", "date": "2025-01-02T03:04:05+00:00"},
        {"spec_id": "metropolis", "repeat": 0, "turn": 1, "type": "player_input", "label": "dispute",
         "note": "the player was answered", "reviewer": "ann", "date": "2025-01-02T03:04:05+00:00"},
    ]


def test_review_resumes_where_it_stopped_and_all_shows_everything(conflict_run):
    review(conflict_run, "a\n\nq\n")
    summary, out = review(conflict_run, "d\nboundary case\n")
    assert "resuming: 1 of 3 conflict(s) already labelled by ann" in out
    assert "conflict 1/3" not in out and "--- conflict 2/3: metropolis[r0]" in out
    assert ">>at the door<<" in out and "player-input conflict" in out
    # Input ended while asking about the third: a clean quit, nothing lost.
    assert summary.quit and summary.disputed == 1 and summary.remaining == 1
    summary, out = review(conflict_run, "s\n")
    assert (summary.skipped, summary.remaining, summary.quit) == (1, 1, False)  # skipping labels nothing
    summary, out = review(conflict_run, "d\n\n")
    assert "--- conflict 3/3: nosferatu[r0]" in out
    assert ">>alive and well<<" in out  # quote 'alive   AND well' found despite case and spacing
    assert summary.remaining == 0
    assert "all 3 conflict(s) already labelled by ann" in review(conflict_run, "")[1]

    # --all shows labelled conflicts again; a new answer replaces the reviewer's old label.
    summary, out = review(conflict_run, "d\nchanged my mind\nq\n", relabel=True)
    assert "already labelled: agree" in out
    labels = load_reviews(conflict_run)["labels"]
    assert len(labels) == 3
    caligari = [x for x in labels if x["spec_id"] == "caligari"]
    assert [(x["label"], x["note"]) for x in caligari] == [("dispute", "changed my mind")]
    # Another reviewer starts from the beginning and adds labels beside the first reviewer's.
    review(conflict_run, "a\n\n", reviewer="bob")
    assert len(load_reviews(conflict_run)["labels"]) == 4
    rates = dispute_rates(load_reviews(conflict_run)["labels"])
    assert (rates["labels"], rates["all"]["agree"], rates["all"]["dispute"]) == (4, 1, 3)
    assert rates["fact"] == {"agree": 1, "dispute": 2, "skip": 0, "value": pytest.approx(2 / 3),
                             "ci": pytest.approx(list(wilson(2, 3)), abs=1e-6)}
    assert dispute_line(load_reviews(conflict_run)["labels"]) == (
        "human review: 3 of 4 labelled conflict(s) disputed (75%); by type: fact 2/3, player_input 1/1")


def test_review_re_prompts_on_unknown_keys(conflict_run):
    summary, out = review(conflict_run, "x\nyes\nagree\nok\nq\n")
    assert out.count("please answer one of: a, d, s, q") == 2
    assert summary.agreed == 1


def test_review_with_piped_stdin_in_a_real_process(conflict_run):
    proc = subprocess.run([sys.executable, "-m", "pytest_ncp.cli", "review", str(conflict_run), "--reviewer", "cy"],
                          input="d\nnot a conflict\ns\nq\n", capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "quit: 0 agreed, 1 disputed, 1 skipped this session; 2 of 3 conflict(s) not yet labelled" in proc.stdout
    assert "\x1b[" not in proc.stdout  # no colour codes when stdout is not a terminal
    (label,) = load_reviews(conflict_run)["labels"]
    assert (label["reviewer"], label["label"], label["note"]) == ("cy", "dispute", "not a conflict")
    assert not list(conflict_run.glob(".reviews.*"))  # the atomic write left no temp file


def test_review_of_a_broken_reviews_file_names_it(conflict_run, capsys):
    (conflict_run / "reviews.json").write_text('{"version": 1, "labels": [')
    assert main(["review", str(conflict_run), "--reviewer", "ann"]) == 2
    assert "reviews.json:1: not valid JSON" in capsys.readouterr().err


def test_reaudit_skips_episodes_that_never_started(ncp_model_server, tmp_path):
    record_run(ncp_model_server, tmp_path / "src", max_turns=1)
    data = results(tmp_path / "src")
    data["episodes"].append({**data["episodes"][0], "spec_id": "nosferatu", "termination": "error", "turns": 0,
                             "trace": None, "error": {"kind": "narrator", "message": "could not build"}})
    data["finished"].append("nosferatu--r0")  # the file lists the keys of its episodes
    (tmp_path / "src" / "results.json").write_text(json.dumps(data))
    assert reaudit(ncp_model_server, tmp_path / "src", tmp_path / "new") == 0
    assert [e["spec_id"] for e in results(tmp_path / "new")["episodes"]] == ["caligari"]


def test_review_labels_export_to_the_gold_set_as_draft_cases(conflict_run, tmp_path, capsys):
    from pytest_ncp.calibration.goldset import load_gold_set

    review(conflict_run, "a\n\nd\nthe player was answered\nq\n")
    gold_dir = tmp_path / "gold"
    assert main(["review", str(conflict_run), "--export-gold", str(gold_dir)]) == 0
    assert "2 case file(s) written" in capsys.readouterr().out
    gold = load_gold_set(gold_dir)
    assert gold.problems == []
    by_spec = {c.spec.id: c for c in gold.cases}
    assert set(by_spec) == {"caligari", "metropolis"}  # the unlabelled nosferatu conflict stays out
    agreed, disputed = by_spec["caligari"], by_spec["metropolis"]
    assert [str(c) for c in agreed.conflicts] == ["fact:F2"] and agreed.point.turn == 2
    assert agreed.response == NARRATION and agreed.point.previous == NARRATION
    assert disputed.conflicts == () and "the player was answered" in disputed.why
    assert gold.reviews["caligari--reviews.yaml"]["status"] == "draft"
    # Exporting again adds nothing twice.
    assert main(["review", str(conflict_run), "--export-gold", str(gold_dir)]) == 0
    assert len(load_gold_set(gold_dir).cases) == 2


def test_an_exported_case_keeps_the_trigger_the_episode_remembered(ncp_model_server, tmp_path, capsys):
    # Turn 1 narrates the current node's trigger only; the conflict at turn 2 is audited with that memory,
    # so the exported point says trigger_done and the case labels only what turn 2 does.
    from pytest_ncp.calibration.goldset import load_gold_set

    ncp_model_server.add(role="narrator", reply=NARRATION)
    ncp_model_server.add(step="trajectory_update", regex="TURN 1\\.", reply={
        "trigger_event_occurred": True, "key_delta_occurred": False, "evidence": "Alan laughs at the door"})
    ncp_model_server.add(step="conflict_check", regex="TURN 2\\.", reply=flag())
    record_run(ncp_model_server, tmp_path / "run", max_turns=4)
    review(tmp_path / "run", "a\n\nq\n")
    assert main(["review", str(tmp_path / "run"), "--export-gold", str(tmp_path / "gold")]) == 0
    gold = load_gold_set(tmp_path / "gold")
    assert gold.problems == [] and len(gold.cases) == 1
    case = gold.cases[0]
    assert case.point.turn == 2 and case.point.trigger_done and case.trigger is False
    assert case.context().trigger_turn == 1
