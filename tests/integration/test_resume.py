"""Resuming a run: finished episodes are kept and only the rest run, under pytest (``--ncp-resume``) and
``ncp run --resume`` alike; a run is resumed only when every setting that can change a verdict, the
specs and the package are the same, and ``--force`` re-runs what changed."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.core.spec import parse_spec
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.engine.runner import Runner
from tests.conftest import SPECS, ListNarrator


def test_resume_skips_finished_episodes(project):
    project.twin("b-spec")
    project.succeed_at(2)
    out = project.pytester.path / "out"
    first = project.run("-q", f"--ncp-report={out}", "-k", "b-spec")
    assert first.ret == 0
    project.server.reset()
    project.succeed_at(2)

    again = project.run("-q", f"--ncp-report={out}", "--ncp-resume")
    assert again.ret == 0, again.stdout.str()
    again.assert_outcomes(passed=14)
    # Only caligari ran (success at turn 2: two conflict checks); b-spec came back from its trace.
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 2
    assert len(json.loads((out / "results.json").read_text())["episodes"]) == 2


def test_resume_needs_a_report_dir(project):
    result = project.run("--ncp-resume")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--ncp-resume needs --ncp-report=DIR*"])


def test_ctrl_c_says_how_to_resume(project):
    project.twin("b-spec")
    project.succeed_at(2)
    out = project.pytester.path / "out"
    project.pytester.makeconftest("""
        def pytest_runtest_logreport(report):
            if report.when == "call" and "episode[b-spec]" in report.nodeid:
                raise KeyboardInterrupt
    """)
    result = project.run_subprocess(f"--ncp-report={out}")
    assert result.ret == 2  # pytest's INTERRUPTED
    result.stdout.fnmatch_lines(["interrupted: 1 finished episode(s) are in *results.json; run the same command "
                                 "with --ncp-resume to continue"])
    assert json.loads((out / "results.json").read_text())["episodes"][0]["spec_id"] == "b-spec"


# --- ncp run --resume and Runner.resume -----------------------------------------------------------------


def _runner(server, out, spec_narrator=("The fair is loud.",), **config):
    settings = dict(narrator="unused:X", auditor_model="openai/auditor", api_base=server.base_url, max_turns=2)
    settings.update(config)
    return Runner(RunConfig(**settings), out_dir=out, narrator_factory=lambda: ListNarrator(list(spec_narrator)),
                  player_factory=lambda spec: ScriptedPlayer(["I wait and watch."] * 100))


def test_resume_refuses_other_settings_with_a_readable_diff_and_force_reruns(ncp_model_server, tmp_path, caligari):
    from pytest_ncp.engine.runner import ResumeMismatch

    out = tmp_path / "run"
    asyncio.run(_runner(ncp_model_server, out).run([caligari]))
    changed = _runner(ncp_model_server, out, max_turns=3, auditor_model="openai/other")
    with pytest.raises(ResumeMismatch) as err:
        changed.resume([caligari])
    message = str(err.value)
    assert "caligari--r0" in message and "max_turns: 2 -> 3" in message
    assert "auditor_model: 'openai/auditor' -> 'openai/other'" in message and "--resume --force" in message
    assert changed.resume([caligari], force=True) == 0 and changed.changed == ["caligari--r0"]
    (result,) = asyncio.run(changed.run([caligari]))
    assert result.turns == 3
    data = json.loads((out / "results.json").read_text())
    assert data["config"]["max_turns"] == 3 and data["config"]["fingerprint"]
    assert data["episodes"][0]["spec_fingerprint"] == caligari.fingerprint
    # Same settings and spec again: kept.
    assert _runner(ncp_model_server, out, max_turns=3, auditor_model="openai/other").resume([caligari]) == 1


def test_resume_refuses_a_changed_spec(ncp_model_server, tmp_path, caligari):
    from pytest_ncp.engine.runner import ResumeMismatch

    out = tmp_path / "run"
    asyncio.run(_runner(ncp_model_server, out).run([caligari]))
    edited = parse_spec((SPECS / "caligari.yaml").read_text().replace(
        "title: The Cabinet of Dr. Caligari", "title: The Cabinet of Dr. Caligari (revised)", 1), "caligari.yaml")
    with pytest.raises(ResumeMismatch, match="spec caligari .* changed since the episode ran"):
        _runner(ncp_model_server, out).resume([edited])
    assert _runner(ncp_model_server, out).resume([caligari]) == 1


def test_ncp_run_resume_refuses_then_force_reruns(tmp_path, capsys):
    out = tmp_path / "demo"
    spec = str(SPECS / "caligari.yaml")
    assert main(["demo", "--specs", spec, "--max-turns", "2", "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    assert main(["demo", "--specs", spec, "--max-turns", "3", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "max_turns: 2 -> 3" in err
    assert main(["demo", "--specs", spec, "--max-turns", "3", "--out", str(out), "--resume", "--force"]) in (0, 1)
    assert "1 changed one(s) run again (--force)" in capsys.readouterr().out
    assert json.loads((out / "results.json").read_text())["config"]["max_turns"] == 3


def test_a_demo_folder_resumed_as_a_real_run_is_refused(tmp_path, capsys):
    # A demo run resumed as a real run kept its episodes with 0 model calls and
    # passed the gate; the demo flag is part of the fingerprint now.
    out = tmp_path / "demo"
    spec = str(SPECS / "caligari.yaml")
    assert main(["demo", "--specs", spec, "--max-turns", "2", "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--specs", spec, "--max-turns", "2",
                 "--narrator-model", "openai/demo-narrator", "--auditor-model", "openai/demo-auditor",
                 "--api-base", "http://127.0.0.1:9/v1", "--out", str(out), "--resume", "--min-survival", "0.9@2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "demo: True -> False" in err


def test_resume_leaves_out_episodes_that_are_not_of_this_run(ncp_model_server, tmp_path, caligari):
    # Resuming a folder with another spec set, or fewer repeats, used to carry the old episodes into
    # results.json (never checked against their specs).
    out = tmp_path / "run"
    other = parse_spec((SPECS / "caligari.yaml").read_text().replace("id: caligari\n", "id: other\n", 1), "other.yaml")
    asyncio.run(_runner(ncp_model_server, out, repeats=2).run([caligari, other]))
    again = _runner(ncp_model_server, out)
    assert again.resume([caligari]) == 1
    asyncio.run(again.run([caligari]))
    data = json.loads((out / "results.json").read_text())
    assert [(e["spec_id"], e["repeat"]) for e in data["episodes"]] == [("caligari", 0)] and data["complete"]


def test_resume_refuses_episodes_of_another_package_version_or_prompt_set(ncp_model_server, tmp_path, caligari,
                                                                       monkeypatch):
    from pytest_ncp.core import config
    from pytest_ncp.engine.runner import ResumeMismatch

    out = tmp_path / "run"
    asyncio.run(_runner(ncp_model_server, out).run([caligari]))
    changed = dict(config._environment(), prompts="0123456789abcdef")
    monkeypatch.setattr(config, "_environment", lambda: tuple(changed.items()))
    with pytest.raises(ResumeMismatch, match=r"environment\.prompts: '[0-9a-f]{16}' -> '0123456789abcdef'"):
        _runner(ncp_model_server, out).resume([caligari])


def test_resume_refuses_changed_settings_and_force_reruns(project):
    out_dir = project.pytester.path / "out"
    assert project.run("-q", f"--ncp-report={out_dir}", max_turns=2).ret == 0  # achievements not reached: skipped
    refused = project.run("-q", f"--ncp-report={out_dir}", "--ncp-resume", max_turns=3)
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*cannot resume*1 finished episode(s)*", "*caligari--r0: max_turns: 2 -> 3*",
                                  "*--ncp-resume --ncp-force*"])
    forced = project.run("-q", f"--ncp-report={out_dir}", "--ncp-resume", "--ncp-force", max_turns=3)
    assert forced.ret == 0, forced.stdout.str()
    forced.assert_outcomes(passed=5, skipped=2)
    (episode,) = json.loads((out_dir / "results.json").read_text())["episodes"]
    assert episode["turns"] == 3


# --- a narrator error is an outcome: kept, never replayed --------------------------------------------------

FLAKY = textwrap.dedent('''
    import os

    class Narrator:
        """Fails the first time it is run in a folder, never again: resuming must not give it a second try."""

        def respond(self, player_input, context):
            marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "failed-once")
            if not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("narrator backend fell over")
            return "The fair is loud."
''')


def test_pytest_resume_keeps_a_narrator_error(project):
    project.pytester.makepyfile(flaky=FLAKY)
    out = project.pytester.path / "out"
    first = project.run("-q", f"--ncp-report={out}", narrator="flaky:Narrator")
    assert first.ret == 1
    again = project.run("-q", f"--ncp-report={out}", "--ncp-resume", narrator="flaky:Narrator")
    assert again.ret == 1, again.stdout.str()
    (episode,) = json.loads((out / "results.json").read_text())["episodes"]
    assert episode["termination"] == "error" and episode["error"]["kind"] == "narrator"


def test_ncp_run_resume_keeps_a_narrator_error(ncp_model_server, tmp_path, monkeypatch, capsys):
    (tmp_path / "flaky.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    args = ["run", "--narrator", "flaky:Narrator", "--specs", str(SPECS / "caligari.yaml"), "--auditor-model",
            "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "3", "--out", str(out)]
    assert main(args) == 1
    assert main([*args, "--resume"]) == 1
    assert main([*args, "--resume", "--max-error-rate", "0.25"]) == 1  # a failure, whatever the error budget
    capsys.readouterr()
    (episode,) = json.loads((out / "results.json").read_text())["episodes"]
    assert episode["error"]["kind"] == "narrator"


def test_the_resume_fingerprint_covers_the_narrators_code(ncp_model_server, tmp_path, monkeypatch, capsys):
    narrator = tmp_path / "steady.py"
    narrator.write_text("class Narrator:\n    def respond(self, i, c):\n        return 'The fair is loud.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    args = ["run", "--narrator", "steady:Narrator", "--specs", str(SPECS / "caligari.yaml"), "--auditor-model",
            "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "2", "--out", str(out)]
    assert main(args) == 0
    config = json.loads((out / "results.json").read_text())["config"]
    assert config["narrator_code"]["module"] == "steady" and len(config["narrator_code"]["sha256"]) == 16
    sys.modules.pop("steady", None)
    narrator.write_text("class Narrator:\n    def respond(self, i, c):\n        return 'The fair is quiet.'\n")
    capsys.readouterr()
    assert main([*args, "--resume"]) == 2
    assert "narrator_code.sha256" in capsys.readouterr().err
    sys.modules.pop("steady", None)
