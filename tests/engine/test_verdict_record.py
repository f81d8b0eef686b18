"""`ncp run` records its verdict in results.json, and `ncp report --markdown` shows it (a CI job summary)."""

from __future__ import annotations

import json

from pytest_ncp.cli import main
from tests.conftest import caligari_twins

CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "night",
                           "explanation": "contradiction"}]}


def test_ncp_run_records_the_verdict_and_the_markdown_report_shows_it(ncp_model_server, tmp_path, capsys,
                                                                      monkeypatch):
    (tmp_path / "verdict_agent.py").write_text("class Narrator:\n    def respond(self, i, c):\n"
                                               "        return 'The night is long.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", regex=r"STORY: Twin 1\b", reply=CONFLICT)
    out = tmp_path / "run"
    code = main(["run", "--narrator", "verdict_agent:Narrator", "--api-base", ncp_model_server.base_url,
                 "--specs", *caligari_twins(tmp_path, 2), "--max-turns", "3", "--min-survival", "0.9@3",
                 "--max-error-rate", "0.25", "--out", str(out)])
    capsys.readouterr()
    assert code == 1
    verdict = json.loads((out / "results.json").read_text())["verdict"]
    assert (verdict["outcome"], verdict["exit_code"]) == ("failed", 1)
    checks = {c["kind"]: c for c in verdict["checks"]}
    assert (checks["survival"]["decision"], checks["survival"]["threshold"], checks["survival"]["value"]) == \
        ("failed", 0.9, 0.5)
    assert (checks["error-budget"]["decision"], checks["error-budget"]["threshold"]) == ("passed", 0.25)
    assert main(["report", str(out), "--markdown"]) == 0
    text = capsys.readouterr().out
    assert "**Verdict: " in text and "FAILED (exit 1)**" in text
    assert "| survival | failed | 0.9 @3 | 0.5 (" in text
