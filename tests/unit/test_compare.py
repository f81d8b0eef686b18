"""Baseline comparison and auditor agreement over results.json documents (pure, no models)."""

from __future__ import annotations

import json
import math
import re
import shlex
from fractions import Fraction

import pytest

from pytest_ncp.cli import main
from pytest_ncp.analysis.compare import agreement, bootstrap_diff_ci, compare_runs, mcnemar_exact, survived_at
from pytest_ncp.core.records import EpisodeRecord
from tests.conftest import ROOT


def ep(spec, outcome="turn_limit", turn=20, repeat=0, commitments=None):
    """An episode record: ``outcome`` is a termination; conflicts happen at ``turn``."""
    conflict = outcome.startswith("conflict:")
    return {"spec_id": spec, "repeat": repeat, "termination": outcome, "turns": turn,
            "progress": 0.0, "satisfied": 0.0,
            "failure": {"turn": turn, "type": outcome.split(":")[1], "fact_ids": [], "commitment_ids": [],
                        "quote": "q", "explanation": "e"} if conflict else None,
            "error": {"kind": "auditor", "message": "bad"} if outcome == "error" else None,
            "commitments": commitments or {}, "tokens": 0, "cost_usd": 0.0, "trace": None}


def run(*episodes, **config):
    return {"version": 1, "config": {"max_turns": 100, **config}, "episodes": list(episodes)}


def specs(n, prefix="s"):
    return [f"{prefix}{i:02d}" for i in range(n)]


# --- McNemar and bootstrap against hand-computed values ---------------------------------------------


@pytest.mark.parametrize("b, c, expected", [
    (10, 2, Fraction(2 * (1 + 12 + 66), 2 ** 12)),   # 2 * P(X <= 2), X ~ Bin(12, 1/2) = 158/4096
    (5, 0, Fraction(2, 2 ** 5)),                      # 0.0625: five flips one way is not yet significant
    (6, 0, Fraction(2, 2 ** 6)),                      # 0.03125: six is
    (1, 0, Fraction(1)),                              # 2 * 1/2 = 1
    (3, 3, Fraction(1)),                              # capped at 1
    (0, 0, Fraction(1)),                              # nothing changed
    (7, 3, Fraction(2 * (1 + 10 + 45 + 120), 2 ** 10)),  # 352/1024 = 0.34375
])
def test_mcnemar_exact_matches_hand_computed_values(b, c, expected):
    assert mcnemar_exact(b, c) == pytest.approx(float(expected), abs=1e-15)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)  # two-sided: symmetric


def test_mcnemar_is_exact_for_large_counts():
    # Integer arithmetic to the last division: C(2000, k) and 2**2000 overflow a float, the ratio does not.
    assert mcnemar_exact(1000, 0) == 2.0 ** -999
    assert mcnemar_exact(1000, 1000) == 1.0
    assert 0 < mcnemar_exact(1100, 900) < 1e-5


def test_bootstrap_of_two_pairs_has_the_hand_computed_percentiles():
    # Resampled means of deltas [-1, 0] are -1 (p=1/4), -1/2 (1/2) or 0 (1/4): the 2.5th percentile
    # of 2000 resamples is -1 and the 97.5th is 0.
    assert bootstrap_diff_ci([-1, 0], resamples=2000, seed=0) == (-1.0, 0.0)


def test_bootstrap_of_constant_deltas_is_a_point():
    assert bootstrap_diff_ci([0] * 50) == (0.0, 0.0)
    assert bootstrap_diff_ci([-1] * 10) == (-1.0, -1.0)
    assert bootstrap_diff_ci([]) == (0.0, 0.0)


