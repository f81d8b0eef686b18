"""`ncp lint --llm MODEL`: model-assisted checks through the scripted server, failing closed."""

from __future__ import annotations

import pytest

from pytest_ncp.cli import main
from pytest_ncp.lint.model import LINT_STEP
from tests.conftest import FIXTURES

SPEC = FIXTURES / "caligari.yaml"  # lint-clean under the deterministic rules
MODEL = "openai/spec-reader"
FINDING = {"findings": [{"rule": "llm-outside-player-view", "field": "trajectory[4].trigger_event",
                         "explanation": "Francis is not in Jane's bedroom."}]}


def lint(server, *paths, extra=()):
    return main(["lint", "--llm", MODEL, "--api-base", server.base_url, *extra, *map(str, paths or [SPEC])])


def test_a_model_finding_gets_the_line_of_the_field_it_names(ncp_model_server, capsys):
    ncp_model_server.add(step=LINT_STEP, reply=FINDING)
    assert lint(ncp_model_server) == 1
    out = capsys.readouterr().out.splitlines()
    line = SPEC.read_text().splitlines().index("    trigger_event: Jane is attacked in her bedroom.") + 1
    assert out[0] == (f"{SPEC}:{line}: llm-outside-player-view: trajectory[4].trigger_event: "
                      "Francis is not in Jane's bedroom.")
    assert out[-1] == "1 spec(s) linted: 1 finding(s) in 1 spec(s)"
    (request,) = ncp_model_server.requests
    fmt = request.body["response_format"]
    assert request.role == "author" and request.model == "spec-reader" and fmt["json_schema"]["strict"]
    assert fmt["json_schema"]["name"] == LINT_STEP and "id: caligari" in request.text


def test_no_model_findings_is_clean_and_the_summary_counts_llm_rules(ncp_model_server, capsys):
    ncp_model_server.add(step=LINT_STEP, reply={"findings": []})
    assert lint(ncp_model_server) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 spec(s) linted: 0 finding(s) in 0 spec(s)"
    ncp_model_server.add(step=LINT_STEP, reply=FINDING)
    assert lint(ncp_model_server, extra=["--summary"]) == 1
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows["llm-outside-player-view"] == ["1", "1"] and rows["multi-event-node"] == ["0", "0"]


def test_an_invalid_answer_is_retried_with_its_problem(ncp_model_server, capsys):
    ncp_model_server.add(step=LINT_STEP, reply={"findings": []})
    ncp_model_server.add(step=LINT_STEP, times=1, reply={"findings": [
        {"rule": "llm-outside-player-view", "field": "trajectory[40].key_delta", "explanation": "x"}]})
    assert lint(ncp_model_server) == 0
    first, retry = ncp_model_server.requests
    assert "field 'trajectory[40].key_delta' names nothing in the spec" in retry.text


@pytest.mark.parametrize("reply", ["The spec looks fine to me.", {"findings": [{"rule": "vibes", "field": "synopsis",
                                                                               "explanation": "x"}]}])
def test_an_unusable_answer_is_an_error_never_a_clean_spec(ncp_model_server, capsys, reply):
    ncp_model_server.add(step=LINT_STEP, reply=reply)
    assert lint(ncp_model_server) == 1
    captured = capsys.readouterr()
    assert "llm check failed:" in captured.err and "after 2 attempt(s)" in captured.err
    assert captured.out.splitlines()[-1] == f"1 spec(s) linted: 0 finding(s) in 0 spec(s), 1 not checked by {MODEL}"


def test_a_model_error_is_reported_per_spec(ncp_model_server, capsys):
    ncp_model_server.add(step=LINT_STEP, status=401)
    assert lint(ncp_model_server) == 1
    assert "llm check failed:" in capsys.readouterr().err


def test_without_llm_no_model_is_called(ncp_model_server, capsys):
    assert main(["lint", str(SPEC)]) == 0
    assert ncp_model_server.requests == []
