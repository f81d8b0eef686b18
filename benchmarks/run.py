"""What a user gets: speed, cost and cache figures of ``ncp run``, printed as one table (figures, not tests).

    python benchmarks/run.py                  # the whole table, L = 300 ms (about 3 minutes on 2 cores)
    python benchmarks/run.py --latency 0.2    # another scripted model latency L
    python benchmarks/run.py --quick          # fewer turns and episodes, for a first look

Every headline figure is a fresh process running ``ncp run`` with default options (fresh client, cold start
included: interpreter, imports, the first structured calls, as a user's CI run has it), against the bundled
scripted server in a child process (its HTTP work shares the machine's cores, not our interpreter). The
narrator is the built-in LLM narrator (one model call per turn), the auditor the real four-step audit, the
player scripted; traces and results are written. Options other than defaults are named in each row:
``--max-turns`` sets the episode length and ``--concurrency N`` lets N episodes run at once (the default,
16, runs 24 episodes in two waves: the "defaults" row shows what that costs).

  1. per-turn wall time, 1 episode, as a multiple of L             (target <= 1.1; a warm in-process figure beside)
  2. wall time of 24 episodes / 1 episode, same turns              (target <= 1.2), and with every option default
  3. wall time of 192 episodes / 1 episode, same turns             (target <= 3.0)
  4. CPU per model call, whole stack: the slope of two fresh runs   (target <= 0.5 ms)
  5. auditor prompt characters in a prefix already sent earlier in the run, 24 specs, demo script (no target: figure
     8 prices what a share buys)
  6. tokens per audited turn, by step, the same run                (a prompt change that makes the auditor dearer)
  7. --max-cost overshoot over the cap, priced model names         (target <= 5%)
  8. audit prompt per narrator turn, raw and priced at cached rates, 24 specs x 8 turns (target: at a 50% cached
     rate, at most half of ncp-prompts/5's figure on the same run, 14,882 characters: 7,441)

    python benchmarks/run.py --price          # figure 8 alone (about 20 s): the price table of the audit prompts
    python benchmarks/run.py --price --baseline 7e8b20c   # ... with prompts 5 (or any git ref) beside this checkout's
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.testing import ScriptedModelServer  # noqa: E402

TMP = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ncp-bench"
NARRATOR = "pytest_ncp.narrators:LLMNarrator"
PRICED = "openai/gpt-4o-mini"
CAP_COMPLETION = 120  # completion tokens the scripted server reports per call in figure 7


# --- the scripted server, in a child process ---------------------------------------------------------------

def _usage(request: Any) -> dict[str, int]:
    # Figure 7: about what a provider reports (4 bytes per prompt token), so the cap's byte bound is honest.
    return {"prompt_tokens": len(request.text.encode()) // 4 + 8, "completion_tokens": CAP_COMPLETION}


def _long_narration(request: Any) -> str:
    # Figure 5's second workload: the demo's narration, then about 1,400 characters of scene, as a narrator
    # writes (the demo's own narrations are about 150 characters). Distinct per turn, as real ones are.
    from pytest_ncp.testing.demo import narrate

    turn = len(request.body.get("messages") or [])
    scene = " ".join(f"Lamp {turn}-{i} flickers over the crooked street, and the painted walls lean closer."
                     for i in range(16))
    return f"{narrate(request)} {scene}"


def _serve(latency: float, pipe: Any) -> None:  # runs in a child process
    from pytest_ncp.testing.demo import install_demo_script

    server = ScriptedModelServer(latency=latency).start()
    pipe.send(server.base_url)
    while True:
        command = pipe.recv()
        if command == "stop":
            server.stop()
            return
        if command == "reset":
            server.reset()
        elif command == "demo":
            install_demo_script(server)
        elif command == "long":
            server.add(role="narrator", reply=_long_narration)
        elif command == "usage":
            server.add(usage=_usage)
        elif command == "requests":  # what the parent measures: every chat request, in arrival order
            pipe.send([{"role": r.role, "step": r.step, "status": r.status,
                        "messages": r.body.get("messages") if r.role == "auditor" else None,
                        "bytes": len(r.text.encode())}
                       for r in server.requests if r.path.endswith("/chat/completions")])
            continue
        pipe.send("ok")


class ServerProcess:
    """The scripted server in its own process; ``cpu()`` is the CPU time it has used so far."""

    def __init__(self, latency: float):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.pipe, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(latency, child), daemon=True)
        self.process.start()
        self.base_url = self.pipe.recv()

    def ask(self, command: str) -> Any:
        self.pipe.send(command)
        return self.pipe.recv()

    def cpu(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pipe.send("stop")
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()


# --- fresh ncp run processes ---------------------------------------------------------------------------------

def twins(n: int) -> Path:
    """A folder of ``n`` copies of the caligari spec under other ids and titles (every prompt is its own)."""
    folder = TMP / f"twins-{n}"
    if not folder.exists():
        folder.mkdir(parents=True)
        text = (ROOT / "specs" / "caligari.yaml").read_text()
        for i in range(n):
            twin = text.replace("id: caligari\n", f"id: twin-{i}\n", 1).replace(
                "title: The Cabinet of Dr. Caligari\n", f"title: Twin {i} of Caligari\n", 1)
            (folder / f"twin-{i}.yaml").write_text(twin)
    return folder


def first_specs(n: int) -> Path:
    """The first ``n`` specs of this checkout, copied afresh (a copy left by an earlier checkout would be stale)."""
    folder = TMP / f"specs-{n}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in sorted(p for p in (ROOT / "specs").glob("*.yaml"))[:n]:
        (folder / path.name).write_text(path.read_text())
    return folder


def price_specs() -> Path:
    """Figure 8's specs: the first 24 as they were at PRICE_SPECS_REF, the main the price target was set on.

    The specs of today's checkout carry reference playthroughs that older prompt versions' loaders refuse, and
    rewritten scripted inputs; pinning the specs keeps every prompt version's figure on the same run."""
    folder = TMP / f"specs-price-{PRICE_SPECS_REF}"
    if not folder.exists():
        listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", PRICE_SPECS_REF, "specs/"],
                                 capture_output=True, text=True)
        if listing.returncode != 0:
            raise SystemExit(f"figure 8 needs the specs of {PRICE_SPECS_REF} (git history): {listing.stderr.strip()}")
        names = sorted(n for n in listing.stdout.split() if n.endswith(".yaml"))[:PRICE_SPECS]
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in names:
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{PRICE_SPECS_REF}:{name}"], capture_output=True,
                                  text=True, check=True).stdout
            (staging / Path(name).name).write_text(text)
        staging.rename(folder)
    return folder


