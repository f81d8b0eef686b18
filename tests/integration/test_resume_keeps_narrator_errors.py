"""--resume (ncp and pytest) keeps an episode that ended in the narrator's own error: it is an outcome."""

from __future__ import annotations

import json
import textwrap

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
    from pytest_ncp.cli import main
    from tests.conftest import SPECS

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
    from pytest_ncp.cli import main
    from tests.conftest import SPECS

    narrator = tmp_path / "steady.py"
    narrator.write_text("class Narrator:\n    def respond(self, i, c):\n        return 'The fair is loud.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    args = ["run", "--narrator", "steady:Narrator", "--specs", str(SPECS / "caligari.yaml"), "--auditor-model",
            "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "2", "--out", str(out)]
    assert main(args) == 0
    config = json.loads((out / "results.json").read_text())["config"]
    assert config["narrator_code"]["module"] == "steady" and len(config["narrator_code"]["sha256"]) == 16
    import sys

    sys.modules.pop("steady", None)
    narrator.write_text("class Narrator:\n    def respond(self, i, c):\n        return 'The fair is quiet.'\n")
    capsys.readouterr()
    assert main([*args, "--resume"]) == 2
    assert "narrator_code.sha256" in capsys.readouterr().err
    sys.modules.pop("steady", None)
