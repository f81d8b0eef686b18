"""Model calls of a real ``ncp run --sequential`` against the same run with the fixed gate.

    python benchmarks/sequential_run.py                  # the 100 specs of specs/, 20 turns, gate 0.4@20
    python benchmarks/sequential_run.py --repeats 3 --concurrency 8

Figures, not a test. Both runs are ``ncp run`` as a user types it (``pytest_ncp.cli.main``): the built-in LLM
narrator, the scripted player, the real four-step auditor, defaults for everything not named here (concurrency
16, seed 0, one process). Every model call goes to the bundled scripted server on 127.0.0.1, whose requests are
counted: they are the run's model calls. The narrator is clearly good: the auditor confirms a conflict at turn 5
in about one story in ten (chosen by a stable hash of the story's title), so survival@20 is about 90% against
the gate's 40%. Printed: each run's verdict, episodes run and model calls, and the sequential run's share of the
fixed run's calls (target: <= 50%).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.cli import main as ncp  # noqa: E402
from pytest_ncp.testing import ScriptedModelServer  # noqa: E402
from pytest_ncp.testing.server import NARRATION_DEFAULT  # noqa: E402

QUOTE = " ".join(NARRATION_DEFAULT.split()[:8])  # a verbatim span of the scripted narration
STORY = re.compile(r"STORY: (.+?)\.")


def failing(title: str, share: int) -> bool:
    """About one story in ``share`` conflicts (a stable hash: the same stories in both runs)."""
    return int(hashlib.sha256(title.encode()).hexdigest()[:8], 16) % share == 0


def conflicts(share: int):
    def reply(request):
        found = STORY.search(request.text)
        if found and "TURN 5." in request.text and failing(found.group(1), share):
            return {"conflicts": [{"type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": QUOTE,
                                   "explanation": "The narration contradicts an established fact."}]}
        return {"conflicts": []}
    return reply


def run(server: ScriptedModelServer, out: Path, args: argparse.Namespace, *extra: str) -> dict:
    before, started = len(server.requests), time.perf_counter()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = ncp(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", "openai/narrator",
                    "--auditor-model", "openai/auditor", "--api-base", server.base_url, "--specs", str(args.specs),
                    "--max-turns", str(args.turns), "--repeats", str(args.repeats), "--min-survival", args.gate,
                    "--out", str(out), *(["--concurrency", str(args.concurrency)] if args.concurrency else []),
                    *extra])
    data = json.loads((out / "results.json").read_text())
    lines = printed.getvalue().splitlines()
    verdict = [line for line in lines if line.startswith("ncp survival gate")]
    return {"lines": [line for line in lines if line.startswith(("ncp sequential", "ncp survival gate"))],"code": code, "calls": len(server.requests) - before, "episodes": len(data["episodes"]),
            "planned": len(data["expected"]) + len((data.get("sequential") or {}).get("unstarted") or []),
            "seconds": time.perf_counter() - started, "verdict": verdict[0] if verdict else "(no gate line)",
            "survival": data["metrics"]["survival_point"]["text"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--specs", default=str(ROOT / "specs"))
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--gate", default="0.4@20")
    p.add_argument("--concurrency", type=int, default=None, help="default: ncp run's (16)")
    p.add_argument("--failing-share", type=int, default=10, help="one story in N conflicts at turn 5 (default 10)")
    args = p.parse_args()
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.add(step="conflict_check", reply=conflicts(args.failing_share))
        fixed = run(server, Path(tmp) / "fixed", args)
        sequential = run(server, Path(tmp) / "sequential", args, "--sequential")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"ncp run over {args.specs}: {fixed['planned']} episodes, {args.turns} turns, gate {args.gate}, "
          f"concurrency {args.concurrency or 16}; load average {load:.1f}")
    print("| run | verdict | survival | episodes run | model calls | wall s |")
    print("|---|---|---|---|---|---|")
    for name, r in (("fixed", fixed), ("--sequential", sequential)):
        print(f"| {name} | exit {r['code']}: {r['verdict']} | {r['survival']} | {r['episodes']} of {r['planned']} | "
              f"{r['calls']} | {r['seconds']:.1f} |")
    print("\nthe sequential run said:")
    for line in sequential["lines"]:
        print(f"    {line}")
    print(f"\nmodel calls of the sequential run: {sequential['calls'] / fixed['calls']:.1%} of the fixed run's "
          f"(target <= 50%); same exit code: {sequential['code'] == fixed['code']}")


if __name__ == "__main__":
    main()
