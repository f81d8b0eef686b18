"""pytest-ncp against a real llama.cpp server (llama-cpp-python, Gemma 3 270M, --chat_format gemma).

Plumbing, not verdicts: the structured-output mode auto finds, a bounded episode whose every auditor
answer is either used or rejected with its reason in the trace, doctor's findings, a server killed
mid-run, and the key the server demands never reaching any output (checked in the episode and doctor
tests).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from pytest_ncp.engine.auditor import response_format
from pytest_ncp.cli import main
from pytest_ncp.core.exit_codes import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK
from pytest_ncp.llm import ModelClient
from tests.conftest import SPECS
from tests.real_server.conftest import KEY, LIMITS, MODEL, start_server

AUDITOR_LIMIT = int(next(limit for limit in LIMITS if limit.startswith("auditor=")).split("=")[1])
SPEC_FILES = [str(SPECS / "caligari.yaml"), str(SPECS / "nosferatu.yaml")]
# Generous: on two shared cores a ~1,000-token auditor prompt alone can take half a minute.
TIMEOUT = 120


def run_args(llama, out: Path, *, max_turns: int = 3, specs=SPEC_FILES, timeout: int = TIMEOUT) -> list[str]:
    limits = [a for limit in LIMITS for a in ("--max-tokens", limit)]
    return ["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", MODEL,
            "--auditor-model", MODEL, "--api-base", llama.base_url, "--specs", *specs,
            "--max-turns", str(max_turns), "--concurrency", "1", "--concurrency-per-endpoint", "1",
            "--system-prompt", "merge", "--timeout", str(timeout), "--out", str(out), *limits]


def records(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


def test_auto_picks_the_servers_json_mode(llama):
    client = ModelClient(api_base=llama.base_url, max_tokens={"auditor": 64})
    messages = [{"role": "user", "content": "Is a lamp a light? Answer as JSON."}]
    completion = asyncio.run(client.complete("auditor", MODEL, messages, step="conflict_confirmation",
                                             response_format=response_format("conflict_confirmation")))
    assert completion.output_mode == "json_object"
    assert client.output_modes() == {f"{llama.endpoint}|{MODEL}": "json_object"}
    notes = client.mode_notes(MODEL)
    assert len(notes) == 1 and notes[0].startswith("json_schema rejected") and "json_object" in notes[0]
    assert client.usage.calls == 1  # the refused request is not counted as an answer, nor retried


def test_an_episode_finishes_bounded_with_every_auditor_answer_used_or_rejected_with_a_reason(llama, tmp_path,
                                                                                               capsys):
    started = time.monotonic()
    code = main(run_args(llama, tmp_path, specs=SPEC_FILES[:1]))
    elapsed = time.monotonic() - started
    out = capsys.readouterr()
    print(out.out, out.err, f"wall time {elapsed:.0f}s")
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["episodes"]) == 1
    # An episode the auditor could not judge exceeds the default error budget (exit 6), never a pass.
    assert code == (EXIT_ERROR_BUDGET if data["episodes"][0]["termination"] == "error" else code)
    assert code in (EXIT_OK, EXIT_FAILED, EXIT_ERROR_BUDGET)
    # The server demands KEY (it is in OPENAI_API_KEY): it reaches no output, file or server log.
    assert KEY not in out.out + out.err + llama.log.read_text(errors="replace")
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path
    assert data["config"]["structured_output_used"] == {MODEL: "json_object"}
    for episode in data["episodes"]:
        trace = records(tmp_path / episode["trace"])
        assert trace[-1]["event"] == "end"
        if episode["termination"] == "error":
            # Whatever went wrong is the model's or the auditor's, never put on the narrator.
            assert episode["error"]["kind"] in ("auditor", "model"), episode["error"]
        for record in trace:
            if record["event"] not in ("turn", "error"):
                continue
            calls, rejected = record.get("auditor_calls", []), record.get("rejected_answers", [])
            for call in calls:  # every generation bounded by the auditor's limit, every request by the timeout
                assert call["completion_tokens"] <= AUDITOR_LIMIT and call["latency_s"] < TIMEOUT
                assert call["finish_reason"] in ("stop", "length")
            for answer in rejected:
                assert answer["problems"] and "answer" in answer and answer["step"]
            assert len(rejected) <= len(calls)
            if record["event"] == "turn":
                v = record["verdicts"]
                used = 2 + (v["trajectory_update"] is not None) + (v["commitment_check"] is not None) \
                    + len(v["conflict_confirmation"])
                assert len(calls) - len(rejected) == used
                assert {c["output_mode"] for c in calls} == {"json_object"}
            else:
                assert record["turn"] >= 0 and record["player_input"] is not None or record["turn"] == 0
    # Bounded: each request ends within its timeout, and a turn makes a bounded number of requests
    # (narrator, four steps with three attempts each, confirmations, one refused mode probe).
    assert elapsed < 3 * (1 + 4 * 3 + 3) * TIMEOUT + TIMEOUT


def test_doctor_reports_the_dropped_system_prompt_and_the_json_mode(llama, capsys):
    code = main(["doctor", "--model", MODEL, "--api-base", llama.base_url, "--timeout", "60"])
    out = capsys.readouterr().out
    print(out)
    assert KEY not in out
    lines = {line.split()[1]: line for line in out.splitlines()[1:] if line.split()[0] in ("ok", "FIX", "FAIL")}
    assert lines["endpoint"].startswith("ok") and lines["model"].startswith("ok")
    assert "json_schema rejected (HTTP 500" in lines["structured"]
    assert "json_object" in lines["structured"]
    assert lines["system"].startswith("FIX") and "--system-prompt=merge" in lines["system"]
    assert lines["max_tokens"].startswith("ok")
    assert "tokens/s" in lines["speed"]
    assert code == (0 if lines["structured"].startswith(("ok", "FIX")) else 1)


def test_killing_the_server_ends_in_flight_episodes_as_model_errors_naming_it(gguf, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = start_server(gguf, tmp_path / "doomed.log")
    out = tmp_path / "run"
    timeout = TIMEOUT
    killed_at: list[float] = []

    def kill_when_running() -> None:
        # Kill once the first episode has started talking to the server.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            traces = list((out / "traces").glob("*.jsonl")) if (out / "traces").exists() else []
            if traces and server.log.read_text(errors="replace").count("POST /v1/chat/completions") >= 2:
                break
            time.sleep(0.2)
        killed_at.append(time.monotonic())
        server.process.terminate()

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        code = main(run_args(server, out, max_turns=20, timeout=timeout))
        ended = time.monotonic()
    finally:
        killer.join()
        server.stop()
    capsys.readouterr()
    data = json.loads((out / "results.json").read_text())
    assert code == EXIT_ERROR_BUDGET  # every episode errored: the run fails, saying it judged nothing
    # Killed after the narrator's answer and the refused json_schema request were logged: the first
    # episode was waiting on an auditor answer; the second starts against a closed port.
    for episode in data["episodes"]:
        assert episode["termination"] == "error"
        assert episode["error"]["kind"] == "model", episode["error"]
        assert server.endpoint in episode["error"]["message"]
    # In flight when killed: over within one request timeout plus the retries of a refused connection.
    assert ended - killed_at[0] < timeout + 20