def ncp_run(base: str, specs: Path, *options: str, out: Path | None = None, narrator_model: str = "openai/narrator",
            auditor_model: str = "openai/auditor", code: Path | None = None) -> dict[str, Any]:
    """One fresh ``ncp run`` process: wall seconds (spawn to exit), CPU seconds (it and its workers), exit code."""
    command = [sys.executable, "-m", "pytest_ncp.cli", "run", "--narrator", NARRATOR, "--narrator-model",
               narrator_model, "--auditor-model", auditor_model, "--api-base", base, "--specs", str(specs), *options]
    if out is not None:
        command += ["--out", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCP_")}
    if code is not None:  # another version of pytest_ncp (``--baseline``), ahead of the installed one
        env["PYTHONPATH"] = str(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=TMP)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1, 7):
        raise RuntimeError(f"ncp run exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {"wall": wall, "cpu": cpu, "code": proc.returncode, "stdout": proc.stdout}


def chat(server: ServerProcess) -> list[dict[str, Any]]:
    return [r for r in server.ask("requests") if r["status"] == 200]


# --- figure 1's warm companion: the engine in this process, client warmed first ---------------------------

def warm_per_turn(base: str, turns: int) -> float:
    from pytest_ncp.core.config import RunConfig
    from pytest_ncp.core.spec import load_spec
    from pytest_ncp.engine.runner import Runner
    from pytest_ncp.llm import ModelClient

    config = RunConfig(narrator=NARRATOR, narrator_model="openai/narrator", auditor_model="openai/auditor",
                       api_base=base, max_turns=turns)
    client = ModelClient.from_config(config)
    spec = load_spec(twins(1) / "twin-0.yaml")
    asyncio.run(Runner(RunConfig(**{**config.__dict__, "max_turns": 2}), client=client).run([spec]))  # warm up
    started = time.perf_counter()
    asyncio.run(Runner(config, client=client).run([spec]))
    return time.perf_counter() - started


# --- figure 5: the prefix share --------------------------------------------------------------------------

def _common(a: str, b: str) -> int:
    n, i, step = min(len(a), len(b)), 0, 256
    while i + step <= n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """A request's prompt as a provider's cache sees it: every message, role and content, in order."""
    return "".join(f"\x00{m.get('role')}\x00{m.get('content')}" for m in messages)


def prefix_share(prompts: list[str]) -> tuple[float, int]:
    """Characters of each prompt in the longest prefix it shares with any earlier prompt of the run, summed,
    over all characters. The longest prefix shared with any string of a set is shared with one of its
    neighbours in sorted order, so each prompt is compared with two."""
    seen: list[str] = []
    shared = total = 0
    for text in prompts:
        k = bisect.bisect_left(seen, text)
        best = max([_common(seen[j], text) for j in (k - 1, k) if 0 <= j < len(seen)], default=0)
        shared += best
        total += len(text)
        seen.insert(k, text)
    return shared / total if total else 0.0, total


def tasks_share(requests: list[dict[str, Any]]) -> float:
    """Share of the auditor prompt characters in each step's own part (from its ``TASK:`` on): no prefix order
    shares those across the steps of a turn while the story state and the turn's data are shared too."""
    own = total = 0
    for r in requests:
        text = prompt_text(r["messages"])
        total += len(text)
        at = text.find("\nTASK: ")
        own += len(text) - at if at >= 0 else 0
    return own / total if total else 0.0


PRICE_TURNS, PRICE_SPECS = 8, 24
PRICE_SPECS_REF = "7e8b20c"  # main when the price target was set (prompts 5): its specs, for every prompt version
# Cached prompt rates as a share of the input price: OpenAI bills a cached prefix at 50%; Anthropic a cache read
# at 10% and a cache write at 125% (the 5-minute TTL; 200% for an hour).
OPENAI_CACHED, ANTHROPIC_READ, ANTHROPIC_WRITE = 0.5, 0.1, 1.25


def _encoding() -> Any:
    from pytest_ncp.llm import import_litellm

    return import_litellm().encoding  # litellm ships cl100k_base: tokens counted offline


def price_table(prompts: list[str], turns: int, steps: list[str] | None = None) -> dict[str, float]:
    """Audit prompt characters and tokens per narrator turn, raw and priced at cached rates.

    The method: each request's prefix shared with an earlier request of the run is priced as cached (the most
    any provider's prefix cache can serve; a real cache also needs a minimum length and, at Anthropic,
    breakpoints). For Anthropic's write premium, the part of a prompt past what earlier requests cached, up to
    the longest prefix a later request shares with it, is written once at 1.25x: a cache written exactly where
    later requests read it (ideal breakpoints); the rest is plain input."""
    encoding = _encoding()
    n = len(prompts)
    earlier = [0] * n
    later = [0] * n
    # Longest prefix shared with any earlier prompt (forwards) and with any later prompt (backwards).
    for order, out in ((range(n), earlier), (range(n - 1, -1, -1), later)):
        seen: list[str] = []
        for i in order:
            text = prompts[i]
            k = bisect.bisect_left(seen, text)
            out[i] = max([_common(seen[j], text) for j in (k - 1, k) if 0 <= j < len(seen)], default=0)
            seen.insert(k, text)
    figures = dict.fromkeys(("chars", "chars_cached", "chars_written", "tokens", "tokens_cached", "tokens_written"),
                            0.0)
    for i, (text, a, b) in enumerate(zip(prompts, earlier, later)):
        written = max(0, b - a)
        if steps is not None:  # per step: characters at a 50% cached rate
            key = f"step {steps[i]}"
            figures[key] = figures.get(key, 0.0) + len(text) - a + OPENAI_CACHED * a
        figures["chars"] += len(text)
        figures["chars_cached"] += a
        figures["chars_written"] += written
        whole, cached = len(encoding.encode(text)), len(encoding.encode(text[:a])) if a else 0
        upto = len(encoding.encode(text[:a + written])) if written else cached
        figures["tokens"] += whole
        figures["tokens_cached"] += cached
        figures["tokens_written"] += upto - cached
    per_turn = {k: v / turns for k, v in figures.items()}
    for unit in ("chars", "tokens"):
        raw, cached, written = per_turn[unit], per_turn[f"{unit}_cached"], per_turn[f"{unit}_written"]
        per_turn[f"{unit}_openai"] = raw - cached + OPENAI_CACHED * cached
        per_turn[f"{unit}_anthropic"] = raw - cached + ANTHROPIC_READ * cached
        per_turn[f"{unit}_anthropic_w"] = raw - cached - written + ANTHROPIC_READ * cached + ANTHROPIC_WRITE * written
    per_turn["share"] = figures["chars_cached"] / figures["chars"] if figures["chars"] else 0.0
    per_turn["requests"], per_turn["turns"] = n, turns
    return per_turn


def price_lines(figures: dict[str, float], label: str) -> list[str]:
    """The price table in markdown: one row per unit."""
    lines = [f"| {label} | raw | at a 50% cached rate (OpenAI) | at a 10% cached rate (Anthropic read) | "
             "Anthropic, writes at 1.25x | prefix share |", "|---|---|---|---|---|---|"]
    for unit in ("chars", "tokens"):
        lines.append(f"| {unit} per narrator turn | {figures[unit]:,.0f} | {figures[f'{unit}_openai']:,.0f} | "
                     f"{figures[f'{unit}_anthropic']:,.0f} | {figures[f'{unit}_anthropic_w']:,.0f} | "
                     f"{figures[f'{unit}_cached'] / figures[unit]:.1%} |")
    return lines


def price_run(server: ServerProcess, code: Path | None = None) -> dict[str, float]:
    """Figure 8's run: the first 24 specs, 8 turns, the demo's scripted auditor, every other option default."""
    server.ask("reset")
    server.ask("demo")
    out = TMP / "price"
    ncp_run(server.base_url, price_specs(), "--max-turns", str(PRICE_TURNS), out=out, code=code)
    requests = chat(server)
    audits = [r for r in requests if r["role"] == "auditor" and r["step"] != "input_screen"]
    narrations = sum(1 for r in requests if r["role"] == "narrator")
    return price_table([prompt_text(r["messages"]) for r in audits], narrations, [r["step"] for r in audits])


def checkout(ref: str) -> Path:
    """The package as it is at git ``ref``, exported once (the benchmark's own specs and scripts stay)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = TMP / f"code-{commit}"
    if not (folder / "pytest_ncp").exists():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "pytest_ncp"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def price_report(server: ServerProcess, baseline: str | None) -> None:
    """Figure 8 printed as a table, with a git ref's prompts beside this checkout's when asked."""
    runs = [(f"{baseline} ({checkout(baseline).name[5:]})", checkout(baseline))] if baseline else []
    runs.append(("this checkout", None))
    print(f"Audit prompts per narrator turn, {PRICE_SPECS} specs (as at {PRICE_SPECS_REF}) x {PRICE_TURNS} turns, the demo's scripted auditor, "
          "defaults; each request's prefix shared with an earlier request of the run priced as cached.")
    results = []
    for label, code in runs:
        figures = price_run(server, code)
        results.append(figures)
        print("\n".join(price_lines(figures, label)))
        print("  at a 50% cached rate, by step (characters): " + ", ".join(
            f"{k[5:]} {v:,.0f}" for k, v in figures.items() if k.startswith("step ")))
        print(f"  {figures['requests']:.0f} audit requests over {figures['turns']:.0f} narrator turns")
    if len(results) == 2:
        print(f"this checkout / {baseline}, characters at a 50% cached rate: "
              f"{results[1]['chars_openai'] / results[0]['chars_openai']:.1%}; tokens: "
              f"{results[1]['tokens_openai'] / results[0]['tokens_openai']:.1%} (target <= 50%)")
    print(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))


def tokens_per_turn(out: Path) -> tuple[dict[str, tuple[float, float]], int]:
    """Prompt and completion tokens per audited turn, by step (the auditor's from the traces' auditor_calls;
    the narrator's from each episode's totals minus its auditor calls), as the scripted server counts them."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    turns = 0
    results = json.loads((out / "results.json").read_text())
    for episode in results["episodes"]:
        audit_prompt = audit_completion = 0
        for line in (out / episode["trace"]).read_text().splitlines():
            record = json.loads(line)
            if record["event"] != "turn":
                continue
            turns += 1
            for call in record["auditor_calls"]:
                sums[call["step"]][0] += call["prompt_tokens"]
                sums[call["step"]][1] += call["completion_tokens"]
                audit_prompt += call["prompt_tokens"]
                audit_completion += call["completion_tokens"]
        sums["narrator"][0] += (episode.get("prompt_tokens") or 0) - audit_prompt
        sums["narrator"][1] += (episode.get("completion_tokens") or 0) - audit_completion
    return {step: (p / turns, c / turns) for step, (p, c) in sums.items()}, turns


# --- the table -------------------------------------------------------------------------------------------

class Rows(list):
    """The table's rows, each also printed as soon as it is measured (the whole table comes at the end)."""

    def append(self, row: Any) -> None:
        super().append(row)
        print(" | ".join(row), f"| load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.3, help="the scripted model's latency L (seconds)")
    parser.add_argument("--quick", action="store_true", help="fewer turns and episodes")
    parser.add_argument("--price", action="store_true", help="only figure 8, the price table of the audit prompts")
    parser.add_argument("--baseline", metavar="REF", help="with --price: the prompts of git REF (e.g. main) beside these")
    args = parser.parse_args()
    TMP.mkdir(parents=True, exist_ok=True)
    if args.price:
        with ServerProcess(0.0) as fast:
            price_report(fast, args.baseline)
        return
    L = args.latency
    long, turns, many = (8, 4, 48) if args.quick else (20, 10, 192)
    load_before = os.getloadavg()
    rows = Rows()
    with ServerProcess(L) as slow, ServerProcess(0.0) as fast:
        # 1. one episode, fresh process: per-turn wall time / L (cold start included), and warm in-process
        start = ncp_run(fast.base_url, twins(1), "--max-turns", "1")["wall"]
        one = ncp_run(slow.base_url, twins(1), "--max-turns", str(long))["wall"]
        warm = warm_per_turn(slow.base_url, long)
        rows.append(("1. per-turn wall time, 1 episode, x L", f"{one / long / L:.2f}", "<= 1.1",
                     f"{one:.2f} s for {long} turns at L = {L * 1000:.0f} ms, fresh `ncp run`; its cold start (a "
                     f"1-turn run at L = 0) {start:.2f} s; warm, in-process: {warm / long / L:.2f} x L"))

        # 2. 24 episodes vs 1, fresh processes; then with every option at its default (concurrency 16)
        one = ncp_run(slow.base_url, twins(1), "--max-turns", str(turns))["wall"]
        w24 = ncp_run(slow.base_url, twins(24), "--max-turns", str(turns), "--concurrency", "24")["wall"]
        d24 = ncp_run(slow.base_url, twins(24), "--max-turns", str(turns))["wall"]
        rows.append(("2. 24 episodes vs 1 episode", f"{w24 / one:.2f}", "<= 1.2",
                     f"{w24:.2f} s vs {one:.2f} s, {turns} turns, --concurrency 24; every option default "
                     f"(--concurrency 16: two waves): {d24:.2f} s, {d24 / one:.2f}"))

        # 3. 192 episodes vs 1 (workers auto: 2 processes on 2 cores)
        slow.ask("reset")
        slow_cpu = slow.cpu()
        w192 = ncp_run(slow.base_url, twins(many), "--max-turns", str(turns), "--concurrency", str(many))
        served = slow.cpu() - slow_cpu
        calls192 = len(chat(slow))
        rows.append((f"3. {many} episodes vs 1 episode", f"{w192['wall'] / one:.2f}", "<= 3.0",
                     f"{w192['wall']:.1f} s vs {one:.2f} s, {turns} turns, --concurrency {many} (--workers auto: 2); "
                     f"CPU per call, ours / the scripted server's: {w192['cpu'] / calls192 * 1000:.2f} / "
                     f"{served / calls192 * 1000:.2f} ms"))

        # 4. CPU per call: the slope of two fresh runs at L = 0 (the cold start cancels out)
        fast.ask("reset")
        small = ncp_run(fast.base_url, twins(24), "--max-turns", "5", "--concurrency", "24")
        n_small = len(chat(fast))
        fast.ask("reset")
        big = ncp_run(fast.base_url, twins(24), "--max-turns", "15", "--concurrency", "24")
        n_big = len(chat(fast))
        slope = (big["cpu"] - small["cpu"]) / (n_big - n_small) * 1000
        rows.append(("4. CPU per model call, whole stack", f"{slope:.2f} ms", "<= 0.5 ms",
                     f"(CPU of a fresh run of 24 x 15 turns - 24 x 5 turns) / (calls): ({big['cpu']:.2f} - "
                     f"{small['cpu']:.2f}) s / ({n_big} - {n_small}); fixed cost of a run "
                     f"{small['cpu'] - slope / 1000 * n_small:.2f} s"))

        # 5, 6. 24 specs, the demo's scripted auditor, every option default: prefix share, tokens per turn
        fast.ask("reset")
        fast.ask("demo")
        out = TMP / "prefix"
        ncp_run(fast.base_url, first_specs(24), out=out)
        audits = [r for r in chat(fast) if r["role"] == "auditor"]
        share, chars = prefix_share([prompt_text(r["messages"]) for r in audits])
        rows.append(("5. auditor prompt characters in an already-sent prefix", f"{share:.1%}", "-",
                     f"{len(audits)} auditor prompts, {chars:,} characters, 24 specs (the first in specs/), "
                     f"demo script, defaults; each step's own task is {tasks_share(audits):.1%} of them"))
        fast.ask("reset")
        fast.ask("demo")
        fast.ask("long")
        ncp_run(fast.base_url, first_specs(24), out=TMP / "prefix-long")
        long_share, _ = prefix_share([prompt_text(r["messages"]) for r in chat(fast) if r["role"] == "auditor"])
        rows[-1] = (*rows[-1][:3], rows[-1][3] + f"; with narrations of about 1,550 characters: {long_share:.1%}")
        print("   ", rows[-1][3], flush=True)
        per_turn, audited = tokens_per_turn(out)
        steps = ("narrator", "conflict_check", "fact_update", "trajectory_update", "commitment_check",
                 "conflict_confirmation", "success_confirmation")
        detail = ", ".join(f"{s} {per_turn[s][0]:.0f} + {per_turn[s][1]:.0f}" for s in steps if s in per_turn)
        total = sum(p + c for p, c in per_turn.values())
        rows.append(("6. tokens per audited turn, by step", f"{total:.0f}", "-",
                     f"prompt + completion per audited turn ({audited} turns; the scripted server counts one "
                     f"token per word): {detail}"))

        # 7. --max-cost overshoot: priced model names, a usage block of about 4 bytes per prompt token
        from pytest_ncp.llm.prices import price_of

        price = price_of(PRICED)
        assert price is not None
        fast.ask("reset")
        fast.ask("usage")

        def spent() -> float:
            return sum(price.cost(r["bytes"] // 4 + 8, CAP_COMPLETION) for r in chat(fast))

        ncp_run(fast.base_url, twins(24), "--max-turns", str(turns), "--concurrency", "24",
                narrator_model=PRICED, auditor_model=PRICED)
        full = spent()
        parts = []
        worst = 0.0
        for fraction in (0.1, 0.5, 0.9):
            fast.ask("reset")
            fast.ask("usage")
            cap = full * fraction
            run = ncp_run(fast.base_url, twins(24), "--max-turns", str(turns), "--concurrency", "24",
                          "--max-cost", f"{cap:.6f}", out=TMP / f"cap-{fraction}", narrator_model=PRICED,
                          auditor_model=PRICED)
            cut = json.loads((TMP / f"cap-{fraction}" / "results.json").read_text())["metrics"]["budget"]
            used = spent()
            worst = max(worst, used / cap - 1)
            parts.append(f"cap ${cap:.4f} ({fraction:.0%}): spent ${used:.4f} ({used / cap:.1%}), {cut} cut, "
                         f"exit {run['code']}")
        rows.append(("7. --max-cost overshoot", f"{max(worst, 0):.1%}", "<= 5%",
                     f"24 episodes x {turns} turns, {PRICED} names, uncapped ${full:.4f}; " + "; ".join(parts)))

        # 8. the price of the audit prompts per narrator turn
        price = price_run(fast)
        rows.append(("8. audit prompt chars per narrator turn at a 50% cached rate", f"{price['chars_openai']:,.0f}",
                     "<= 7,441", f"raw {price['chars']:,.0f}; at a 10% cached rate {price['chars_anthropic']:,.0f}; "
                     f"tokens {price['tokens']:,.0f} raw, {price['tokens_openai']:,.0f} at 50%; "
                     f"{PRICE_SPECS} specs x {PRICE_TURNS} turns, demo script (--price for the table)"))

    header = ("figure", "measured", "target", "detail")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    print()
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores; Python "
          f"{sys.version.split()[0]}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
