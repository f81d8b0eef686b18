"""Checking one failure at turn 15: fork it (K samples of turn 15) vs re-run the whole episode K times.

    python benchmarks/fork.py                   # L = 300 ms, K = 3, failure at turn 15
    python benchmarks/fork.py --latency 0.1 --samples 5

Figures, not a test. Every model call goes to the bundled scripted server on 127.0.0.1 with a fixed
latency L; the narrator is the built-in LLM narrator (one call per turn), the auditor the real one,
the player scripted. The auditor finds a fact conflict at turn 15 of the caligari spec. First one
episode is recorded (not counted; it also warms the model client, which picks its structured-output
mode on its first audit calls); then the same failure is checked twice, with that client:

  re-run  the whole episode K times concurrently (turns 1..15 each: narrator + audit calls)
  fork    ``fork()`` at turn 15 from the recorded trace, K samples concurrently (turn 15 only)

Printed: wall seconds and model calls (requests the server answered) of each, and the ratios
(target: >= 10x fewer calls, >= 5x less wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.engine.auditor import LLMAuditor  # noqa: E402
from pytest_ncp.core.config import RunConfig  # noqa: E402
from pytest_ncp.engine.fork import EpisodeState, fork  # noqa: E402
from pytest_ncp.llm import ModelClient  # noqa: E402
from pytest_ncp.engine.narrators import LLMNarrator  # noqa: E402
from pytest_ncp.engine.players import ScriptedPlayer  # noqa: E402
from pytest_ncp.engine.runner import Runner  # noqa: E402
from pytest_ncp.core.spec import load_spec  # noqa: E402
from pytest_ncp.testing import ScriptedModelServer  # noqa: E402
from pytest_ncp.testing.server import NARRATION_DEFAULT  # noqa: E402


def players(spec):
    return ScriptedPlayer(["I wait and watch the street."] * 100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.3, help="seconds per scripted model call (L)")
    ap.add_argument("--samples", type=int, default=3, help="K: samples of the fork, re-runs of the episode")
    ap.add_argument("--turn", type=int, default=15, help="the failing turn")
    args = ap.parse_args()
    spec = load_spec(ROOT / "tests" / "fixtures" / "caligari.yaml")
    out = Path(tempfile.mkdtemp(prefix="ncp-bench-fork-"))
    quote = " ".join(NARRATION_DEFAULT.split()[:4])
    with ScriptedModelServer(latency=args.latency) as server:
        server.add(step="conflict_check", contains=f"TURN {args.turn}.", reply={"conflicts": [{
            "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": quote,
            "explanation": "Scripted benchmark finding."}]})

        # One client throughout, warmed by the recording: its first audit calls choose the structured-output
        # mode one at a time (once per endpoint and model), a cost both checks would otherwise pay apart.
        client = ModelClient.from_config(RunConfig(api_base=server.base_url))

        def runner(repeats: int, where: Path) -> Runner:
            config = RunConfig(narrator="pytest_ncp.narrators:LLMNarrator", narrator_model="openai/narrator",
                               auditor_model="openai/auditor", api_base=server.base_url, max_turns=args.turn + 5,
                               repeats=repeats, concurrency=max(repeats, 1))
            return Runner(config, out_dir=where, client=client,
                          player_factory=players)

        recorded = asyncio.run(runner(1, out / "recorded").run([spec]))[0]
        assert recorded.failure is not None and recorded.failure.turn == args.turn, recorded.termination

        before, started = len(server.requests), time.perf_counter()
        rerun = asyncio.run(runner(args.samples, out / "rerun").run([spec]))
        rerun_wall, rerun_calls = time.perf_counter() - started, len(server.requests) - before
        assert all(r.failure and r.failure.turn == args.turn for r in rerun)

        state = EpisodeState.at(recorded.trace, args.turn)
        before, started = len(server.requests), time.perf_counter()
        settings = RunConfig(narrator_model="openai/narrator", auditor_model="openai/auditor",
                             api_base=server.base_url)
        outcome = asyncio.run(fork(state, spec, settings, narrator_factory=LLMNarrator,
                                   auditor=LLMAuditor.from_config(settings, client), samples=args.samples,
                                   client=client, out_dir=out / "fork"))
        fork_wall, fork_calls = time.perf_counter() - started, len(server.requests) - before
        assert outcome.rate == 1.0, outcome.lines()

    print(f"check one failure at turn {args.turn}, K = {args.samples}, scripted latency L = {args.latency * 1000:.0f} ms, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'':8}  {'wall s':>7}  {'model calls':>11}")
    print(f"{'re-run':8}  {rerun_wall:7.2f}  {rerun_calls:11d}   (the whole episode x {args.samples})")
    print(f"{'fork':8}  {fork_wall:7.2f}  {fork_calls:11d}   (turn {args.turn} x {args.samples})")
    print(f"fork: {rerun_calls / fork_calls:.1f}x fewer calls (target >= 10), "
          f"{rerun_wall / fork_wall:.1f}x less wall time (target >= 5)")
    print(f"same verdict: re-runs conflict at {sorted({r.failure.turn for r in rerun})}, "
          f"fork conflict rate at turn {args.turn} {outcome.rate:.0%}")


if __name__ == "__main__":
    main()
