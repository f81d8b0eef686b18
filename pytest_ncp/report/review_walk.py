"""``ncp review``: the terminal walk over a run's confirmed conflicts, one at a time (labels in reviews.json).

The data (conflicts of a run, reviews.json, dispute rates) is in ``analysis/reviews.py``; this module
shows a conflict and asks. Keys are read line by line from stdin (type the letter, then Enter), so the
walk works the same under tmux, over ssh, and with piped input in tests; no curses.
"""

from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable

from ..core.config import episode_name
from ..analysis.results import load_results
from ..analysis.reviews import (
    REVIEWS_FILE, ConflictItem, conflicts_of, dispute_line, label_key, load_reviews, put_label, save_reviews,
)
from ..core.traces import episode_trace, load_recorded_spec

_KIND = {"fact": "fact conflict", "commitment": "commitment conflict", "player_input": "player-input conflict"}


# --- showing a conflict -----------------------------------------------------------------------------


def highlight(text: str, quote: str, mark: Callable[[str], str]) -> tuple[str, bool]:
    """``text`` with each part of ``quote`` (split at elisions) wrapped by ``mark``; whether it was found.

    The spans come from the project's one quote matcher, so what the auditor verified is found here.
    """
    from ..core.quotes import find_quote
    from ..core.safe_text import printable

    # Narration is model output: its control characters are escaped, only ``mark``'s own are emitted.
    spans = find_quote(quote, text)
    if not spans:
        return printable(text), False
    out, pos = [], 0
    for a, b in spans:
        out += [printable(text[pos:a]), mark(printable(text[a:b]))]
        pos = b
    out.append(printable(text[pos:]))
    return "".join(out), True


def _marker(color: bool) -> Callable[[str], str]:
    if color:
        return lambda s: f"\x1b[1;7m{s}\x1b[0m"  # bold reverse video
    return lambda s: f">>{s}<<"


@dataclass
class _EpisodeRecord:
    """What the trace adds to results.json: the exchange around the conflict, fact and spec texts."""

    turns: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    spec_title: str | None = None
    spec_location: str | None = None
    commitments: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (kind, text)
    problem: str | None = None


def _load_record(item: ConflictItem, run_dir: Path, spec_cache: dict[str, Any]) -> _EpisodeRecord:
    record = _EpisodeRecord()
    trace = episode_trace(item.trace, run_dir)
    if trace.path is None:
        record.problem = f"{trace.problem}: showing results.json only"
        return record
    if trace.problem or trace.bad_lines:
        record.problem = trace.problem or f"{trace.bad_lines} unreadable trace line(s) skipped"
    try:
        for event in trace.events:
            kind = event["event"]
            if kind == "start":
                record.facts.update({f["id"]: f["text"] for f in event.get("ledger") or ()})
            elif kind == "turn":
                record.turns[int(event["turn"])] = (event.get("player_input"), event.get("response") or "")
                for change in event.get("ledger_changes") or ():
                    if change.get("op") == "add":
                        record.facts[change["fact_id"]] = change["text"]
    except (KeyError, TypeError, ValueError) as exc:
        record.problem = f"cannot read trace {trace.path}: {exc}"
    if item.spec_id not in spec_cache:
        spec_cache[item.spec_id] = load_recorded_spec(trace.start.get("spec_path"), run_dir)
    spec = spec_cache[item.spec_id]
    if spec is not None:
        record.spec_title, record.spec_location = spec.title, spec.path
        record.commitments = {c.id: (c.kind, c.text) for c in spec.all_commitments}
    return record


def _plain_block(label: str, text: str | None, width: int = 100) -> list[str]:
    body = text if text else "(none)"
    lines = [f"{label}:"]
    for para in body.splitlines() or [""]:
        lines += ["    " + x for x in (textwrap.wrap(para, width - 4, break_on_hyphens=False) or [""])]
    return lines


def render_conflict(item: ConflictItem, record: _EpisodeRecord, index: int, total: int, *,
                    color: bool = False, previous: str | None = None) -> str:
    from ..core.safe_text import printable

    def _block(label: str, text: str | None) -> list[str]:  # model text: printed escaped
        return _plain_block(label, printable(text))

    def _marked_block(label: str, text: str) -> list[str]:  # already escaped by highlight()
        return _plain_block(label, text)

    ids = ", ".join(item.fact_ids + item.commitment_ids)
    title = f" ({record.spec_title})" if record.spec_title else ""
    lines = [f"--- conflict {index}/{total}: {episode_name(item.spec_id, item.repeat)}{title}, turn {item.turn}, "
             f"{_KIND.get(item.type, item.type)}{f' ({ids})' if ids else ''} ---"]
    if record.spec_location:
        lines.append(f"spec: {record.spec_location}")
    if previous:
        lines.append(f"already labelled: {previous}")
    if record.problem:
        lines.append(f"note: {record.problem}")
    for fid in item.fact_ids:
        lines += _block(f"fact {fid}", record.facts.get(fid, "(text not in the trace)"))
    for cid in item.commitment_ids:
        kind, text = record.commitments.get(cid, ("?", "(spec file not found)"))
        lines += _block(f"commitment {cid} ({kind})", text)
    lines += _block("auditor finding", item.explanation)
    lines += _block("confirmation", item.confirmation)
    if item.turn - 1 in record.turns:
        said, narration = record.turns[item.turn - 1]
        if said is not None:
            lines += _block(f"turn {item.turn - 1} player", said)
        lines += _block(f"turn {item.turn - 1} narrator", narration)
    if item.turn in record.turns:
        said, narration = record.turns[item.turn]
        if said is not None:
            lines += _block(f"turn {item.turn} player", said)
        marked, found = highlight(narration, item.quote, _marker(color))
        lines += _marked_block(f"turn {item.turn} narrator", marked)
        if not found:
            lines += _block("quote (not found verbatim in the narration)", f'"{item.quote}"')
    else:
        lines += _block("quote", f'"{item.quote}"')
    return "\n".join(lines)