def test_bootstrap_width_matches_the_normal_approximation():
    # 20 of 100 pairs flip survived -> failed: mean -0.2, SE = sqrt(0.2 * 0.8 / 100) = 0.04, so the
    # 95% interval is about -0.2 +- 1.96 * 0.04 = (-0.278, -0.122).
    lo, hi = bootstrap_diff_ci([-1] * 20 + [0] * 80, resamples=4000, seed=3)
    assert lo == pytest.approx(-0.278, abs=0.02) and hi == pytest.approx(-0.122, abs=0.02)


def test_bootstrap_is_deterministic_per_seed():
    deltas = [-1] * 7 + [1] * 3 + [0] * 30
    assert bootstrap_diff_ci(deltas, seed=5) == bootstrap_diff_ci(deltas, seed=5)
    draws = {bootstrap_diff_ci(deltas, seed=s, resamples=200) for s in range(10)}
    assert len(draws) > 1  # the seed really drives the resampling


def test_survival_at_turn_counts_conflicts_up_to_that_turn_only():
    def rec(*args, **kwargs):
        return EpisodeRecord.model_validate(ep(*args, **kwargs))

    assert survived_at(rec("a", "conflict:fact", turn=20), 20) is False
    assert survived_at(rec("a", "conflict:fact", turn=21), 20) is True
    # Stopped before turn 20 without failing: the outcome at 20 is unknown (censored), never "survived".
    assert survived_at(rec("a", "script_exhausted", turn=4), 20) is None
    assert survived_at(rec("a", "script_exhausted", turn=20), 20) is True
    assert survived_at(rec("a", "success", turn=7), 20) is True


# --- comparing runs ---------------------------------------------------------------------------------


def test_a_run_compared_with_itself_is_never_a_regression():
    base = run(*(ep(s, "conflict:fact", turn=i % 7 + 1) if i % 2 else ep(s) for i, s in enumerate(specs(40))))
    result = compare_runs(base, base)
    assert (result.pairs, result.b, result.c, result.p_value) == (40, 0, 0, 1.0)
    assert result.diff == 0.0 and result.ci == (0.0, 0.0)
    assert not result.regression and not result.improvement
    assert result.newly_failing_specs == () and result.newly_failing_commitments == ()
    assert result.lines()[0].startswith("ncp compare: NO SIGNIFICANT CHANGE: survival@20 unchanged at 50.0%")


def test_a_clear_regression():
    names = specs(30)
    base = run(*(ep(s) for s in names))
    new = run(*(ep(s, "conflict:commitment", turn=3) if i < 12 else ep(s) for i, s in enumerate(names)))
    result = compare_runs(base, new)
    assert (result.b, result.c) == (12, 0)
    assert result.p_value == pytest.approx(2 / 2 ** 12)
    assert result.base_rate == 1.0 and result.new_rate == pytest.approx(18 / 30)
    assert result.diff == pytest.approx(-0.4)
    assert result.ci[0] < result.diff < result.ci[1] < 0
    assert result.regression
    assert [str(x) for x in result.newly_failing_specs][:2] == [
        "s00[r0]: conflict:commitment at turn 3", "s01[r0]: conflict:commitment at turn 3"]
    head = result.lines()[0]
    assert head.startswith("ncp compare: REGRESSION: survival@20 fell from 100.0% to 60.0% over 30 paired")
    assert "McNemar p = 0.0005" in head


def test_an_improvement_is_not_a_regression():
    names = specs(30)
    base = run(*(ep(s, "conflict:fact", turn=2) if i < 12 else ep(s) for i, s in enumerate(names)))
    new = run(*(ep(s) for s in names))
    result = compare_runs(base, new)
    assert (result.b, result.c) == (0, 12)
    assert result.improvement and not result.regression
    assert result.verdict() == "IMPROVEMENT"


def test_a_small_drop_is_not_significant():
    names = specs(30)
    base = run(*(ep(s, "conflict:fact", turn=2) if i == 0 else ep(s) for i, s in enumerate(names)))
    new = run(*(ep(s, "conflict:fact", turn=2) if i in (1, 2, 3) else ep(s) for i, s in enumerate(names)))
    result = compare_runs(base, new)
    assert (result.b, result.c) == (3, 1)
    assert result.p_value == pytest.approx(2 * (1 + 4) / 16)  # 0.625
    assert result.new_rate < result.base_rate and not result.regression


