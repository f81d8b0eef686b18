"""``ncp stability`` as people read it: one line per kind of recorded verdict, with its flip rate."""

from __future__ import annotations

from typing import Any, Mapping

ROW_LABELS = {"fact": "fact conflict", "commitment": "commitment conflict", "player_input": "player-input conflict",
              "conflicts": "all conflicts", "clean": "clean (no conflict)"}
ORDER = ("fact", "commitment", "player_input", "conflicts", "clean")


def stability_lines(summary: Mapping[str, Any], *, source: str, votes: int, model: str, temperature: float,
                    audit_votes: int) -> list[str]:
    rows = summary["rows"]
    head = ("recorded verdict", "turns", "re-audits", "flips", "flip rate (95% CI)")
    table = [head]
    for name in ORDER:
        r = rows[name]
        rate = "n/a" if r["rate"] is None else f"{r['rate']:.1%} ({r['ci'][0]:.1%}-{r['ci'][1]:.1%})"
        table.append((ROW_LABELS[name], str(r["turns"]), str(r["reaudits"]), str(r["flips"]), rate))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [f"stability of {source}: each turn audited {votes} more time(s) by {model} at temperature "
             f"{temperature:g} (audit votes {audit_votes})"]
    for row in table:
        lines.append("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    invalid = sum(rows[name]["invalid"] for name in ("conflicts", "clean"))
    if invalid:
        lines.append(f"  {invalid} re-audit(s) gave no valid verdict: left out of the rates")
    lines += ["a flip: a re-audit that does not confirm the recorded conflict type (for a clean turn: that confirms "
              "any conflict). The interval treats re-audits as independent; the re-audits of one turn are not, so "
              "with few turns it is too narrow (--json lists each turn)."]
    return lines


__all__ = ["stability_lines"]