# --- the walk ---------------------------------------------------------------------------------------


@dataclass
class ReviewSummary:
    total: int = 0          # confirmed conflicts in the run
    agreed: int = 0         # labelled this session
    disputed: int = 0
    skipped: int = 0
    remaining: int = 0      # not labelled by this reviewer after the session
    quit: bool = False
    path: Path | None = None

    def line(self) -> str:
        how = "quit" if self.quit else "done"
        return (f"{how}: {self.agreed} agreed, {self.disputed} disputed, {self.skipped} skipped this session; "
                f"{self.remaining} of {self.total} conflict(s) not yet labelled by you; labels in {self.path}")


def walk(run_dir: str | Path, *, reviewer: str, relabel: bool = False, stdin: IO[str] | None = None,
         stdout: IO[str] | None = None, color: bool | None = None,
         now: Callable[[], str] | None = None) -> ReviewSummary:
    """Ask a person about each confirmed conflict of ``run_dir``; store labels as they are given.

    Answers per conflict, one line each: ``a`` agree, ``d`` dispute, ``s`` skip, ``q`` quit; after
    ``a`` or ``d`` an optional one-line note (Enter for none). End of input counts as quit. Conflicts
    this reviewer already labelled are skipped unless ``relabel``.
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if color is None:
        color = bool(getattr(stdout, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ
    now = now or (lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    run_dir = Path(run_dir)
    results = load_results(run_dir)
    reviews = load_reviews(run_dir)
    items = conflicts_of(results)
    summary = ReviewSummary(total=len(items), path=run_dir / REVIEWS_FILE)

    def mine() -> dict[tuple[Any, ...], str]:
        return {label_key(x): x["label"] for x in reviews["labels"] if x.get("reviewer") == reviewer}

    def say(text: str = "", end: str = "\n") -> None:
        stdout.write(text + end)
        stdout.flush()

    done = mine()
    todo = items if relabel else [i for i in items if i.key not in done]
    if not items:
        say(f"no confirmed conflict in {run_dir / 'results.json'}: nothing to review")
    elif not todo:
        say(f"all {len(items)} conflict(s) already labelled by {reviewer}; use --all to review them again")
    elif len(todo) < len(items):
        say(f"resuming: {len(items) - len(todo)} of {len(items)} conflict(s) already labelled by {reviewer} "
            "(--all shows them again)")
    spec_cache: dict[str, Any] = {}
    position = {i.key: n for n, i in enumerate(items, 1)}
    for item in todo:
        record = _load_record(item, run_dir, spec_cache)
        say()
        say(render_conflict(item, record, position[item.key], len(items), color=color,
                            previous=done.get(item.key)))
        answer = _ask(stdin, say, "[a]gree  [d]ispute  [s]kip  [q]uit > ", "adsq")
        if answer in (None, "q"):
            summary.quit = True
            break
        if answer == "s":
            summary.skipped += 1
            continue
        note = _read_line(stdin, say, "note (optional, Enter for none) > ")
        label: dict[str, Any] = {"spec_id": item.spec_id, "repeat": item.repeat, "turn": item.turn, "type": item.type,
                 "label": "agree" if answer == "a" else "dispute", "note": (note or "").strip(),
                 "reviewer": reviewer, "date": now()}
        put_label(reviews, label)
        save_reviews(run_dir, reviews)
        done[item.key] = label["label"]
        if answer == "a":
            summary.agreed += 1
        else:
            summary.disputed += 1
        say(f"saved: {label['label']}")
        if note is None:  # input ended while asking for the note: the label is kept, then stop
            summary.quit = True
            break
    summary.remaining = sum(i.key not in done for i in items)
    say()
    say(summary.line())
    say(dispute_line(reviews["labels"]))
    return summary


def _read_line(stdin: IO[str], say: Callable[..., None], prompt: str) -> str | None:
    say(prompt, end="")
    line = stdin.readline()
    if not line:
        say()
        return None
    line = line.rstrip("\r\n")
    if not getattr(stdin, "isatty", lambda: False)():
        say(line)  # a terminal echoes what was typed; piped answers are echoed so the log reads the same
    return line


def _ask(stdin: IO[str], say: Callable[..., None], prompt: str, keys: str) -> str | None:
    while True:
        line = _read_line(stdin, say, prompt)
        if line is None:
            return None
        answer = line.strip().lower()
        if answer and answer[0] in keys and (len(answer) == 1 or answer in ("agree", "dispute", "skip", "quit")):
            return answer[0]
        say(f"please answer one of: {', '.join(keys)}")
