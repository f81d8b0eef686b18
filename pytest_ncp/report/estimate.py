"""The lines of ``--estimate`` (``engine.estimate.Estimate``), the same for ``ncp run`` and pytest."""

from __future__ import annotations

from ..engine.estimate import (
    BYTES_PER_TOKEN, FLAGS_PER_TURN, LEDGER_GROWTH_TOKENS, TYPICAL_COMPLETION, TYPICAL_TURN_HAZARD, Estimate,
)
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
        f"upper bound: every episode plays its whole script (or --max-turns), every retry taken, every "
        f"completion at {max_tokens_flag}, prompt tokens counted as UTF-8 "
        "bytes (no tokenizer makes more; English prompts run about 4 bytes per token), prompts from each spec's "
        f"rendered turn 1; allowances: the ledger grows {LEDGER_GROWTH_TOKENS} tokens per audited turn, "
        f"{FLAGS_PER_TURN} flagged conflict per audited turn (each further flag: one more confirmation per "
        "--audit-votes sample); "
        "\"no retries\": the calls of a run where every answer is valid and nothing is flagged",
    ]
    x = e.expected
    if x is not None:
        lines.append(
            f"expected: about {x.calls:,} calls, {x.prompt_tokens:,} prompt + {x.completion_tokens:,} completion tokens"
            f" ({x.prompt_tokens + x.completion_tokens:,} in all), {_usd(x.cost_usd)}"
            + (" + unpriced" if x.unpriced else "") + f", over about {x.turns:,} turn(s): what to plan with. It "
            f"assumes {TYPICAL_TURN_HAZARD:.0%} of the episodes still playing end at each turn (a conflict or a "
            "success; the bundled demo's rate), answers of typical length (narrator "
            f"{TYPICAL_COMPLETION['narrator']}, auditor {TYPICAL_COMPLETION['auditor']}, player "
            f"{TYPICAL_COMPLETION['player']} tokens), {BYTES_PER_TOKEN} bytes per prompt token, no retries and "
            "nothing flagged; a narrator that survives longer costs up to the bound")
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
        share = ""
        if x is not None and x.cost_usd > 0 and x.cost_usd > cap:
            share = (f"; about {min(1.0, cap / x.cost_usd):.0%} of the episodes fit the cap at the expected cost: an "
                     "episode starts only while the cap can pay for it to its end, the others are not judged (budget)")
        lines.append(f"{cap_flag} {_usd(cap)}: the bound is {verdict} the cap; the cap stops the run's calls "
                     f"before they would pass it{share}")
    lines += list(e.notes)
    lines.append(f"nothing was run ({front})")
    return lines
