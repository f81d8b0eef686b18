"""Failure messages, transcripts and the paper's table as plain text.

A failure's first line is a headline a person can act on: spec, turn, what broke, where in the spec.
Everything here quotes model output, so every text is passed through ``terminal.printable``: an
escape sequence in a narration is shown, never executed by the reader's terminal.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.safe_text import one_line, printable

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord
    from ..engine.episode import EpisodeResult

_KIND = {"fact": "fact conflict", "commitment": "commitment conflict", "player_input": "player-input conflict"}


def _where(result: EpisodeResult) -> str:
    """``path:line`` of the spec item behind the failure (initial fact, commitment or scripted input)."""
    spec, failure = result.spec, result.failure
    if failure is None:
        return spec.location()
    if failure.type == "fact":
        for i, f in enumerate(spec.initial_facts):
            if f.id in failure.fact_ids:
                return spec.location("initial_facts", i)
    if failure.type == "commitment":
        for i, c in enumerate(spec.commitments):
            if c.id in failure.commitment_ids:
                return spec.location("commitments", i)
        if failure.commitment_ids:  # a default world rule (W1, ...)
            return spec.commitment_location(failure.commitment_ids[0])
    if failure.type == "player_input" and 1 <= failure.turn <= len(spec.scripted_inputs):
        return spec.location("scripted_inputs", failure.turn - 1)
    return spec.location()


def headline(result: EpisodeResult) -> str:
    name = _name(result)
    if result.failure:
        f = result.failure
        ids = ", ".join(f.fact_ids + f.commitment_ids)
        conflict = f"{_KIND.get(f.type, f.type)}{f' ({ids})' if ids else ''}"
        if result.termination.value == "player_fault":
            return printable(f"{name}: player fault at turn {f.turn}: an unfair simulated input provoked a {conflict} "
                             f"(not the narrator's failure) {_where(result)}")
        if result.termination.value == "contested":
            return printable(f"{name}: split verdict at turn {f.turn}: a {conflict} stood on {f.agreement_text} "
                             f"confirmation votes (the auditor's doubt, not the narrator's failure) {_where(result)}")
        return printable(f"{name}: {_KIND.get(f.type, f.type)} at turn {f.turn}{f' ({ids})' if ids else ''} "
                         f"{_where(result)}")
    if result.error:
        return (f"{name}: {result.error.kind} error after turn {result.turns}: "
                f"{one_line(result.error.message, 10_000)}")
    return f"{name}: {result.termination.value} after {result.turns} turn(s)"


def _name(result: EpisodeResult) -> str:
    return result.spec.id if result.repeat == 0 else f"{result.spec.id} (repeat {result.repeat})"


def _block(label: str, text: str | None, width: int = 100) -> str:
    body = text if text else "(none)"
    lines = []
    for para in body.splitlines() or [""]:
        lines.extend(textwrap.wrap(para, width - 4) or [""])
    return f"{label}:\n" + "\n".join("    " + line for line in lines)


def excerpt(result: EpisodeResult, turn: int, before: int = 1) -> str:
    """The player input and narration of ``turn`` and the ``before`` turns preceding it."""
    parts = []
    for t in result.transcript:
        if turn - before <= t.turn <= turn:
            if t.player_input is not None:
                parts.append(_block(f"turn {t.turn} player", t.player_input))
            parts.append(_block(f"turn {t.turn} narrator", t.response))
    return printable("\n".join(parts))


def failure_text(result: EpisodeResult) -> str:
    """Headline, the auditor's finding with quotes, a transcript excerpt and the ledger diff."""
    f = result.failure
    lines = [headline(result)]
    if f is None:
        if result.error:
            lines += ["", result.error.message]
            if result.transcript:
                lines += ["", excerpt(result, result.transcript[-1].turn)]
            if result.trace:
                lines += ["", f"trace: {result.trace}" + (" (the traceback is in it)" if result.error.traceback else "")]
        return printable("\n".join(lines))
    lines += [
        "",
        _block("auditor finding", f.explanation),
        _block("quoted from the narration", f'"{f.quote}"'),
        _block("confirmation" + (f" ({f.agreement_text} votes confirmed it)" if f.agreement else ""), f.confirmation),
    ]
    if result.player_fault:
        fault = result.player_fault
        lines.append(_block(f"unfair player input (after {fault['attempts']} attempt(s))", "\n".join(
            [fault["input"], *(f"{p['rule']}: \"{p['quote']}\" {p['explanation']}" for p in fault["problems"])])))
    facts = [result.ledger[i] for i in f.fact_ids if i in result.ledger]
    if facts:
        lines.append(_block("contradicted fact(s)", "\n".join(f"{x.id}: {x.text}" for x in facts)))
    for cid in f.commitment_ids:
        try:
            c = result.spec.commitment(cid)
        except KeyError:
            continue
        lines.append(_block(f"commitment {cid} ({c.kind})", c.text))
    lines += ["", excerpt(result, f.turn), "", result.ledger.diff(0, f.turn)]
    if result.trace:
        lines += ["", f"trace: {result.trace}"]
    return printable("\n".join(lines))


