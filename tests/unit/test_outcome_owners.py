"""Who owns an outcome (DESIGN 7.5): the owner of every kind of ending, the blame table's rows,
and what the owners change in survival and the error budget. Pure functions over records."""

from __future__ import annotations

import pytest

from pytest_ncp.analysis.metrics import compute_metrics, error_budget, survival_at
from pytest_ncp.analysis.owners import OWNERS, blame_table, outcome
from pytest_ncp.analysis.results import build_results, parse_results
from pytest_ncp.core.records import Ending, EpisodeRecord, Owner
from pytest_ncp.report.blame import blame_lines, blame_markdown


def ep(spec, termination, turns=3, *, kind=None, failure_turn=None, repeat=0):
    e = {"spec_id": spec, "repeat": repeat, "termination": termination, "turns": turns, "progress": 0.0,
         "satisfied": 0.0}
    if kind:
        e["error"] = {"kind": kind, "message": "x"}
    if termination.startswith("conflict:") or termination in ("player_fault", "contested"):
        e["failure"] = {"turn": failure_turn or turns, "type": termination.split(":")[-1]
                        if termination.startswith("conflict:") else "fact", "fact_ids": ["F1"]}
    return EpisodeRecord.model_validate(e)


@pytest.mark.parametrize("record, owner, kind", [
    (ep("a", "conflict:fact"), "narrator", "conflict:fact"),
    (ep("a", "conflict:player_input"), "narrator", "conflict:player_input"),
    (ep("a", "error", kind="narrator"), "narrator", "error:narrator"),
    (ep("a", "player_fault"), "player", "player_fault"),
    (ep("a", "error", kind="player"), "player", "error:player"),
    (ep("a", "error", kind="auditor"), "auditor", "error:auditor"),
    (ep("a", "contested"), "auditor", "contested"),
    (ep("a", "error", kind="model"), "model", "error:model"),
    (ep("a", "error"), "harness", "error"),  # an error whose kind was not recorded
    (ep("a", "budget"), "budget", "budget"),
    (ep("a", "cancelled"), "budget", "cancelled"),
    (ep("a", "success"), "none", "success"),
    (ep("a", "turn_limit"), "none", "turn_limit"),
    (ep("a", "script_exhausted"), "none", "script_exhausted"),
])
def test_every_ending_has_one_owner(record, owner, kind):
    assert outcome(record) == (owner, kind)


RUN = [ep("a", "conflict:fact"), ep("b", "conflict:fact", repeat=1), ep("c", "error", kind="narrator"),
       ep("d", "player_fault"), ep("e", "contested"), ep("f", "error", kind="model"), ep("g", "turn_limit"),
       ep("h", "success"), ep("i", "error", kind="auditor"), ep("j", "error", kind="player")]


def test_the_blame_table_sums_to_the_episode_count_with_every_episode_once():
    table = blame_table(RUN)
    assert list(table["owners"]) == list(OWNERS)
    assert table["episodes"] == len(RUN) == sum(row["count"] for row in table["owners"].values())
    keys = [k for row in table["owners"].values() for k in row["episodes"]]
    assert sorted(keys) == sorted(f"{e.spec_id}--r{e.repeat}" for e in RUN)
    narrator = table["owners"]["narrator"]
    assert narrator["count"] == 3 and narrator["kinds"] == {"conflict:fact": 2, "error:narrator": 1}
    assert narrator["episodes"] == ["a--r0", "b--r1", "c--r0"]
    assert table["owners"]["player"]["kinds"] == {"player_fault": 1, "error:player": 1}
    assert table["owners"]["auditor"]["kinds"] == {"error:auditor": 1, "contested": 1}
    assert table["owners"]["harness"]["count"] == table["owners"]["budget"]["count"] == 0
    assert blame_table([]) == {"episodes": 0, "owners": {o: {"count": 0, "kinds": {}, "episodes": [], "cost_usd": 0.0}
                                                         for o in OWNERS}}


def test_player_faults_and_split_verdicts_are_unknown_outcomes_censored_before_their_turn():
    fault, split = ep("d", "player_fault", turns=3), ep("e", "contested", turns=3)
    assert fault.ending.unknown and split.ending.unknown and not ep("a", "conflict:fact").ending.unknown
    # Observed through turn 2, censored there: neither a failure at turn 3 nor a survival of it.
    for record in (fault, split):
        assert survival_at([record], 2).value == 1.0 and survival_at([record], 2).reached == 1
        assert survival_at([record], 3).reached == 0
    m = compute_metrics(RUN, survival_turn=3)
    assert m["unknown"] == 5 and m["judged"] == 5  # player, auditor, model errors, the fault, the split verdict
    assert m["conflict_rates"]["fact"] == 0.4  # two narrator conflicts of five judged episodes
    assert error_budget(RUN).unknown == 5


