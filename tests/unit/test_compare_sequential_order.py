"""``ncp compare BASE NEW --sequential`` (a review found it read them otherwise): the pairs are read in NEW's seeded order, as the
live check reads them, and a candidate that its own gate stopped early is never passed by the fixed test over the
episodes it played.
"""

from __future__ import annotations

import random

from pytest_ncp.analysis.results import build_results, write_results
from pytest_ncp.analysis.sequential_run import (
    SequentialPlan, SequentialRun, baseline_outcomes, episode_order, paired_check,
)
from pytest_ncp.cli import main
from pytest_ncp.core.records import EpisodeRecord


def _ep_dict(spec, failed=False, repeat=0):
    return {"spec_id": spec, "repeat": repeat, "termination": "conflict:fact" if failed else "turn_limit",
            "turns": 2 if failed else 20, "progress": 0.0, "satisfied": 0.0,
            "failure": {"turn": 2, "type": "fact"} if failed else None, "error": None}


def ep(*args, **kwargs):
    """The typed record the engine produces."""
    return EpisodeRecord.model_validate(_ep_dict(*args, **kwargs))


def write(folder, episodes, sequential=None, seed=0):
    write_results(folder, build_results({"seed": seed}, episodes, survival_turn=20, sequential=sequential))
    return str(folder)


def test_compare_sequential_reads_pairs_in_new_seeded_order_like_the_live_check():
    """docs/gates.md: "the pairs are taken in the seeded order of NEW (config.seed)" and it "is the same check the
    pytest session runs live". ``paired_check`` seeds the order over base | new instead, so one extra episode in
    BASE (a spec the candidate dropped) reshuffles every pair and the decision moves."""
    specs = [f"s{i:02d}" for i in range(40)]
    new_order = episode_order([(s, 0) for s in specs], 0)
    first = {s for s, _ in new_order[:10]}  # the candidate fails the first 10 episodes it started
    base = [ep(s) for s in specs] + [ep("zz-dropped")]
    new = [ep(s, failed=s in first) for s in specs]

    live = SequentialRun(SequentialPlan(0.0, 20), new_order, baseline=baseline_outcomes(base, 20))
    for job in live.order:
        live.finished(ep(job[0], failed=job[0] in first))
    check, _ = paired_check(base, new, turn=20, seed=0)

    assert live.paired.decision == check.decision == "regression"
    assert check.decided_after == live.paired.decided_after  # fails: 31 != 10


def _stopped_candidate(folder, specs, fails, seed=0):
    """A sequential ``ncp run`` of the candidate (gate 0.4@20): episodes in seeded order until the gate stops it."""
    run = SequentialRun(SequentialPlan(0.4, 20, seed=seed), episode_order([(s, 0) for s in specs], seed))
    played = []
    for job in run.order:
        if run.stopped:
            run.start(job)  # never started
            continue
        played.append(ep(job[0], failed=fails[job[0]]))
        run.finished(played[-1])
    assert run.stopped and run.gate.decision == "pass"
    return write(folder, played, sequential=run.to_dict(), seed=seed), run


def test_compare_sequential_does_not_pass_a_regression_on_the_prefix_an_early_stop_left(tmp_path, capsys):
    """A candidate at ~64% survival against a baseline at 100% (a 36-point regression). Its own sequential gate
    (0.4@20) passes after 12 episodes and the run stops. ``ncp compare BASE NEW --sequential``: the paired check is
    undecided on those 12 pairs, the unstarted episodes are not counted as unpaired, and the fixed McNemar test over
    the 12-pair prefix (2 discordant, p = 0.5, not "underpowered") says NO SIGNIFICANT CHANGE: exit 0.
    Without --sequential the same files exit 1 (unpaired); the full candidate run exits 1 (regression). The
    prefix ends at a stopping time chosen on the candidate's own outcomes (it stopped *because* they looked
    good), which is exactly what the pytest session refuses to judge by the fixed rule
    (verdict._baseline_decision: "the gate stopped the run first: the fixed comparison would judge part of it")."""
    specs = [f"s{i:02d}" for i in range(100)]
    rng = random.Random(3)
    fails = {s: rng.random() > 0.7 for s in specs}
    base = write(tmp_path / "base", [ep(s) for s in specs])
    new, run = _stopped_candidate(tmp_path / "new", specs, fails)
    assert run.read_at_stop == 12 and len(run.unstarted) == 88
    full = write(tmp_path / "full", [ep(s, failed=fails[s]) for s in specs])

    assert main(["compare", base, full, "--sequential"]) == 1  # the candidate did regress
    assert main(["compare", base, new]) == 1  # a partial run: cannot decide
    capsys.readouterr()
    code = main(["compare", base, new, "--sequential"])
    out = capsys.readouterr().out
    assert "undecided after all 100 pair(s)" in out
    assert code != 0, out  # fails: 0 ("NO SIGNIFICANT CHANGE" over the 12 pairs the early stop left)


def test_compare_sequential_passes_many_regressions_it_would_catch_on_the_full_run(tmp_path, capsys):
    """The same over 20 candidates at 70% survival vs a baseline at 100%: every full run exits 1; the
    early-stopped runs of the same candidates exit 0 under --sequential about half the time."""
    specs = [f"s{i:02d}" for i in range(100)]
    base = write(tmp_path / "base", [ep(s) for s in specs])
    passed = 0
    for k in range(20):
        rng = random.Random(k)
        fails = {s: rng.random() > 0.7 for s in specs}
        new, _ = _stopped_candidate(tmp_path / f"new{k}", specs, fails)
        full = write(tmp_path / f"full{k}", [ep(s, failed=fails[s]) for s in specs])
        assert main(["compare", base, full, "--sequential"]) == 1
        passed += main(["compare", base, new, "--sequential"]) == 0
    capsys.readouterr()
    assert passed == 0, f"{passed} of 20 clear regressions passed compare --sequential after an early stop"