def test_the_turn_decides_what_counts_as_failing():
    base = run(*(ep(s, turn=40) for s in specs(8)))
    new = run(*(ep(s, "conflict:fact", turn=25) for s in specs(8)))
    assert compare_runs(base, new, turn=20).b == 0
    late = compare_runs(base, new, turn=30)
    assert late.b == 8 and late.regression  # p = 2 / 2**8


def test_errored_and_unpaired_episodes_are_excluded_and_listed():
    base = run(ep("a"), ep("b", "error", turn=3), ep("c"), ep("d"), ep("a", repeat=1), ep("gone"))
    new = run(ep("a", "conflict:fact", turn=1), ep("b", "conflict:fact", turn=1), ep("c", "error", turn=2),
              ep("d"), ep("a", repeat=1), ep("fresh"))
    result = compare_runs(base, new)
    assert result.pairs == 3  # a[r0], a[r1], d[r0]
    assert result.errored == (("b", 0), ("c", 0))
    assert result.only_in_base == (("gone", 0),) and result.only_in_new == (("fresh", 0),)
    assert result.b == 1 and [x.spec_id for x in result.newly_failing_specs] == ["a"]
    text = "\n".join(result.lines())
    assert "left out: pair(s) with an unknown outcome (auditor, model or player error): 2\n    b[r0]\n    c[r0]" in text
    assert "unpaired: only in base: 1\n    gone[r0]" in text and "only in new: 1\n    fresh[r0]" in text


def test_nothing_to_compare():
    result = compare_runs(run(ep("a")), run(ep("b")))
    assert result.pairs == 0 and not result.regression
    assert result.lines()[0].startswith("ncp compare: NOTHING TO COMPARE")


def test_newly_failing_commitments_violations_and_missed_achievements():
    base = run(ep("a", commitments={"C1": "SATISFIED", "C2": "SATISFIED", "C3": "SATISFIED", "C4": "VIOLATED"},
                  outcome="conflict:commitment", turn=30))
    new = run(ep("a", "conflict:commitment", turn=5,
                 commitments={"C1": "VIOLATED", "C2": "PENDING", "C3": "PENDING", "C4": "VIOLATED"}))
    without = compare_runs(base, new)
    assert [x.commitment_id for x in without.newly_failing_commitments] == ["C1"]  # C4 was already violated
    assert not without.achievements_checked
    assert "missed achievements not checked" in "\n".join(without.lines())
    kinds = {"a": {"C1": "invariant", "C2": "achievement", "C3": "invariant", "C4": "ordering"}}
    with_kinds = compare_runs(base, new, kinds=kinds)
    assert [str(x) for x in with_kinds.newly_failing_commitments] == [
        "a[r0] C1 (invariant): SATISFIED -> VIOLATED", "a[r0] C2 (achievement): SATISFIED -> PENDING"]
    assert with_kinds.achievements_checked


def test_bad_documents_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="base: not an ncp results file"):
        compare_runs({"runs": []}, run())
    with pytest.raises(ValueError, match=r"new: episode a\[r0\] appears twice"):
        compare_runs(run(ep("a")), run(ep("a"), ep("a")))
    with pytest.raises(ValueError, match="alpha"):
        compare_runs(run(), run(), alpha=1.5)


def test_notes_warn_when_the_runs_differ_in_more_than_the_narrator():
    result = compare_runs(run(ep("a"), auditor_model="openai/x", max_turns=10), run(ep("a"), auditor_model="openai/y"))
    assert any("auditor_model differs" in n for n in result.notes)
    assert any("base ran at most 10 turns" in n for n in result.notes)


# --- the command --------------------------------------------------------------------------------------


