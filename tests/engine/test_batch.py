"""``ncp calibrate --batch``: the auditor's calls go through OpenAI's Batch API (files + batches, through litellm),
against the scripted server's implementation of it: the same figures as call by call, at the batch price,
resumable after a kill, and failing closed when a batch leaves calls unanswered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_ncp.calibration.goldset import DEFAULT_SET, load_gold_set
from pytest_ncp.cli import main
from pytest_ncp.llm.prices import price_of
from pytest_ncp.testing import ScriptedModelServer
from pytest_ncp.testing.calibration import install

ROOT = Path(__file__).resolve().parents[2]
SPEC = "red-badge"
PRICED = "openai/gpt-4o-mini"  # its cost map has batch rates: half the list price


@pytest.fixture(scope="module")
def cases():
    return [c for c in load_gold_set(ROOT / DEFAULT_SET).cases if c.spec.id == SPEC]


def calibrate(server: ScriptedModelServer, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["calibrate", "--set", str(ROOT / DEFAULT_SET), "--auditor-model", PRICED, "--api-base",
                 server.base_url, "--cases", SPEC, "--out", str(out), *extra])
    path = out / "calibration.json"
    return code, json.loads(path.read_text()) if path.exists() else {}


def batch_calls(server: ScriptedModelServer) -> list[str]:
    return [r.path for r in server.requests if r.path.endswith("/batches") and r.status == 200]


def test_a_batched_calibration_gives_the_same_figures_at_the_batch_price(cases, tmp_path, capsys):
    with ScriptedModelServer() as server:
        install(server, cases, "gold")
        code, direct = calibrate(server, tmp_path / "direct")
        assert code == 0
        server.reset()
        install(server, cases, "gold")
        code, batched = calibrate(server, tmp_path / "batched", "--batch", "--batch-poll", "0.01")
        assert code == 0
        # Two rounds: every case's four steps, then the confirmations of the flagged conflicts.
        assert len(batch_calls(server)) == 2
        # No call went by itself: the chat requests the server saw are the batches' lines (no HTTP headers).
        assert all(not r.headers for r in server.requests if r.path.endswith("/chat/completions"))
    assert batched["summary"] == {**direct["summary"], "cost_usd": batched["summary"]["cost_usd"]}
    assert batched["summary"]["invalid"]["cases"] == 0 and len(batched["batches"]) == 2
    price = price_of(PRICED)
    assert price is not None and price.batched().input == pytest.approx(price.input / 2)
    assert batched["summary"]["cost_usd"] == pytest.approx(direct["summary"]["cost_usd"] / 2, rel=1e-4)
    assert batched["summary"]["cost_usd"] > 0
    err = capsys.readouterr().err
    assert f"batch {batched['batches'][0]}: submitted" in err and "completed (" in err


@pytest.mark.parametrize("outcome", ["expired", "failed"])
def test_calls_a_batch_leaves_unanswered_are_auditor_errors_never_passes(cases, tmp_path, outcome):
    with ScriptedModelServer() as server:
        install(server, cases, "gold")
        server.batch_outcome = outcome
        if outcome == "expired":  # expired before any call was answered (an expired batch keeps what was)
            original = server._run_batch

            def drop_all(batch):
                server.batch_drop = {line["custom_id"] for line in batch["_lines"]}
                original(batch)

            server._run_batch = drop_all
        code, data = calibrate(server, tmp_path / "out", "--batch", "--batch-poll", "0.01")
    summary = data["summary"]
    assert code == 0 and summary["invalid"]["cases"] == len(cases)
    any_row = summary["rows"]["conflict: any"]
    assert any_row["tp"] == 0 and any_row["tn"] == 0  # nothing passes, nothing is caught


def test_some_lines_missing_from_a_completed_batch_fail_those_calls_only(cases, tmp_path):
    with ScriptedModelServer() as server:
        install(server, cases, "gold")
        # The first batch's lines are hashes of the requests: drop every fact update's (by its schema name).
        original = server._run_batch

        def drop_fact_updates(batch):
            server.batch_drop = {line["custom_id"] for line in batch["_lines"]
                                 if line["body"]["response_format"]["json_schema"]["name"] == "fact_update"}
            original(batch)

        server._run_batch = drop_fact_updates
        code, data = calibrate(server, tmp_path / "out", "--batch", "--batch-poll", "0.01")
    assert code == 0
    clean = [c for c in cases if not c.conflicts]
    # A clean case needs its fact update: all of them are auditor errors; a confirmed violation stands without it.
    assert data["summary"]["invalid"]["cases"] == len(clean)


def test_a_killed_batch_run_picks_up_the_batch_it_submitted(cases, tmp_path):
    out = tmp_path / "out"
    with ScriptedModelServer() as server:
        install(server, cases, "gold")
        server.batch_polls = 10**9  # the batch stays in progress while the first process waits on it
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCP_")}
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest_ncp.cli", "calibrate", "--set", str(ROOT / DEFAULT_SET), "--auditor-model",
             PRICED, "--api-base", server.base_url, "--cases", SPEC, "--out", str(out), "--batch",
             "--batch-poll", "0.05"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            # Until it has polled its batch at least twice: it submitted and recorded it, and is waiting.
            while sum(r.path.startswith("/v1/batches/") for r in server.requests) < 2:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the first process never polled its batch"
                time.sleep(0.05)
        finally:
            process.kill()
            process.communicate()
        (first,) = [b["id"] for b in json.loads((out / "batches.json").read_text())["batches"]]
        server.batch_polls = 0
        code, data = calibrate(server, out, "--batch", "--batch-poll", "0.01")
        submitted = batch_calls(server)
    assert code == 0 and data["summary"]["invalid"]["cases"] == 0
    assert data["batches"][0] == first  # picked up, not sent again
    assert len(submitted) == 2  # the killed run's batch and the confirmations' one: nothing sent twice


def test_batch_is_refused_for_models_it_cannot_send(tmp_path, capsys):
    code = main(["calibrate", "--set", str(ROOT / DEFAULT_SET), "--auditor-model", "anthropic/claude-haiku-4-5",
                 "--batch", "--out", str(tmp_path)])
    assert code == 2 and "--batch sends OpenAI-compatible models only" in capsys.readouterr().err


def test_stability_in_batches_gives_the_flip_rates_of_calls_made_one_by_one(tmp_path, capsys):
    from tests.conftest import SPECS

    specs = [str(SPECS / f"{name}.yaml") for name in ("all-quiet", "caligari", "aelita")]
    assert main(["demo", "--specs", *specs, "--max-turns", "10", "--max-error-rate", "1",
                 "--out", str(tmp_path / "run")]) in (0, 1)
    capsys.readouterr()
    command = ["stability", str(tmp_path / "run"), "--votes", "3", "--clean-sample", "3", "--demo", "--json"]
    assert main(command) == 0
    direct = json.loads(capsys.readouterr().out)
    assert main([*command, "--batch", "--batch-poll", "0.01"]) == 0
    captured = capsys.readouterr()
    batched = json.loads(captured.out)
    assert direct["rows"]["conflicts"]["turns"] >= 1 and batched["rows"] == direct["rows"]
    assert "submitted" in captured.err and (tmp_path / "run" / "stability-batches" / "batches.json").exists()
