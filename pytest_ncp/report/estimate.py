"""The lines of ``--estimate`` (``engine.estimate.Estimate``), the same for ``ncp run`` and pytest."""

from __future__ import annotations

from typing import Any, Sequence

from ..engine.estimate import FLAGS_PER_TURN, LEDGER_GROWTH_TOKENS, Estimate
from ..llm.prices import price_of


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def _per_million(value: float) -> str:
    return f"${value * 1e6:,.3f}/M"


def estimate_lines(e: Estimate, *, max_tokens_flag: str = "--max-tokens", cap: float | None = None,
                   cap_flag: str = "--max-cost", front: str = "--estimate") -> list[str]:
    lines = [f"ncp estimate: {e.episodes} episode(s), at most {e.turns:,} turn(s) and {e.audited_turns:,} audited "
             f"turn(s)" + (f", and {e.canaries} auditor canar{'y' if e.canaries == 1 else 'ies'}" if e.canaries else "")
             + "; no model was called"]
    rows = [("role", "step", "calls", "(no retries)", "prompt tokens", "completion tokens", "cost")]
    for line in e.lines:
        cost = line.cost_usd
        rows.append((line.role, line.step or "-", f"{line.calls:,}", f"{line.plain_calls:,}", f"{line.prompt_tokens:,}",
                     f"{line.completion_tokens:,}", "unpriced" if cost is None else _usd(cost)))
    rows.append(("total", "", f"{e.calls:,}", f"{e.plain_calls:,}", f"{e.prompt_tokens:,}", f"{e.completion_tokens:,}",
                 _usd(e.cost_usd) + (" + unpriced" if e.unpriced else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  " + "  ".join(cells).rstrip())
    lines += [
        f"upper bound: every retry taken, every completion at {max_tokens_flag}, prompt tokens counted as UTF-8 "
        "bytes (no tokenizer makes more; English prompts run about 4 bytes per token), prompts from each spec's "
        f"rendered turn 1; allowances: the ledger grows {LEDGER_GROWTH_TOKENS} tokens per audited turn, "
        f"{FLAGS_PER_TURN} flagged conflict per audited turn (each further flag: one more confirmation per "
        "--audit-votes sample); "
        "\"no retries\": the calls of a run where every answer is valid and nothing is flagged",
    ]
    priced = [m for m in e.models if m not in e.unpriced]
    if priced:
        parts = []
        for model in priced:
            p = price_of(model)
            assert p is not None
            parts.append(f"{model} {_per_million(p.input)} in ({_per_million(p.cached_input)} cached), "
                         f"{_per_million(p.output)} out")
        lines.append("list prices (litellm's cost map): " + "; ".join(parts))
    if e.unpriced:
        lines.append(f"unpriced (the cost map has no price; their calls are not in the cost): {', '.join(e.unpriced)}"
                     + (f"; {cap_flag} refuses a run with an unpriced model" if cap is None else ""))
    if cap is not None:
        verdict = "within" if e.cost_usd <= cap else "over"
        lines.append(f"{cap_flag} {_usd(cap)}: the bound is {verdict} the cap; the cap stops the run's calls "
                     "before they would pass it")
    lines += list(e.notes)
    lines.append(f"nothing was run ({front})")
    return lines


def history_lines(db: str, config: dict[str, Any], specs: Sequence[Any], episodes: int,
                  *, flag: str = "--history") -> list[str]:
    """``--estimate`` with a history: the expected tokens and cost, from what the last comparable run (same spec
    set, horizon, auditor, player and prompts; the same narrator when there is one) measured per episode."""
    from ..analysis.history import HistoryError, measured_usage, open_history
    from ..engine.provenance import spec_set_fingerprint

    try:
        conn = open_history(db, create=False)
    except HistoryError as exc:
        return [f"expected from history: not available ({exc})"]
    try:
        spec_set = spec_set_fingerprint((s.id, s.fingerprint) for s in specs)
        usage = measured_usage(conn, config, spec_set, narrator=config.get("narrator"))
    finally:
        conn.close()
    if usage is None:
        return [f"expected from history: no comparable run in the history {db} (same spec set, max turns, auditor, "
                "player and prompts); the bound above is all there is"]
    r = usage.run
    tokens, cost = round(usage.tokens_per_episode * episodes), usage.cost_per_episode * episodes
    return [f"expected from history: {tokens:,} tokens, {_usd(cost)} for {episodes} episode(s), at the "
            f"{usage.tokens_per_episode:,.0f} tokens and {_usd(usage.cost_per_episode)} per episode run "
            f"{r.run_id[:10]} (commit {r.short}, {r.when[:10]}, {r.episodes} episode(s)) measured ({flag} {db})"]
