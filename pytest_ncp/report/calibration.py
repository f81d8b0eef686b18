"""The calibration table (``ncp calibrate``, and the HTML report's auditor section) from calibration.json."""

from __future__ import annotations

from typing import Any, Mapping


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ci(ci: Any) -> str:
    return "" if not ci else f"[{ci[0]:.2f}-{ci[1]:.2f}]"


def calibration_rows(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """One dict of printable cells per row (shared by the terminal table and the HTML section)."""
    out = []
    for name, r in data["summary"]["rows"].items():
        out.append({
            "row": name, "step": r["step"], "n": str(r["cases"]),
            "tp": str(r["tp"]), "fp": str(r["fp"]), "fn": str(r["fn"]),
            "tn": str(r["tn"]) if r.get("binary", True) else "-",
            "invalid": str(r["invalid_pos"] + r["invalid_neg"]),
            "precision": _pct(r["precision"]), "precision_ci": _ci(r["precision_ci"]),
            "recall": _pct(r["recall"]), "recall_ci": _ci(r["recall_ci"]),
            "f1": _pct(r["f1"]), "f1_ci": _ci(r["f1_ci"]),
        })
    return out


def calibration_head(data: Mapping[str, Any]) -> list[str]:
    s, b = data["summary"], data["balance"]
    inv = s["invalid"]
    by_step = ", ".join(f"{k} {v}" for k, v in sorted(inv["by_step"].items())) or "none"
    ids = s["ids_agree"]
    return [
        f"auditor {data['model']} ({data['prompt_version']}) on {b['cases']} gold case(s) over {b['specs']} spec(s): "
        f"{b['violations']} violation(s), {b['clean']} clean",
        f"invalid answers: {inv['cases']} case(s) ({_pct(inv['rate'])}; counted as misses; by step: {by_step})",
        f"conflict ids agree with gold in {ids['agree']}/{ids['of']} correctly typed conflicts; "
        f"tokens {s['tokens']}, calls {s['calls']}, cost ${s['cost_usd']:.4f}",
    ]


def calibration_table(data: Mapping[str, Any]) -> str:
    cols = [("row", "row", "<"), ("n", "n", ">"), ("tp", "TP", ">"), ("fp", "FP", ">"), ("fn", "FN", ">"),
            ("tn", "TN", ">"), ("invalid", "inv", ">"), ("precision", "precision", ">"), ("precision_ci", "95% CI", "<"),
            ("recall", "recall", ">"), ("recall_ci", "95% CI", "<"), ("f1", "F1", ">"), ("f1_ci", "95% CI", "<")]
    rows = calibration_rows(data)
    widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h, _ in cols}

    def line(cells: Mapping[str, str]) -> str:
        return "  ".join(f"{cells[k]:{a}{widths[k]}}" for k, _, a in cols).rstrip()

    header = line({k: h for k, h, _ in cols})
    return "\n".join([*calibration_head(data), "", header, "-" * len(header), *(line(r) for r in rows),
                      "", "precision/recall intervals: Wilson 95%; F1: Bayesian bootstrap over cases (2000 draws); "
                      "invalid answers count as misses (inv)."])