def write(tmp_path, name, data):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(data))
    return d


def test_compare_command_exit_codes(tmp_path, capsys):
    names = specs(30)
    base = write(tmp_path, "base", run(*(ep(s) for s in names)))
    worse = write(tmp_path, "worse", run(*(ep(s, "conflict:fact", turn=4) if i < 10 else ep(s)
                                            for i, s in enumerate(names))))
    assert main(["compare", str(base), str(worse)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("ncp compare: REGRESSION")
    assert f"base: {base / 'results.json'}" in out and "s09[r0]: conflict:fact at turn 4" in out
    assert main(["compare", str(base), str(base / "results.json")]) == 0
    assert main(["compare", str(worse), str(base)]) == 0  # an improvement
    assert "IMPROVEMENT" in capsys.readouterr().out
    # Numbers are printed whatever the verdict, and the seed makes them reproducible.
    main(["compare", str(base), str(worse), "--seed", "7"])
    first = capsys.readouterr().out
    main(["compare", str(base), str(worse), "--seed", "7"])
    assert capsys.readouterr().out == first


def test_compare_command_usage_errors(tmp_path, capsys):
    good = write(tmp_path, "good", run(ep("a")))
    assert main(["compare", str(good), str(tmp_path / "missing")]) == 2
    assert "missing: no such file; give the results.json written by" in capsys.readouterr().err
    (tmp_path / "torn.json").write_text('{"version": 1, "episodes": [')
    assert main(["compare", str(good), str(tmp_path / "torn.json")]) == 2
    assert "torn.json:1: not valid JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", str(good), str(good), "--alpha", "2"])


# --- auditor agreement ------------------------------------------------------------------------------


def test_agreement_pearson_over_paired_episodes():
    a = run(ep("x", "conflict:fact", turn=1), ep("y", "conflict:fact", turn=2), ep("z", "turn_limit", turn=3),
            ep("w", "error", turn=1), auditor_model="openai/a")
    b = run(ep("x", "conflict:fact", turn=2), ep("y", "conflict:player_input", turn=4),
            ep("z", "turn_limit", turn=7), ep("w", "turn_limit", turn=9), auditor_model="openai/b")
    result = agreement([a, b], ["A", "B"])
    (pair,) = result.pairs
    # x, y, z pair up (w errored in A): turns (1,2,3) vs (2,4,7). By hand: deviations (-1,0,1) and
    # (-7/3,-1/3,8/3), Sxy = 5, Sxx = 2, Syy = 38/3, so r = 5 / sqrt(76/3) = 0.99339.
    assert pair.n == 3
    assert pair.pearson == pytest.approx(5 / math.sqrt(76 / 3), abs=1e-12)
    assert pair.same_termination == pytest.approx(2 / 3)
    text = "\n".join(result.lines())
    assert re.search(r"A\s+openai/a\s+4\s+1\s", text) and re.search(r"B\s+openai/b\s+4\s+0\s", text)
    assert "A vs B: r = 0.993 over 3 episode(s); same termination in 67%" in text


def test_agree_command(tmp_path, capsys):
    one = write(tmp_path, "one", run(ep("x", turn=3), ep("y", "conflict:fact", turn=1)))
    two = write(tmp_path, "two", run(ep("x", turn=4), ep("y", "conflict:fact", turn=2)))
    three = write(tmp_path, "three", run(ep("x", turn=5), ep("y", "conflict:fact", turn=1)))
    assert main(["agree", str(one), str(two), str(three)]) == 0
    out = capsys.readouterr().out
    assert out.count(" vs ") == 3 and f"{one} vs {two}: r = 1.000 over 2 episode(s)" in out
    assert main(["agree", str(one)]) == 2
    assert "at least two runs" in capsys.readouterr().err


# --- the documented recipes parse -------------------------------------------------------------------