def test_the_blame_table_goes_through_the_typed_results_model():
    records = [r for r in RUN if r.termination != "budget"]
    results = build_results({}, records, survival_turn=3)
    assert results.metrics.blame is not None and results.metrics.blame.episodes == len(records)
    again = parse_results(results.document(), "r")
    assert again.metrics.blame is not None and again.metrics.blame.owners["player"].episodes == ["d--r0", "j--r0"]


def test_the_blame_lines_name_each_owner_with_its_episodes():
    lines = blame_lines(blame_table(RUN))
    assert lines[0].startswith("who owns each outcome")
    assert "  narrator             3  fact conflict 2, narrator error 1: a[r0], b[r1], c[r0]" in lines
    assert "  player simulator     2  player fault 1, player error 1: d[r0], j[r0]" in lines
    assert "  auditor              2  auditor error 1, split verdict 1: e[r0], i[r0]" in lines
    assert "  no fault             2  success 1, turn limit 1: g[r0], h[r0]" in lines
    assert lines[-1] == "  total               10"
    many = [ep(f"s{i:02}", "conflict:fact") for i in range(13)]
    assert blame_lines(blame_table(many))[1].endswith("s09[r0] and 3 more")
    assert "| player simulator | 2 | player fault 1, player error 1 | d[r0], j[r0] |" in blame_markdown(blame_table(RUN))


def test_an_older_results_file_without_a_blame_table_still_gets_one():
    from pytest_ncp.report.blame import rows

    table = rows(None, RUN)
    assert sum(r["count"] for r in table) == len(RUN) and table[0]["episodes"] == ["a[r0]", "b[r1]", "c[r0]"]


def test_every_ending_is_classified_once_and_consistently():
    # One table says what each ending means; the predicates follow from its owner, and none contradicts another.
    for ending in Ending:
        assert ending.label and isinstance(ending.owner, Owner)
        assert ending.failure == (ending.owner is Owner.NARRATOR)
        assert ending.judged == (not ending.unknown and not ending.stopped)
        assert sum((ending.failure, ending.unknown, ending.stopped, ending.survived)) == 1
        assert ending.censored == (not ending.failure and ending is not Ending.SUCCESS)
    assert {e for e in Ending if e.censored_before_its_turn} == {Ending.PLAYER_FAULT, Ending.CONTESTED}


def test_a_priced_run_shows_what_each_owners_episodes_cost():
    """Cache writes and reads are in each record's cost already (priced from the cost map at their own rates):
    the table adds them up per owner, calls played ahead and discarded included, and says what the outcomes
    that are not the narrator's cost the run."""
    def priced(record, cost, ahead=0.0):
        extra = {"cost_usd": cost, "cached_tokens": 100, "cache_write_tokens": 40}
        if ahead:
            extra["speculative"] = {"calls": 1, "tokens": 10, "cost_usd": ahead}
        return EpisodeRecord.model_validate({**record.model_dump(), **extra})

    run = [priced(ep("a", "conflict:fact"), 0.25), priced(ep("b", "error", kind="auditor"), 0.125, ahead=0.0625),
           priced(ep("c", "turn_limit"), 1.0)]
    table = blame_table(run)
    assert table["owners"]["narrator"]["cost_usd"] == 0.25
    assert table["owners"]["auditor"]["cost_usd"] == 0.1875
    assert table["owners"]["model"]["cost_usd"] == 0.0
    lines = blame_lines(table)
    assert "  narrator             1  $0.2500  fact conflict 1: a[r0]" in lines
    assert "  auditor              1  $0.1875  auditor error 1: b[r0]" in lines
    assert "  model endpoints      0  $0.0000" in lines
    assert lines[-1] == "  total                3  $1.4375"
    assert "| auditor | 1 | $0.1875 | auditor error 1 | b[r0] |" in blame_markdown(table)
    # Through results.json and back, the costs stay.
    again = parse_results(build_results({}, run, survival_turn=3).document(), "r")
    assert again.metrics.blame is not None and again.metrics.blame.owners["auditor"].cost_usd == 0.1875
    # An unpriced run (a local or scripted model) keeps the table without a cost column.
    assert "$" not in "\n".join(blame_lines(blame_table(RUN))) and "cost |" not in blame_markdown(blame_table(RUN))
