from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_ncp.cli import main
from tests.conftest import ROOT, FIXTURES, SPECS


def test_validate_ok(capsys):
    assert main(["validate", str(FIXTURES / "caligari.yaml")]) == 0
    assert "1 spec(s) valid, 0 with problems" in capsys.readouterr().out


def test_validate_reports_file_line_field_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text((FIXTURES / "caligari.yaml").read_text().replace("kind: ordering", "kind: sequence", 1))
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:" in out and "commitments[2].kind: got 'sequence'" in out


def test_validate_missing_path(capsys):
    assert main(["validate", "/no/such/dir"]) == 1
    assert "no such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "demo"])
def test_run_and_demo_name_a_spec_path_that_does_not_exist_instead_of_a_traceback(command, tmp_path, capsys):
    argv = [command, "--specs", str(tmp_path / "nowhere"), "--max-turns", "1"]
    assert main(argv + (["--narrator", "pytest_ncp.narrators:LLMNarrator"] if command == "run" else [])) == 2
    assert f"{tmp_path / 'nowhere'}: <file>: no such file or directory" in capsys.readouterr().err


def test_schema_is_json(capsys):
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "NCP narrative spec"


def test_run_rejects_bad_options(capsys):
    assert main(["run", "--narrator", "nope", "--specs", str(FIXTURES / "caligari.yaml")]) == 2
    assert "module:Attr" in capsys.readouterr().err
    assert main(["run", "--narrator", "x:Y", "--player", "natural", "--specs", str(SPECS)]) == 2
    assert "--player=natural needs --player-model" in capsys.readouterr().err
    assert main(["run", "--narrator", "x:Y", "--min-survival", "lots", "--specs", str(SPECS)]) == 2


@pytest.mark.parametrize("argv,message", [
    (["--player", "chaotic"], "ncp: error: --player='chaotic': unknown player; valid: scripted, adversarial, natural"),
    (["--max-turns", "-3"], "ncp: error: --max-turns='-3': expected a whole number >= 1"),
    (["--min-survival", "lots"], "ncp: error: --min-survival='lots': expected RATE[@TURN], e.g. 0.4@20 or 40%@20"),
    (["--max-tokens", "judge=5"], "ncp: error: --max-tokens='judge=5': expected ROLE=N with ROLE one of narrator, "
                                  "player, auditor, author"),
    (["--max-tokens", "auditor=300,narrator=0"], "ncp: error: --max-tokens='auditor=300,narrator=0': ROLE=N: N must "
                                                 "be a whole number >= 1 (in 'narrator=0')"),
    (["--workers", "many"], "ncp: error: --workers='many': expected a whole number >= 1, or auto"),
    (["--resume"], "ncp: error: --resume needs --out DIR (the run to continue)"),
])
def test_run_stops_on_a_bad_value_naming_the_option_and_what_is_valid(argv, message, capsys):
    code = main(["run", "--narrator", "x:Y", "--specs", str(FIXTURES / "caligari.yaml"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message), err


def test_each_command_takes_the_model_call_options_with_its_own_default():
    from pytest_ncp.cli import _parser
    from pytest_ncp.cli.common import client_settings, resolve_args

    parser = _parser()
    timeouts = {}
    for argv in (["run", "--narrator", "x:Y"], ["demo"], ["doctor", "--model", "m"], ["calibrate"],
                 ["specs", "draft", "--model", "m"], ["reaudit", "src", "--auditor-model", "a", "--out", "o"]):
        args = parser.parse_args(argv)
        resolve_args(args)
        timeouts[argv[0] if argv[0] != "specs" else "specs draft"] = args.timeout
    assert timeouts == {"run": 120.0, "demo": 120.0, "doctor": 60.0, "calibrate": 120.0, "specs draft": 300.0,
                        "reaudit": 120.0}
    settings = client_settings(parser.parse_args(["doctor", "--model", "m", "--max-tokens", "auditor=5",
                                                  "--max-tokens", "player=6", "--system-prompt", "merge"]))
    assert settings["max_tokens"] == {"auditor": 5, "player": 6} and settings["system_prompt"] == "merge"
    assert settings["timeout"] == 60.0 and settings["structured_output"] == "auto"


def test_demo_runs_offline_and_writes_results(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "pytest_ncp.cli", "demo", "--specs", str(FIXTURES / "caligari.yaml"),
                           "--max-turns", "6", "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    # A 6-turn run names the turn it can measure, and says its figures come from scripted models.
    assert "caligari[r0]:" in proc.stdout and "survival@6" in proc.stdout and "survival@20" not in proc.stdout
    assert "these figures judge no real model" in proc.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["version"] == 3 and results["complete"] and results["episodes"][0]["spec_id"] == "caligari"
    assert (out / "traces" / "caligari--r0.jsonl").exists()
    assert results["episodes"][0]["trace"] == "traces/caligari--r0.jsonl"  # relative to results.json


def test_plugin_import_is_cheap():
    code = ("import sys, pytest_ncp.plugin; heavy = [m for m in ('litellm', 'yaml', 'syrupy', 'jinja2', 'pydantic') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _all_parsers(parser):
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_version(capsys):
    from importlib.metadata import version

    from pytest_ncp.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ncp {version('pytest-ncp')}"


def test_every_option_of_every_command_has_help_and_shows_its_default():
    import argparse

    from pytest_ncp.cli import _parser

    missing, no_default = [], []
    for parser in _all_parsers(_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            name = f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
            if not action.help:
                missing.append(name)
            elif action.default not in (None, False, argparse.SUPPRESS) and "default" not in (
                    formatter._get_help_string(action) or ""):
                no_default.append(name)
    assert missing == [] and no_default == []


def test_run_help_shows_defaults(capsys):
    from pytest_ncp.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "turn limit per episode (default: 100)" in out and "episodes per spec" in out
    assert "(default: scripted)" in out
