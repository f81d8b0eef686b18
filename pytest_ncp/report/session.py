"""The pytest session's terminal summary: the paper's table, stored failures, and the verdict's lines.

Computed here from plain data (the session's metrics and ``analysis.verdict.Verdict``); the plugin's
``pytest_terminal_summary`` only writes these lines (syrupy's ``SnapshotReport`` is the model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..analysis.verdict import Verdict
from .verdict import verdict_blocks


def session_title(config: Any, *, demo: bool) -> str:
    """``narrator agent:Narrator | auditor ... | player scripted | max turns 4`` (``config``: a RunConfig)."""
    return (f"narrator {config.narrator} | auditor {config.auditor_model} | player {config.player} | "
            f"max turns {config.max_turns}" + (" | OFFLINE DEMO (scripted models)" if demo else ""))


def stored_failure_lines(fork_outcomes: Mapping[str, bool], stored: Sequence[Path], *, samples: int,
                         folder: Path | None) -> list[str]:
    """What ``--ncp-failures`` did this session: stored failures that now pass, new ones stored."""
    out = []
    if fork_outcomes:
        fixed = sum(fork_outcomes.values())
        out.append(f"stored failures: {fixed} of {len(fork_outcomes)} pass ({samples} sample(s) each, no confirmed "
                   f"conflict) in {folder}")
    if stored:
        out.append(f"stored {len(stored)} new failure(s) in {folder}: " + ", ".join(p.stem for p in stored))
    return out


def session_lines(*, verdict: Verdict, metrics: Mapping[str, Any] | None, title: str,
                  failures: Sequence[str] = (), report: Path | None = None, interrupted: bool = False) -> list[str]:
    """Every line of the session's summary, blocks separated by a blank line.

    ``metrics`` is None when no episode reported (``--ncp-failures-only``): no table then, but the
    verdict still explains the exit code (a gate that cannot decide says so).
    """
    from .text import metrics_table

    blocks: list[list[str]] = []
    if metrics is not None:
        from .blame import blame_lines

        blocks.append(metrics_table(dict(metrics), title).splitlines())
        if metrics.get("blame"):
            blocks.append(blame_lines(metrics["blame"]))
    if failures:
        blocks.append(list(failures))
    blocks += verdict_blocks(verdict, "session")
    lines: list[str] = []
    for block in blocks:
        lines += ([""] if lines else []) + block
    if report is not None and metrics is not None:
        lines.append(f"results: {report / 'results.json'}, report: {report / 'report.html'}")
    if interrupted and report is not None:
        lines.append(f"interrupted: {verdict.episodes} finished episode(s) are in {report / 'results.json'}; run the "
                     "same command with --ncp-resume to continue")
    return lines