def commitment_text(result: EpisodeResult, commitment_id: str) -> str:
    c = result.spec.commitment(commitment_id)
    state = result.commitment_states.get(commitment_id, "PENDING")
    where = result.spec.commitment_location(commitment_id)
    if state == "VIOLATED":
        head = f"{_name(result)}:{commitment_id}: {c.kind} violated at turn {result.failure.turn if result.failure else '?'} {where}"
    elif c.kind == "invariant":
        head = (f"{_name(result)}:{commitment_id}: invariant held: never violated "
                f"({result.termination.value} after {result.turns} turn(s)) {where}")
    else:
        head = (f"{_name(result)}:{commitment_id}: {c.kind} not satisfied by the end of the episode "
                f"({result.termination.value} after {result.turns} turn(s), {result.node_index}/"
                f"{len(result.spec.trajectory)} plot nodes reached) {where}")
    lines = [head, "", _block(f"commitment {commitment_id}", c.text)]
    if state == "VIOLATED" and result.failure:
        lines += [_block("auditor finding", result.failure.explanation),
                  _block("quoted from the narration", f'"{result.failure.quote}"'),
                  "", excerpt(result, result.failure.turn)]
    lines += ["", result.ledger.diff(0, result.failure.turn if result.failure else result.turns)]
    return printable("\n".join(lines))


def transcript_text(result: EpisodeResult) -> str:
    """The whole episode, turn by turn, with the verdicts that mattered."""
    out = [f"{result.spec.id} ({result.spec.title}), player: {result.spec.player.name}"]
    reached = {n["reached_turn"]: n for n in result.nodes}
    for t, audit in zip(result.transcript, result.audits):
        out.append("")
        if t.player_input is not None:
            out.append(_block(f"turn {t.turn} player", t.player_input))
        out.append(_block(f"turn {t.turn} narrator", t.response))
        notes = [f"flagged {c.type} ({', '.join(c.fact_ids + c.commitment_ids) or '-'}): "
                 f"{'CONFIRMED' if v.confirmed else 'rejected'}"
                 + (f" ({audit.votes[i]['yes']}/{audit.votes[i]['of']} votes)" if i < len(audit.votes) else "")
                 + f": {c.explanation}"
                 for i, (c, v) in enumerate(zip(audit.flagged, audit.confirmations))]
        node = reached.get(t.turn)
        if node is not None:
            since = f" (trigger at turn {node['trigger_turn']})" if node["trigger_turn"] != t.turn else ""
            notes.append(f"plot node {node['id']} completed{since}")
        if audit.commitments and audit.commitments.satisfied:
            notes.append("satisfied: " + ", ".join(s.commitment_id for s in audit.commitments.satisfied))
        for change in result.ledger.changes_at(t.turn):
            sign = "+" if change.op == "add" else "-"
            notes.append(f"ledger {sign} {change.fact_id}: {change.text}")
        if notes:
            out.append(_block("audit", "\n".join(notes)))
    out += ["", f"termination: {result.termination.value} after {result.turns} turn(s)"]
    return printable("\n".join(out))


# --- the paper's table ----------------------------------------------------------------------------


def cached_text(m: Mapping[str, Any]) -> str:
    """``12.5% (1,024 of 8,192)``: prompt tokens a provider's prompt cache served; n/a without prompt tokens."""
    share = m.get("cached_share")
    if share is None:
        return "n/a"
    return f"{share:.1%} ({m.get('cached_tokens', 0):,} of {m.get('prompt_tokens', 0):,})"


