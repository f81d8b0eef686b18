"""Speed and size figures of the engine, printed side by side (not a test: nothing here asserts).

    python benchmarks/run.py                 # all five figures (about a minute on 2 cores)
    python benchmarks/run.py --latency 0.2   # the scripted model's latency for figures 1 and 2

Every model call goes to the bundled scripted server on 127.0.0.1 (or, for the "our code" share of
figure 3, to an in-process transport that answers instantly), so the figures measure the framework.
  1. audit round trips per turn: wall time per turn / model latency (target <= 1.2)
  2. wall time of 24 episodes vs 1 episode at the same settings (target <= 1.3)
  3. framework overhead per turn at zero latency, split into our code and litellm + HTTP (ours <= 2 ms)
     (the scripted server runs in a child process for the timed figures)
  4. auditor prompt tokens at turn 5 vs turn 50 with a fixed ledger (growth only from the ledger)
  5. peak memory (max RSS) of a 100-episode run (target <= 300 MB)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.auditor import LLMAuditor  # noqa: E402
from pytest_ncp.config import RunConfig  # noqa: E402
from pytest_ncp.episode import Episode  # noqa: E402
from pytest_ncp.llm import Completion, ModelClient  # noqa: E402
from pytest_ncp.players import ScriptedPlayer  # noqa: E402
from pytest_ncp.runner import Runner  # noqa: E402
from pytest_ncp.spec import load_spec, load_specs, parse_spec  # noqa: E402
from pytest_ncp.testing import DEFAULT_REPLIES, ScriptedModelServer  # noqa: E402

CALIGARI = (ROOT / "specs" / "caligari.yaml").read_text()


class Steady:
    """A narrator that costs nothing: the figures are about the audit and the engine."""

    def respond(self, player_input, context):
        return "The lamps gutter as the night wears on. Nothing else changes."


def twins(n: int):
    return [parse_spec(CALIGARI.replace("id: caligari\n", f"id: twin-{i}\n", 1), f"twin-{i}.yaml") for i in range(n)]


def players(spec):
    return ScriptedPlayer(["I wait and watch the street."] * 200)


async def instant(request):
    """In-process transport: the scripted server's default answers with no HTTP and no litellm."""
    reply = DEFAULT_REPLIES.get(request.get("step") or request["role"], DEFAULT_REPLIES["narrator"])
    text = reply if isinstance(reply, str) else json.dumps(reply)
    return Completion(text=text, model=request["model"], role=request["role"], step=request.get("step"),
                      prompt_tokens=1, completion_tokens=1)


def run(specs, *, api_base=None, turns=10, concurrency=16, transport=None, out=None):
    client = ModelClient(api_base=api_base, concurrency=concurrency, transport=transport)
    config = RunConfig(narrator="unused:X", auditor_model="openai/auditor", api_base=api_base, max_turns=turns,
                       concurrency=concurrency)
    runner = Runner(config, out_dir=out, client=client, narrator_factory=Steady, player_factory=players)
    started = time.perf_counter()
    results = asyncio.run(runner.run(specs))
    return time.perf_counter() - started, results


def _serve(latency: float, queue) -> None:  # runs in a child process
    server = ScriptedModelServer(latency=latency).start()
    queue.put(server.base_url)
    while True:
        time.sleep(3600)


class ServerProcess:
    """The scripted server in its own process, so its HTTP work does not share our interpreter's GIL."""

    def __init__(self, latency: float):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(latency, queue), daemon=True)
        self.process.start()
        self.base_url = queue.get(timeout=30)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    rows = []
    with ServerProcess(args.latency) as slow, ServerProcess(0.0) as fast, ScriptedModelServer() as local:
        run(twins(1), api_base=fast.base_url, turns=2)  # warm up: litellm import, connections

        turns = 10
        wall_one, _ = run(twins(1), api_base=slow.base_url, turns=turns, concurrency=24)
        rows.append(("1. audit round trips per turn", f"{wall_one / turns / args.latency:.2f}",
                     f"{wall_one / turns * 1000:.0f} ms per turn at {args.latency * 1000:.0f} ms latency", "<= 1.2"))

        wall_many, _ = run(twins(24), api_base=slow.base_url, turns=turns, concurrency=24)
        rows.append(("2. 24 episodes vs 1 episode", f"{wall_many / wall_one:.2f}",
                     f"{wall_many:.2f} s vs {wall_one:.2f} s, {turns} turns, concurrency 24", "<= 1.3"))

        turns = 60
        ours, _ = run(twins(1), transport=instant, turns=turns)
        full, _ = run(twins(1), api_base=fast.base_url, turns=turns)
        ours_ms, full_ms = ours / turns * 1000, full / turns * 1000
        rows.append(("3. overhead per turn, our code", f"{ours_ms:.2f} ms",
                     f"litellm + local HTTP add {full_ms - ours_ms:.2f} ms (total {full_ms:.2f} ms, 4 calls)", "<= 2 ms"))

        run(twins(1), api_base=local.base_url, turns=50)
        sizes = {}
        for request in local.requests:
            if request.step == "conflict_check":
                turn = int(re.search(r"TURN (\d+)\.", request.text).group(1))
                sizes[turn] = len(request.text.split())
        rows.append(("4. auditor prompt words, turn 5 vs 50", f"{sizes[5]} vs {sizes[50]}",
                     f"growth {sizes[50] - sizes[5]} (ledger fixed: no fact added)", "ledger only"))

        specs, _ = load_specs([ROOT / "specs"])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        wall, results = run(specs, api_base=fast.base_url, turns=10, concurrency=16,
                            out=Path(os.environ.get("TMPDIR", "/tmp")) / "ncp-bench-run")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        calls = sum(r.usage.calls for r in results)
        rows.append(("5. peak memory, 100-episode run", f"{peak:.0f} MB",
                     f"{len(results)} episodes x 10 turns, {calls} calls in {wall:.1f} s "
                     f"(RSS before the run: {before:.0f} MB)", "<= 300 MB"))

    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'value':>14}  {'target':<11}  detail")
    for name, value, detail, target in rows:
        print(f"{name:<{width}}  {value:>14}  {target:<11}  {detail}")


if __name__ == "__main__":
    main()
