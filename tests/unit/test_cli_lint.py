"""`ncp lint`, `ncp validate --strict` and `ncp catalog`: exit codes and output."""

from __future__ import annotations

import pytest

from pytest_ncp.cli import main
from tests.conftest import ROOT, SPECS

CLEAN = ROOT / "tests" / "fixtures" / "lint_clean_spec.yaml"
GOOD = CLEAN.read_text()
# Removing C1's depends_on leaves a valid spec with exactly one lint finding.
LINTY = GOOD.replace("    depends_on: [F2]\n", "", 1)


@pytest.fixture
def linty(tmp_path):
    path = tmp_path / "linty.yaml"
    path.write_text(LINTY)
    return path


def test_lint_clean_spec_exits_0(capsys):
    assert main(["lint", str(CLEAN)]) == 0
    assert capsys.readouterr().out == "1 spec(s) linted: 0 finding(s) in 0 spec(s)\n"


def test_lint_prints_path_line_rule_message_and_exits_1(linty, capsys):
    assert main(["lint", str(linty.parent)]) == 1
    out = capsys.readouterr().out.splitlines()
    line = LINTY.splitlines().index("  - id: C1") + 1
    assert out[0].startswith(f"{linty}:{line}: commitment-without-dependency: invariant C1 names no fact or node")
    assert out[-1] == "1 spec(s) linted: 1 finding(s) in 1 spec(s)"


def test_lint_reports_invalid_specs_and_exits_1(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("id: [\n")
    (tmp_path / "good.yaml").write_text(GOOD)
    assert main(["lint", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml:" in out and "invalid YAML" in out
    assert out.splitlines()[-1] == "1 spec(s) linted: 0 finding(s) in 0 spec(s), 1 invalid (fix them first: `ncp validate`)"


def test_lint_missing_path_exits_1(capsys):
    assert main(["lint", "/no/such/dir"]) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_lint_list_rules(capsys):
    from pytest_ncp.lint import RULES
    from pytest_ncp.lint.model import LLM_RULES

    assert main(["lint", "--list-rules"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("future-sight ")
    listed = {line.split()[0] for line in out.splitlines() if line.strip() and not line.startswith(" ")}
    # Every rule once, with what it checks: the deterministic rules and the model-assisted llm-* ones.
    assert set(RULES) | set(LLM_RULES) <= listed
    for rule, text in {**RULES, **LLM_RULES}.items():
        assert " ".join(text.split()[:4]) in " ".join(out.split()), rule


def test_validate_strict_adds_lint_findings(linty, capsys):
    assert main(["validate", str(linty)]) == 0  # well formed, so plain validation passes
    assert "commitment-without-dependency" not in capsys.readouterr().out
    assert main(["validate", "--strict", str(linty)]) == 1
    out = capsys.readouterr().out
    assert f"{linty}:" in out and ": commitment-without-dependency: " in out
    assert out.splitlines()[-2:] == ["1 spec(s) valid, 0 with problems (0 problem(s))",
                                     "strict: 1 lint finding(s) in 1 spec(s)"]


def test_validate_strict_passes_on_bundled_specs(capsys):
    # Three specs prove the command's wiring; that all 100 are lint clean is test_lint.py's (shared) check.
    chosen = [str(SPECS / f"{name}.yaml") for name in ("caligari", "nosferatu", "metropolis")]
    assert main(["validate", "--strict", *chosen]) == 0, capsys.readouterr().out
    # Benchmark specs still without a playthrough are notices, which do not fail.
    assert capsys.readouterr().out.splitlines()[-1].startswith("strict: 0 lint finding(s) in 0 spec(s)")


PLAYED = ROOT / "tests" / "fixtures" / "playthrough_spec.yaml"


def test_a_benchmark_spec_without_a_playthrough_is_a_notice_that_does_not_fail(tmp_path, capsys):
    benchmark = tmp_path / "benchmark.yaml"
    benchmark.write_text(GOOD + "\nreview: {status: reviewed, reviewer: someone}\n")
    assert main(["lint", str(benchmark)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{benchmark}:") and ": missing-playthrough (notice): no `playthrough:` for the 24" in out[0]
    assert out[-1] == "1 spec(s) linted: 0 finding(s) in 0 spec(s), 1 notice(s) (not failures)"
    assert main(["lint", str(CLEAN)]) == 0  # no review record: a studio's own spec is not asked for one
    assert "missing-playthrough" not in capsys.readouterr().out
    assert main(["lint", "--summary", str(tmp_path), str(PLAYED)]) == 1  # the fixture has ordinary findings
    out = capsys.readouterr().out.splitlines()
    assert "complete: 0 of 2 spec(s) (playthrough, sources named, independent read accepted); 1 with a playthrough" in out
    assert [line.split()[1:] for line in out if line.startswith("missing-playthrough ")] == [["1", "1"]]


def test_validate_counts_complete_specs(tmp_path, capsys):
    read = "  independent_read: {reader: another reader, verdict: accepted}\n"
    (tmp_path / "done.yaml").write_text(PLAYED.read_text() + read)
    assert main(["validate", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "complete: 1 of 1 spec(s) (playthrough, sources named, independent read accepted); 1 with a playthrough")


def test_catalog_prints_the_committed_readme(capsys):
    assert main(["catalog", str(SPECS)]) == 0
    assert capsys.readouterr().out == (SPECS / "README.md").read_text(encoding="utf-8")


def test_catalog_refuses_invalid_specs(tmp_path, capsys):
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "bad.yaml").write_text("id: [\n")
    assert main(["catalog", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "before generating the catalog" in captured.err


def test_lint_summary_counts_findings_per_rule(linty, tmp_path, capsys):
    from pytest_ncp.lint import RULES

    (tmp_path / "short.yaml").write_text(GOOD.replace('  - "I sit by the lamp and read the harbour master\'s letter '
                                                      'once more."\n', "").replace("id: lighthouse", "id: short"))
    assert main(["lint", "--summary", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert not any(": commitment-without-dependency: " in line for line in out)  # counts only, no findings
    rows = {line.split()[0]: line.split()[1:] for line in out[1:-1]}
    assert list(rows) == list(RULES)
    assert rows["commitment-without-dependency"] == ["1", "1"]
    assert rows["too-few-inputs"] == ["1", "1"]
    assert rows["future-sight"] == ["0", "0"]
    assert out[-1] == "2 spec(s) linted: 2 finding(s) in 2 spec(s)"


def test_nodes_after_the_last_achievement_are_a_notice(tmp_path, capsys):
    early = tmp_path / "early.yaml"
    early.write_text(GOOD.replace("    depends_on: [penrose-arrested]\n", "    depends_on: [storm-night]\n", 1)
                     .replace('text: "Penrose, the smuggler behind the missing keeper, answers to the law."',
                              'text: "The ship in the storm passes the reef safely by the light of the lamp."', 1))
    assert main(["lint", str(early)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(": unplayed-final-nodes (notice): every achievement is met by node 3 'storm-night', so an episode "
               "ends in success there and never plays penrose-arrested" in line for line in out), out
    assert main(["lint", str(CLEAN)]) == 0
    assert "unplayed-final-nodes" not in capsys.readouterr().out
