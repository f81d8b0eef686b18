"""`ncp report` tables: figures recomputed from episodes, n/a beyond the turn limit, review dispute
rates, the three renderers, and clear errors for files that are not what they claim."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ncp.cli import main
from pytest_ncp.analysis.metrics import wilson
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.runs import load_runs
from pytest_ncp.report.tables import render_json, render_markdown, render_plain, render_terminal, run_rows
from pytest_ncp.analysis.reviews import dispute_rates, load_reviews
from pytest_ncp.analysis.results import build_results, load_results, write_results
from pytest_ncp.core.traces import RunFileError


def _ep_dict(spec_id, termination="turn_limit", turns=20, *, repeat=0, conflict_turn=None, progress=0.5,
       satisfied=0.25, tokens=100, cost=0.001):
    failure = None
    if termination.startswith("conflict:"):
        failure = {"turn": conflict_turn if conflict_turn is not None else turns,
                   "type": termination.split(":", 1)[1], "fact_ids": ["F1"], "commitment_ids": [],
                   "quote": "q", "explanation": "x", "confirmation": "y"}
    return {"spec_id": spec_id, "repeat": repeat, "termination": termination, "turns": turns,
            "progress": progress, "satisfied": satisfied, "failure": failure,
            "error": {"kind": "auditor", "message": "bad", "traceback": None} if termination == "error" else None,
            "commitments": {}, "nodes_reached": 1, "tokens": tokens, "cost_usd": cost, "trace": None}


def ep(*args, **kwargs):
    """The typed record the engine produces."""
    return EpisodeRecord.model_validate(_ep_dict(*args, **kwargs))


# Ten episodes, turn limit 20: conflicts at turns 5, 12 and 15, one auditor error after turn 3.
EPISODES = [
    ep("a", "conflict:fact", 5), ep("b", "conflict:commitment", 12), ep("c", "conflict:player_input", 15),
    ep("d", "error", 3), *(ep(f"s{i}") for i in range(6)),
]


def results(episodes=EPISODES, max_turns=20, **config):
    return {"version": 1, "config": {"narrator": "my_agent:Narrator", "narrator_model": "openai/gpt-x",
                                     "max_turns": max_turns, **config}, "episodes": episodes}


def write_run(folder: Path, episodes=EPISODES, max_turns=20, **config) -> Path:
    return write_results(folder, build_results({"narrator": "my_agent:Narrator", "narrator_model": "openai/gpt-x",
                                                "max_turns": max_turns, **config}, list(episodes)))


def test_survival_at_t_is_kaplan_meier_with_a_log_log_interval_and_n_a_where_no_episode_reached_t():
    row = run_rows(results(), "run")
    s10, s20 = row["survival"]["10"], row["survival"]["20"]
    # The error at turn 3 is censored: 9 at risk at turn 5 -> 8/9; then 7/8 and 6/7 -> 6/9.
    assert s10["value"] == pytest.approx(8 / 9, abs=1e-6)
    assert s20["value"] == pytest.approx(6 / 9, abs=1e-6)
    # Greenwood + log-log by hand: V = 1/(9*8), sigma = sqrt(V)/|ln(8/9)| -> (8/9)^exp(+-1.96 sigma).
    assert s10["n"] == 9 and s10["ci"] == pytest.approx([0.43296, 0.98357], abs=1e-4)
    assert s10["ci"][0] < s10["value"] < s10["ci"][1]
    # Every episode stopped by turn 20: survival@50 and @100 are not measured, whatever the turn limit says.
    assert row["survival"]["50"]["value"] is None and row["survival"]["100"]["value"] is None
    assert row["survival"]["50"]["text"] == "n/a (0 of 10 reached turn 50)"
    assert run_rows(results(max_turns=100), "run")["survival"]["100"]["value"] is None


def test_rates_and_counts_leave_errors_out_of_the_denominator():
    row = run_rows(results(), "run")
    assert (row["episodes"], row["judged"], row["errors"]) == (10, 9, 1)
    assert row["conflict_rates"]["fact"]["value"] == pytest.approx(1 / 9, abs=1e-6)
    assert row["conflict_rates"]["fact"]["ci"] == pytest.approx(list(wilson(1, 9)), abs=1e-6)
    assert (row["successes"], row["conflict_free"], row["turn_limit"]) == (0, 6, 6)
    assert row["avg_turns"] == pytest.approx((5 + 12 + 15 + 6 * 20) / 9, abs=1e-3)
    assert row["tokens"] == 1000 and row["cost_usd"] == pytest.approx(0.01)
    assert row["narrator"] == "my_agent:Narrator" and row["max_turns"] == 20


def test_empty_run_shows_n_a_instead_of_dividing_by_zero():
    row = run_rows(results(episodes=[]), "empty")
    assert all(v["value"] is None for v in row["survival"].values())
    assert row["conflict_rates"]["fact"]["value"] is None and row["avg_turns"] is None
    assert "n/a" in render_plain([row])


def test_dispute_rate_per_conflict_type_counts_agree_and_dispute_not_skip():
    labels = [
        {"spec_id": "a", "turn": 5, "type": "fact", "label": "agree"},
        {"spec_id": "b", "turn": 5, "type": "fact", "label": "dispute"},
        {"spec_id": "c", "turn": 5, "type": "fact", "label": "dispute"},
        {"spec_id": "d", "turn": 2, "type": "commitment", "label": "skip"},
        {"spec_id": "e", "turn": 2, "type": "commitment", "label": "agree"},
    ]
    d = dispute_rates(labels)
    assert d["fact"]["value"] == pytest.approx(2 / 3, abs=1e-6)
    assert d["fact"]["ci"] == pytest.approx(list(wilson(2, 3)), abs=1e-6)
    assert d["commitment"] == {"agree": 1, "dispute": 0, "skip": 1, "value": 0.0, "ci": pytest.approx(list(wilson(0, 1)))}
    assert d["player_input"]["value"] is None
    assert d["all"]["value"] == pytest.approx(2 / 4)


def test_reviews_json_next_to_results_feeds_the_review_table(tmp_path):
    path = write_run(tmp_path / "run")
    (tmp_path / "run" / "reviews.json").write_text(json.dumps({"version": 1, "labels": [
        {"spec_id": "a", "repeat": 0, "turn": 5, "type": "fact", "label": "agree", "reviewer": "ann"},
        # ann changed her mind: the later label wins
        {"spec_id": "a", "repeat": 0, "turn": 5, "type": "fact", "label": "dispute", "reviewer": "ann",
         "note": "the fact was negated earlier"},
        {"spec_id": "a", "repeat": 0, "turn": 5, "type": "fact", "label": "agree", "reviewer": "bo"},
    ]}))
    (run,) = load_runs([path])
    row = run_rows(run.results, run.label, reviews=run.reviews)
    assert row["review"]["labels"] == 2
    assert row["review"]["fact"]["value"] == pytest.approx(0.5)
    assert "Human review" in render_plain([row]) and "50.0%" in render_plain([row])
    assert "Human review" not in render_plain([run_rows(run.results, run.label)])


@pytest.mark.parametrize("labels, expected", [
    ([{"spec_id": "a", "turn": 1, "type": "fact", "label": "maybe"}], "labels[0].label: got 'maybe'"),
    ([{"spec_id": "a", "turn": 1, "type": "fact"}], "labels[0]: missing 'label'"),
    ([{"spec_id": "a", "turn": "one", "type": "fact", "label": "agree"}], "labels[0].turn: expected int"),
])
def test_bad_reviews_json_names_the_file_and_the_label(tmp_path, labels, expected):
    write_run(tmp_path)
    (tmp_path / "reviews.json").write_text(json.dumps({"version": 1, "labels": labels}))
    with pytest.raises(RunFileError) as exc:
        load_reviews(tmp_path)
    assert str(exc.value).startswith(f"{tmp_path / 'reviews.json'}: {expected}")


def test_bad_results_files_give_file_line_and_fix(tmp_path):
    with pytest.raises(RunFileError, match="no such file; give the results.json written by"):
        load_results(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1,\n "episodes": [\n')
    with pytest.raises(RunFileError, match=rf"^{broken}:3: not valid JSON"):
        load_results(broken)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1, "episodes": [{"spec_id": "a", "turns": 3}]}))
    with pytest.raises(RunFileError, match=r"episodes\[0\]: missing 'repeat', 'termination', 'progress'"):
        load_results(other)
    other.write_text(json.dumps({"version": 1, "episodes": [{**_ep_dict("a"), "progress": "half"}]}))
    with pytest.raises(RunFileError, match=r"episodes\[0\]\.progress: expected a number, got 'half'"):
        load_results(other)
    other.write_text(json.dumps({"version": 7, "episodes": []}))
    with pytest.raises(RunFileError, match="results version 7 is not supported"):
        load_results(other)


def test_a_run_folder_stands_for_its_results_json(tmp_path):
    write_run(tmp_path / "run")
    assert load_results(tmp_path / "run").episodes[0].spec_id == "a"


def test_runs_with_the_same_narrator_are_told_apart_by_folder(tmp_path):
    a, b = write_run(tmp_path / "before"), write_run(tmp_path / "after", max_turns=50)
    labels = [r.label for r in load_runs([a, b])]
    assert labels == ["Narrator (openai/gpt-x) [before]", "Narrator (openai/gpt-x) [after]"]
    assert [r.label for r in load_runs([a, b], ["old prompt", "new prompt"])] == ["old prompt", "new prompt"]
    with pytest.raises(RunFileError, match="1 label"):
        load_runs([a, b], ["only one"])


def test_plain_and_markdown_tables_put_each_run_on_a_row_with_intervals():
    rows = [run_rows(results(), "twenty"), run_rows(results(max_turns=100), "hundred")]
    plain = render_plain(rows)
    survival = plain.split("\n\n")[0].splitlines()
    twenty = next(line for line in survival if line.startswith("twenty"))
    lo, hi = 0.433, 0.984  # the log-log interval of 8/9 (see above)
    assert f"88.9% ({100 * lo:.1f}-{100 * hi:.1f})" in twenty
    assert "n/a (0 of 10 reached turn 50)  n/a (0 of 10 reached turn 100)" in twenty
    hundred = next(line for line in survival if line.startswith("hundred"))
    assert "n/a (0 of 10 reached turn 100)" in hundred
    md = render_markdown(rows)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert table[0].startswith("| run | episodes | max turns | survival@10")
    assert table[1] == "|:---|" + "---:|" * 7
    assert f"| twenty | 9 (+1 err) | 20 | 88.9% <sub>{100 * lo:.1f}-{100 * hi:.1f}</sub>" in md


def test_markdown_neutralises_pipes_and_html_in_labels():
    md = render_markdown([run_rows(results(), "a|b <script>alert(1)</script>")])
    assert "<script>" not in md
    row = next(line for line in md.splitlines() if line.startswith("| a"))
    assert row.startswith(r"| a\|b &lt;script&gt;alert(1)&lt;/script&gt; |")
    header = next(line for line in md.splitlines() if line.startswith("| run"))
    assert row.replace("\\|", "").count("|") == header.count("|")


def test_json_rows_round_trip_with_null_for_n_a():
    data = json.loads(render_json([run_rows(results(), "run")]))
    assert data["version"] == 1 and data["runs"][0]["label"] == "run"
    assert data["runs"][0]["survival"]["50"]["value"] is None
    assert data["runs"][0]["survival"]["20"]["value"] == pytest.approx(6 / 9, abs=1e-6)


def test_terminal_uses_rich_on_a_tty_and_plain_text_otherwise():
    rows = [run_rows(results(), "[bold]run[/bold]")]
    assert render_terminal(rows, tty=False) == render_plain(rows)
    fancy = render_terminal(rows, tty=True, width=200)
    assert "┃" in fancy and "\x1b[" in fancy
    assert "[bold]run[/bold]" in fancy  # labels are text, never rich markup
    assert "88.9%" in fancy


def test_pass_k_column_appears_only_with_repeats():
    episodes = [ep("a", repeat=0), ep("a", repeat=1), ep("b", "conflict:fact", 4, repeat=0), ep("b", repeat=1)]
    row = run_rows(results(episodes, repeats=2), "rep")
    assert row["pass_k"]["2"] == pytest.approx(0.5)
    assert "pass^k" in render_plain([row]) and "k=2: 50.0%" in render_plain([row])
    assert "pass^k" not in render_plain([run_rows(results(), "one")])


# --- the command ---------------------------------------------------------------------------------


def test_ncp_report_prints_one_row_per_results_file(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", max_turns=100)
    assert main(["report", str(a), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "Survival" in out and "[a]" in out and "[b]" in out
    assert out.count("Narrator (openai/gpt-x)") == 3 * 2 + 2  # three tables and the blame table, two runs
    assert out.count("who owns each outcome") == 2


def test_ncp_report_markdown_and_json(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    assert main(["report", str(a), "--markdown", "--title", "Nightly"]) == 0
    assert capsys.readouterr().out.startswith("## Nightly\n")
    assert main(["report", str(a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["episodes"] == 10
    with pytest.raises(SystemExit) as exc:
        main(["report", str(a), "--json", "--markdown"])
    assert exc.value.code == 2


def test_ncp_report_html_is_announced_on_stderr_so_stdout_stays_json(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    out_file = tmp_path / "site" / "report.html"
    assert main(["report", str(a), "--json", "--html", str(out_file)]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert f"html report: {out_file}" in captured.err
    assert out_file.read_text().startswith("<!doctype html>")


def test_ncp_report_bad_input_exits_2_with_the_file_named(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ncp report: error: {tmp_path / 'missing.json'}: no such file")


def test_table_modules_import_nothing_heavy():
    # The plugin's --ncp-report path imports these after every session; rich and jinja2 load only
    # when a table is drawn or HTML written.
    code = ("import sys, pytest_ncp.report.tables, pytest_ncp.report.runs, pytest_ncp.report.html; "
            "print(sorted(m for m in ('rich', 'jinja2', 'litellm', 'yaml', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_incomplete_run_is_noted_by_ncp_report_and_marked_in_the_html(tmp_path, capsys):
    from pytest_ncp.report.html import render_html

    whole = write_run(tmp_path / "whole")
    part = write_results(tmp_path / "part", build_results(
        {"narrator": "my_agent:Narrator", "max_turns": 20}, EPISODES[:4],
        expected=[e.key for e in EPISODES], stopped="interrupted"))
    assert main(["report", str(whole), str(part)]) == 0
    err = capsys.readouterr().err
    assert "is incomplete: 4 of 10 expected episode(s) finished; it was interrupted" in err
    assert err.count("is incomplete") == 1  # the whole run is not
    html_text = render_html(load_runs([whole, part]))
    assert html_text.count("Incomplete run:") == 1 and "4 of 10 expected episode(s) finished" in html_text
    row = run_rows(load_results(part), "part")
    assert row["complete"] is False and row["repeats"] == 1  # not recorded: one repeat, as before the model
