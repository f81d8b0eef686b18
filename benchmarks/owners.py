"""What screening and votes cost, and the blame table of an adversarial simulated player.

    python benchmarks/owners.py                      # 20 specs, 10 turns, the demo's scripted models
    python benchmarks/owners.py --specs 100 --turns 20

Figures, not a test. Every model call goes to the bundled scripted server with the offline demo's script
(``pytest_ncp.testing.demo``): its narrator acknowledges every action, its adversarial player dictates a
world event on about one turn in three (and plays fair again, once told why, two times in three), its
auditor flags a conflict on a few turns and often on a turn whose narration went along with a dictated
event. Runs are sequential (``--no-pipeline``) so that no call is played ahead and discarded: every
request counted belongs to a turn that was kept.

Three runs over the same specs:

  scripted     the spec's scripted inputs (no screening), one vote
  adversarial  the simulated adversarial player (every input screened), one vote
  votes=3      the adversarial player, --audit-votes 3

Printed: per run, the turns played and the requests per turn by step (player, narrator, input_screen,
conflict_check, conflict_confirmation, the other audit steps); the extra calls per turn of screening
(the input_screen calls, and the player calls beyond one per turn) and of votes (confirmation calls
beyond the one-vote run's); and the adversarial run's blame table.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ncp.analysis.metrics import compute_metrics  # noqa: E402
from pytest_ncp.core.config import DEMO_MODELS, RunConfig  # noqa: E402
from pytest_ncp.core.spec import load_specs  # noqa: E402
from pytest_ncp.engine.runner import Runner  # noqa: E402
from pytest_ncp.report.blame import blame_lines  # noqa: E402
from pytest_ncp.testing import ScriptedModelServer  # noqa: E402
from pytest_ncp.testing.demo import install_demo_script  # noqa: E402


def run(specs, out: Path, *, player: str, votes: int, turns: int) -> tuple[Counter, int, int, int, dict]:
    with ScriptedModelServer() as server:
        install_demo_script(server)
        config = RunConfig(narrator="pytest_ncp.narrators:LLMNarrator", narrator_model=DEMO_MODELS["narrator"],
                           player=player, player_model=DEMO_MODELS["player"] if player != "scripted" else None,
                           auditor_model=DEMO_MODELS["auditor"], api_base=server.base_url, max_turns=turns,
                           audit_votes=votes, pipeline=False, demo=True)
        results = asyncio.run(Runner(config, out_dir=out).run(specs))
        steps = Counter(r.step or r.role or "?" for r in server.requests)
        chars = Counter()
        for r in server.requests:
            chars[r.step or r.role or "?"] += len(r.text)
        steps.update({f"chars:{k}": v for k, v in chars.items()})
    records = [r.record for r in results]
    played = sum(len(r.transcript) for r in results)  # audited turns, the opening (turn 0) included
    asked = sum(1 for r in results for t in r.transcript if t.turn >= 1)  # turns with a player input
    flags = sum(r.flag_counts()["raised"] for r in results)
    return steps, played, asked, flags, compute_metrics(records, survival_turn=min(turns, 20))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=20, help="how many of specs/ (sorted by file name)")
    ap.add_argument("--turns", type=int, default=10, help="turn limit")
    ap.add_argument("--out", default="/tmp/ncp-owners-bench", help="where the three runs are written")
    args = ap.parse_args()
    specs, _ = load_specs([str(p) for p in sorted((ROOT / "specs").glob("*.yaml"))[:args.specs]])
    runs = {}
    for name, player, votes in (("scripted", "scripted", 1), ("adversarial", "adversarial", 1),
                                ("votes=3", "adversarial", 3)):
        runs[name] = run(specs, Path(args.out) / name.replace("=", ""), player=player, votes=votes, turns=args.turns)
    print(f"{len(specs)} specs, max turns {args.turns}, sequential; requests per audited turn:")
    order = ("player", "narrator", "input_screen", "conflict_check", "conflict_confirmation", "fact_update",
             "trajectory_update", "commitment_check", "success_confirmation")
    print(f"  {'run':<12} {'turns':>6} " + " ".join(f"{k[:14]:>14}" for k in order) + f" {'all':>8}")
    for name, (steps, played, *_) in runs.items():
        print(f"  {name:<12} {played:>6} " + " ".join(f"{steps[k] / played:>14.3f}" for k in order)
              + f" {sum(steps[k] for k in order) / played:>8.3f}")
    steps, played, asked, flags, _ = runs["adversarial"]
    screened = steps["input_screen"] / played
    regenerated = (steps["player"] - asked) / played
    print(f"screening: {screened:.3f} input_screen calls and {regenerated:.3f} extra player calls (regenerations) "
          f"per audited turn: {screened + regenerated:.3f} extra calls per turn")
    audit_chars = sum(v for k, v in steps.items() if k.startswith("chars:") and k not in ("chars:player",
                                                                                           "chars:narrator"))
    print(f"  prompt characters: input_screen {steps['chars:input_screen'] / played:,.0f} per audited turn, "
          f"{steps['chars:input_screen'] / audit_chars:.1%} of all auditor prompt characters")
    v_steps, v_played, _, v_flags, _ = runs["votes=3"]
    extra = v_steps["conflict_confirmation"] / v_played - steps["conflict_confirmation"] / played
    print(f"votes (K = 3): {v_steps['conflict_confirmation'] / v_played:.3f} confirmation calls per turn vs "
          f"{steps['conflict_confirmation'] / played:.3f} with one vote: {extra:.3f} extra calls per turn; per "
          f"flagged conflict {v_steps['conflict_confirmation'] / max(v_flags, 1):.2f} vs "
          f"{steps['conflict_confirmation'] / max(flags, 1):.2f}")
    for name in ("adversarial", "votes=3"):
        print(f"\n{name} ({runs[name][4]['episodes']} episodes):")
        print("\n".join(blame_lines(runs[name][4]["blame"])))


if __name__ == "__main__":
    main()
