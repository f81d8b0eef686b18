"""Speed and size figures of the engine, printed as one table (not a test: nothing here asserts).

    python benchmarks/run.py                  # the whole table, L = 300 ms (about 10 minutes on 2 cores)
    python benchmarks/run.py --latency 0.2    # another scripted model latency L
    python benchmarks/run.py --quick          # fewer turns and episodes, for a first look

Every model call goes to the bundled scripted server on 127.0.0.1, run in child processes so their
HTTP work does not share our interpreter lock. The narrator is the built-in LLM narrator, so a turn
is one narrator call plus the audit's (four steps in one round trip); the player is scripted.

Columns: "now" is the default schedule (pipelined turns, lean OpenAI-compatible calls); "sequential"
audits each turn before playing the next (--no-pipeline); "litellm only" sends every call through
litellm (NCP_LEAN_CALLS=0), as before the lean path.
  1. per-turn wall time of one episode, as a multiple of L                       (target <= 1.15)
  2. wall time of 24 episodes / 1 episode, same turns                            (target <= 1.2)
  3. wall time of 200 episodes / 1 episode, same turns (also with --workers 2)   (target <= 2.0)
  4. CPU per model call, whole stack (engine, prompts, parsing, client, traces)  (target <= 2.5 ms)
  5. peak memory (max RSS) of 200 concurrent episodes x 20 turns                 (target <= 400 MB)
  6. auditor prompt words at turn 5 vs turn 50 with a fixed ledger               (ledger growth only)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.core.config import RunConfig  # noqa: E402
from pytest_ncp.llm import ModelClient  # noqa: E402
from pytest_ncp.engine.players import ScriptedPlayer  # noqa: E402
from pytest_ncp.engine.runner import Runner  # noqa: E402
from pytest_ncp.core.spec import parse_spec  # noqa: E402
from pytest_ncp.testing import ScriptedModelServer  # noqa: E402

CALIGARI = (ROOT / "specs" / "caligari.yaml").read_text()
TMP = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ncp-bench"


def twins(n: int):
    return [parse_spec(CALIGARI.replace("id: caligari\n", f"id: twin-{i}\n", 1), f"twin-{i}.yaml") for i in range(n)]


def players(spec):  # module level: worker processes unpickle it
    return ScriptedPlayer(["I wait and watch the street."] * 500)


def run(n, base, *, turns, pipeline=True, lean=True, workers=1, out=None):
    """Wall seconds, CPU seconds of this process, model calls, and the results of n episodes."""
    config = RunConfig(narrator="pytest_ncp.narrators:LLMNarrator", narrator_model="openai/narrator",
                       auditor_model="openai/auditor", api_base=base, max_turns=turns, concurrency=max(n, 1),
                       pipeline=pipeline)
    client = ModelClient(api_base=base, concurrency=config.concurrency, lean=lean)
    runner = Runner(config, out_dir=out, client=client, player_factory=players)
    specs = twins(n)
    cpu, started = time.process_time(), time.perf_counter()
    if workers > 1:
        from pytest_ncp.engine.workers import run_in_workers

        os.environ["NCP_LEAN_CALLS"] = "1" if lean else "0"
        problems = run_in_workers(runner, specs, workers, player_factory=players)
        assert not problems, problems
        results = list(runner.results.values())
    else:
        results = [r.to_dict() for r in asyncio.run(runner.run(specs))]
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    bad = [r for r in results if r["termination"] != "turn_limit"]
    assert not bad, f"an episode did not run to the turn limit: {bad[0]}"
    return wall, cpu, client.usage.calls, results


def _serve(latency: float, pipe) -> None:  # runs in a child process
    server = ScriptedModelServer(latency=latency).start()
    pipe.send(server.base_url)
    pipe.recv()  # until the parent says stop
    pipe.send(resource.getrusage(resource.RUSAGE_SELF))


class ServerProcess:
    """The scripted server in its own process; ``cpu()`` is the CPU time it has used so far."""

    def __init__(self, latency: float):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.pipe, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(latency, child), daemon=True)
        self.process.start()
        self.base_url = self.pipe.recv()

    def cpu(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join()


def memory_child(base: str, lean: bool, episodes: int, turns: int) -> None:
    """Figure 5 in a fresh process, so nothing measured before counts: prints max RSS in MB."""
    out = TMP / f"memory-{'lean' if lean else 'litellm'}"
    wall, _, calls, results = run(episodes, base, turns=turns, lean=lean, out=out)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork + exec, so a
    # child of a big benchmark process would report the parent's size.
    with open("/proc/self/status") as fh:
        peak = int(fh.read().split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({"peak_mb": peak, "wall": wall, "calls": calls, "episodes": len(results)}))


def memory(base: str, lean: bool, episodes: int, turns: int) -> dict:
    env = {**os.environ, "NCP_LEAN_CALLS": "1" if lean else "0"}
    proc = subprocess.run([sys.executable, __file__, "--memory-child", base, "--episodes", str(episodes),
                           "--turns", str(turns)], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


class Rows(list):
    """The table's rows, each also printed as soon as it is measured (the whole table comes at the end)."""

    def append(self, row) -> None:
        super().append(row)
        print(" | ".join(row), f"| load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.3, help="the scripted model's latency L (seconds)")
    parser.add_argument("--quick", action="store_true", help="fewer turns and episodes")
    parser.add_argument("--memory-child", metavar="BASE", help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, os.environ.get("NCP_LEAN_CALLS", "1") != "0", args.episodes, args.turns)
        return

    L = args.latency
    long, turns, many = (6, 4, 60) if args.quick else (20, 10, 200)
    load_before = os.getloadavg()
    rows = Rows()
    schedules = (("now", {}), ("seq", {"pipeline": False}), ("litellm", {"lean": False}))
    with ServerProcess(L) as slow, ServerProcess(0.0) as fast, ScriptedModelServer() as local:
        run(2, fast.base_url, turns=2)  # warm up: imports, connections
        run(2, fast.base_url, turns=2, lean=False)

        # 1. one episode: per-turn wall time / L. The first narration has no audit to overlap with, so
        # a pipelined episode of n turns takes (n + 1) round trips: more turns, closer to 1.
        one = {name: run(1, slow.base_url, turns=long, **kw)[0] for name, kw in schedules}
        rows.append(("1. per-turn wall time, 1 episode, x L", f"{one['now'] / long / L:.2f}",
                     f"{one['seq'] / long / L:.2f}", f"{one['litellm'] / long / L:.2f}", "<= 1.15",
                     f"{one['now'] / long * 1000:.0f} ms per turn at L = {L * 1000:.0f} ms, {long} turns, "
                     f"LLM narrator + 4-step audit"))

        # 2. 24 episodes vs 1, both at `turns` turns
        one = {name: run(1, slow.base_url, turns=turns, **kw)[0] for name, kw in schedules}
        w24 = {name: run(24, slow.base_url, turns=turns, **kw)[0] for name, kw in schedules}
        rows.append(("2. 24 episodes vs 1 episode", f"{w24['now'] / one['now']:.2f}",
                     f"{w24['seq'] / one['seq']:.2f}", f"{w24['litellm'] / one['litellm']:.2f}", "<= 1.2",
                     f"{w24['now']:.2f} s vs {one['now']:.2f} s, {turns} turns"))

        # 3. 200 episodes vs 1 (one process, then two worker processes)
        def measured(**kw):
            server = slow.cpu()
            wall, spent, calls, _ = run(many, slow.base_url, turns=turns, **kw)
            return wall, spent / calls * 1000, (slow.cpu() - server) / calls * 1000

        w200, ours, theirs = measured()
        w200s, ours_s, theirs_s = measured(pipeline=False)
        w200w, *_ = run(many, slow.base_url, turns=turns, workers=2)
        w200l, *_ = run(many, slow.base_url, turns=turns, lean=False)
        rows.append((f"3. {many} episodes vs 1 episode", f"{w200 / one['now']:.2f}", f"{w200s / one['seq']:.2f}",
                     f"{w200l / one['litellm']:.2f}", "<= 2.0",
                     f"{w200:.1f} s vs {one['now']:.2f} s (sequential {w200s:.1f} s vs {one['seq']:.2f} s); "
                     f"--workers 2: {w200w / one['now']:.2f}; CPU per call, "
                     f"ours / scripted server's: {ours:.2f} / {theirs:.2f} ms (sequential {ours_s:.2f} / "
                     f"{theirs_s:.2f} ms)"))

        # 4. CPU per model call, whole stack, zero-latency server in another process
        cpu = {}
        for name, kw in (("now", {}), ("seq", {"pipeline": False}), ("litellm", {"lean": False})):
            _, spent, calls, _ = run(24, fast.base_url, turns=turns, out=TMP / f"cpu-{name}", **kw)
            cpu[name] = spent / calls * 1000
        rows.append(("4. CPU per model call, whole stack", f"{cpu['now']:.2f} ms", f"{cpu['seq']:.2f} ms",
                     f"{cpu['litellm']:.2f} ms", "<= 2.5 ms", f"24 episodes x {turns} turns, 5 calls per turn"))

        # 5. peak memory of 200 concurrent episodes x 20 turns (fresh processes)
        mem = memory(fast.base_url, True, many, 20)
        mem_l = memory(fast.base_url, False, many, 20)
        rows.append((f"5. peak memory, {many} episodes x 20 turns", f"{mem['peak_mb']:.0f} MB", "-",
                     f"{mem_l['peak_mb']:.0f} MB", "<= 400 MB",
                     f"{mem['calls']} calls in {mem['wall']:.1f} s (litellm only: {mem_l['wall']:.1f} s)"))

        # 6. bounded auditor prompts
        run(1, local.base_url, turns=50)
        sizes = {}
        for request in local.requests:
            if request.step == "conflict_check":
                sizes[int(re.search(r"TURN (\d+)\.", request.text).group(1))] = len(request.text.split())
        rows.append(("6. auditor prompt words, turn 5 vs 50", f"{sizes[5]} vs {sizes[50]}", "-", "-", "ledger only",
                     f"growth {sizes[50] - sizes[5]} (ledger fixed: no fact added)"))

    header = ("figure", "now", "sequential", "litellm only", "target", "detail")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    print()
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5])
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores; Python "
          f"{sys.version.split()[0]}")


if __name__ == "__main__":
    main()