def flags_text(flags: Mapping[str, int] | None) -> str | None:
    """``7 raised, 3 confirmed; 2 never verified (1 confirmed), 1 withdrawn on a retry (0 confirmed)``; None
    when the run raised none (or the file predates the count)."""
    if not flags or not flags.get("raised"):
        return None
    text = f"{flags['raised']} raised, {flags.get('confirmed', 0)} confirmed"
    doubtful = [f"{flags[k]} {label} ({flags.get(f'{k}_confirmed', 0)} confirmed)"
                for k, label in (("unverified", "never verified"), ("withdrawn", "withdrawn on a retry"),
                                 ("split", "split by the votes")) if flags.get(k)]
    return text + ("; " + ", ".join(doubtful) if doubtful else "")


def metrics_table(m: Mapping[str, Any], title: str = "ncp") -> str:
    """One run's metrics as the paper's table (one row per figure), with the definitions as footnotes."""
    turn = m.get("survival_turn", 20)
    rates, ci = m["conflict_rates"], m.get("conflict_rate_ci", {})
    point = m.get("survival_point") or {}
    judged = m.get("judged", m["episodes"] - m["errors"])

    def rate(kind: str) -> str:
        low, high = ci.get(kind, (0.0, 1.0))
        return f"{rates[kind]:.1%} ({low:.0%}-{high:.0%})" if judged else "n/a"

    def pct(value: float | None) -> str:
        return "n/a" if value is None or not judged else f"{value:.1f}%"

    narrator_errors, unknown = m.get("narrator_errors", 0), m.get("unknown", m["errors"])
    cut = m.get("budget", 0)
    rows = [
        ("episodes", f"{m['episodes']} ({narrator_errors} narrator error(s) counted as failures, {unknown} unknown "
                     "outcome(s)" + (f" and {cut} cut short by the cost cap" if cut else "") + " excluded below)"),
        (f"survival@{turn} *", point.get("text", "n/a")),
        ("average turns", f"{m['avg_turns']:.2f}" if judged else "n/a"),
        ("trajectory progress", pct(m["progress_pct"])),
        ("satisfied commitments **", pct(m["satisfied_pct"])),
        ("invariants held **", pct(m.get("held_pct"))),
        ("fact conflicts", rate("fact")),
        ("commitment conflicts", rate("commitment")),
        ("player-input conflicts", rate("player_input")),
        ("narrator errors", f"{narrator_errors}"),
        ("successes", str(m["successes"])),
        ("conflict-free", str(m["conflict_free"])),
        ("turn limit reached", str(m["turn_limit"])),
        ("script exhausted", str(m.get("script_exhausted", 0))),
        *((("conflict-check flags", flags),) if (flags := flags_text(m.get("flags"))) else ()),
        *((("cut short (budget)", f"{cut} (by the cost cap; censored, not failures)"),) if cut else ()),
        ("tokens", f"{m['tokens']:,}"),
        ("cached prompt tokens", cached_text(m)),
        ("cost", f"${m['cost_usd']:.4f}" + (f" (${m['spent_usd']:.4f} with the turns played ahead and "
                                              "discarded)" if cut and m.get("spent_usd") else "")),
    ]
    for k, v in (m.get("pass_k") or {}).items():
        rows.append((f"pass^{k}", "n/a" if v is None else f"{v:.1%}"))
    width = max(len(r[0]) for r in rows)
    notes = [
        f"  * Kaplan-Meier: no confirmed conflict or narrator error through turn {turn}, 95% log-log (Greenwood)",
        "    interval; turn limit, script end, budget and unknown outcomes are censored at their last turn; n/a when",
        "    fewer than half the episodes were observed up to that turn.",
        "  ** satisfied: achievements and orderings whose condition was met; held: invariants never violated.",
    ]
    return "\n".join([title, *(f"  {label:<{width}}  {value}" for label, value in rows), *notes])



def repeated_error_lines(records: Sequence[EpisodeRecord]) -> list[str]:
    """One line per error that ended more than one episode the same way, with its count: a broken endpoint or
    auditor reads as one problem, not as many."""
    from collections import Counter

    counts: Counter[tuple[str, str]] = Counter(
        (e.error.kind, e.error.message) for e in records if e.error is not None and e.error.message)
    return [f"ncp: {n} episodes ended in the same {kind} error: {one_line(message, 200)}"
            for (kind, message), n in counts.most_common() if n > 1]
