"""Precision and recall of the lint rules `input-presupposes-unshown` and `delta-is-player-choice`
against the source re-review of the 100 specs.

The re-review fixed both classes by hand and recorded every finding in each spec's `review.findings`
(entries `inputs-assume-no-unshown-event: input N ...` and `delta-not-player-choice: node ID key delta ...`).
This script lints the specs as they were before those fixes (commit 8bf7b3e, read with `git archive`),
looks up every finding in `judgements.yaml` (a hand judgement: is it a true instance of the class?),
and prints per rule:

- findings, and how many were judged true: precision = judged true / all findings;
- how many the reviewers also recorded, and recall = reviewer findings the rule catches / all of them
  (an input finding is one input number, a delta finding one node);
- the findings on the current specs (lint must be clean: 0).

    python benchmarks/lint/precision.py             # the figures
    python benchmarks/lint/precision.py --list      # also every finding with its judgement
    python benchmarks/lint/precision.py --missed    # also the reviewer findings the rules do not catch

It exits 1 when a finding has no judgement (or a judgement names no finding), so the figures cannot go
stale silently: judge the new findings in judgements.yaml and run it again.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pytest_ncp.core.spec import load_specs  # noqa: E402
from pytest_ncp.lint import lint_spec  # noqa: E402

BEFORE = "8bf7b3e"  # the specs before the hand fixes of the two classes
RULES = {  # lint rule -> the reviewers' class prefix in review.findings
    "input-presupposes-unshown": "inputs-assume-no-unshown-event:",
    "delta-is-player-choice": "delta-not-player-choice:",
}
JUDGEMENTS = Path(__file__).with_name("judgements.yaml")


def before_specs(tmp: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "specs"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.10.12
        tar.extractall(tmp, **safe)  # type: ignore[arg-type]
    return tmp / "specs"


def key_of(rule: str, message: str) -> str:
    """The finding's place: 'input N' (1-based) or the node id."""
    if rule == "input-presupposes-unshown":
        return "input " + re.match(r"scripted input (\d+)", message).group(1)
    return re.search(r"node \d+ '([^']+)'", message).group(1)


def findings_of(specs_dir: Path) -> dict[str, dict[tuple[str, str], str]]:
    specs, errors = load_specs([specs_dir])
    assert not errors, errors
    out: dict[str, dict[tuple[str, str], str]] = {rule: {} for rule in RULES}
    for spec in specs:
        for f in lint_spec(spec):
            if f.rule in RULES:
                out[f.rule][(spec.id, key_of(f.rule, f.message))] = f.message
    return out


def reviewer_findings() -> dict[str, set[tuple[str, str]]]:
    """Every (spec, input N) and (spec, node id) the re-review recorded, from the current specs."""
    out: dict[str, set[tuple[str, str]]] = {rule: set() for rule in RULES}
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in (data.get("review") or {}).get("findings") or []:
            if entry.startswith(RULES["input-presupposes-unshown"]):
                body = entry.split(":", 1)[1].strip()
                m = re.match(r"inputs? (\d+)(?:\s*[-–]\s*(\d+))?(?: \(was (\d+)\))?", body)
                first, last = int(m.group(1)), int(m.group(2) or m.group(1))
                if m.group(3):  # "input 11 (was 10)": renumbered by the fix; 10 is its place in the old spec
                    first = last = int(m.group(3))
                out["input-presupposes-unshown"] |= {(data["id"], f"input {n}") for n in range(first, last + 1)}
            elif entry.startswith(RULES["delta-is-player-choice"]):
                body = entry.split(":", 1)[1].strip()
                node = re.match(r"(?:node )?([\w-]+)(?:'s)? key delta", body).group(1)
                out["delta-is-player-choice"].add((data["id"], node))
    return out


def order(key: tuple[str, str]) -> tuple[str, int, str]:
    """Spec, then input number (input 7 before input 15), then node id."""
    spec, at = key
    return (spec, int(at.split()[1]) if at.startswith("input ") else 0, at)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print every finding with its judgement")
    ap.add_argument("--missed", action="store_true", help="print the reviewer findings the rules miss")
    args = ap.parse_args()

    judged = yaml.safe_load(JUDGEMENTS.read_text(encoding="utf-8")) if JUDGEMENTS.exists() else {}
    judged = judged or {}
    with tempfile.TemporaryDirectory() as tmp:
        before = findings_of(before_specs(Path(tmp)))
    current = findings_of(ROOT / "specs")
    reviewers = reviewer_findings()
    ok = True
    print(f"Specs before the hand fixes ({BEFORE}); judgements in {JUDGEMENTS.relative_to(ROOT)}\n")
    print("| rule | findings | judged true | precision | also recorded by the reviewers | reviewer findings "
          "caught | recall | findings on the current specs |")
    print("|---|---|---|---|---|---|---|---|")
    for rule in RULES:
        verdicts = {(e["spec"], e["at"]): e for e in judged.get(rule) or []}
        found = before[rule]
        missing = sorted(set(found) - set(verdicts))
        stale = sorted(set(verdicts) - set(found))
        for spec, at in sorted(missing, key=order):
            print(f"UNJUDGED {rule}: {spec} {at}: {found[(spec, at)]}", file=sys.stderr)
        for spec, at in stale:
            print(f"STALE judgement {rule}: {spec} {at} (the rule no longer finds it)", file=sys.stderr)
        ok = ok and not missing and not stale
        true = [k for k in found if k in verdicts and verdicts[k]["verdict"]]
        recorded = [k for k in found if k in reviewers[rule]]
        caught = reviewers[rule] & set(found)
        n, r = len(found), len(reviewers[rule])
        print(f"| `{rule}` | {n} | {len(true)} | {len(true) / n:.0%} | {len(recorded)} | {len(caught)} of {r} | "
              f"{len(caught) / r:.0%} | {len(current[rule])} |" if n and r else f"| `{rule}` | {n} | | | | | | |")
        if args.list:
            for k in sorted(found, key=order):
                v = verdicts.get(k)
                mark = "?" if v is None else ("TRUE " if v["verdict"] else "FALSE")
                rec = "reviewers" if k in reviewers[rule] else "-"
                print(f"  {mark} {rec:9} {k[0]} {k[1]}: {v['why'] if v else found[k]}")
        if args.missed:
            for k in sorted(reviewers[rule] - set(found), key=order):
                print(f"  missed {k[0]} {k[1]}")
        for k, message in sorted(current[rule].items(), key=lambda item: order(item[0])):
            print(f"  current spec {k[0]} {k[1]}: {message}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