def documented_commands():
    """Every `ncp ...` command line in the fenced shell blocks of docs/experiments.md, regressions.md and gates.md."""
    commands = []
    for name in ("experiments.md", "regressions.md", "gates.md"):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.split("#", 1)[0].strip() if " #" in line else line.strip()
                if line.startswith("ncp "):
                    commands.append((name, line))
    return commands


def test_every_documented_command_parses():
    from pytest_ncp import cli

    commands = documented_commands()
    assert len(commands) >= 15
    parser = cli._parser()
    for name, line in commands:
        argv = shlex.split(line.replace("$", "X"))[1:]
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse reports the problem on stderr
            raise AssertionError(f"{name}: `{line}` does not parse") from exc
        assert getattr(args, "func", None), f"{name}: `{line}` names no command"


def test_compare_command_refuses_unpaired_base_episodes_unless_allowed(tmp_path, capsys):
    # NEW stopped early (a SIGINT, a dead worker): the episode it never finished is the one that fails in BASE's
    # place. The pairs alone show no change; without the refusal this was exit 0.
    names = specs(8)
    base = write(tmp_path, "base", run(*(ep(s) for s in names)))
    new = write(tmp_path, "new", run(*(ep(s) for s in names[:7])))
    assert main(["compare", str(base), str(new)]) == 1
    out = capsys.readouterr().out
    assert "ncp compare: cannot decide: 1 episode(s) of base have no partner in new (first: s07[r0])" in out
    assert "--allow-unpaired" in out
    assert main(["compare", str(base), str(new), "--allow-unpaired"]) == 0
    assert main(["compare", str(new), str(base)]) == 0  # episodes only in NEW cost nothing: BASE is whole


def test_four_pairs_that_all_flip_are_underpowered_not_no_change(tmp_path, capsys):
    # survival fell from 100% to 0% over 4 pairs and compare said "NO SIGNIFICANT
    # CHANGE", exit 0: exact McNemar cannot reach 0.05 with fewer than 6 discordant pairs.
    names = specs(4)
    base = write(tmp_path, "base", run(*(ep(s) for s in names)))
    dead = write(tmp_path, "dead", run(*(ep(s, "conflict:fact", turn=2) for s in names)))
    result = compare_runs(json.loads((base / "results.json").read_text()),
                          json.loads((dead / "results.json").read_text()), turn=3)
    assert result.underpowered and not result.regression and result.verdict() == "UNDERPOWERED"
    assert main(["compare", str(base), str(dead), "--turn", "3"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("ncp compare: UNDERPOWERED: survival@3 fell from 100.0% to 0.0% over 4 paired")
    assert "even if all 4 pair(s) had flipped, McNemar p would be 0.1250 >= alpha" in out
    assert "cannot decide: the comparison is underpowered" in out
    assert main(["compare", str(base), str(dead), "--turn", "3", "--allow-underpowered"]) == 0
    capsys.readouterr()
    # Six pairs can show it: no longer underpowered, and a full flip is a regression.
    names = specs(6)
    base6 = write(tmp_path, "base6", run(*(ep(s) for s in names)))
    dead6 = write(tmp_path, "dead6", run(*(ep(s, "conflict:fact", turn=2) for s in names)))
    assert main(["compare", str(base6), str(dead6), "--turn", "3"]) == 1
    assert capsys.readouterr().out.startswith("ncp compare: REGRESSION")


def test_compare_defaults_to_the_survival_turn_both_runs_measured(tmp_path, capsys):
    # Runs of 5 turns have survival@5 as their headline; the old default of 20 compared nothing.
    names = specs(12)
    base = write(tmp_path, "base", run(*(ep(s, turn=5) for s in names), max_turns=5))
    new = write(tmp_path, "new", run(*(ep(s, turn=5) for s in names), max_turns=5))
    assert main(["compare", str(base), str(new)]) == 0
    assert "survival@5 unchanged at 100.0%" in capsys.readouterr().out
