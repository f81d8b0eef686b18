"""Agreement of the blind read of the benchmark v3 gold cases (docs/auditor.md, "Blind read").

    python calibration/blind-read/agreement.py [SET]     # SET: a gold set directory (default: calibration/legacy)

An independent annotator labelled each v3 case from the auditor's view, with no label, tag or why
shown (``*-key.json`` maps the blind ids back to case ids). Printed per family: how often both readers
agree that there is a conflict, and Cohen's kappa over the per-type decisions (fact? commitment?
player input? for every case). Run it on the set as it was before the disagreements were resolved
(``git archive 8a8012c calibration | tar -x -C /tmp``, where the v3 cases were still the default set) for the
figures docs/auditor.md gives. The v3 cases now live in calibration/legacy/.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import yaml

from pytest_ncp.calibration.goldset import FAMILIES, load_gold_set, parse_conflict

HERE = Path(__file__).parent
TYPES = ("fact", "commitment", "player_input")


def kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if pe >= 1 else (po - pe) / (1 - pe)


def main() -> None:
    gold = {c.id: c for c in load_gold_set(sys.argv[1] if len(sys.argv) > 1 else "calibration/legacy").cases}
    yes: dict[str, list[tuple[bool, bool]]] = collections.defaultdict(list)
    typed: dict[str, list[tuple[bool, bool]]] = collections.defaultdict(list)
    for key_file in sorted(HERE.glob("*-key.json")):
        labels = {e["blind"]: e for e in yaml.safe_load(key_file.with_name(key_file.name.replace("-key.json", "-labels.yaml")).read_text())}
        for entry in json.loads(key_file.read_text()):
            case = gold[entry["case"]]
            theirs = {parse_conflict(x).type for x in (labels[entry["blind"]].get("conflict") or [])}
            for family in [t for t in case.tags if t in FAMILIES] + ["all"]:
                yes[family].append((bool(case.conflicts), bool(theirs)))
                typed[family].extend((t in case.conflict_types, t in theirs) for t in TYPES)
    print("| family | cases | both agree on conflict yes/no | Cohen's kappa, per-type decisions |")
    print("|---|---|---|---|")
    for family in [*FAMILIES, "all"]:
        pairs = yes[family]
        k = kappa(typed[family])
        shown = f"{k:.2f}" if k is not None else "n/a (both readers: no conflict in any case)"
        print(f"| {family} | {len(pairs)} | {sum(a == b for a, b in pairs)}/{len(pairs)} | {shown} |")


if __name__ == "__main__":
    main()
