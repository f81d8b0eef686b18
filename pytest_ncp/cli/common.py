"""What the ``ncp`` sub-commands share: exit codes, argument types, the option table's arguments (the run
options, the model-call options), the error line and the one-line run summary. Every command module imports
from here, never from another command."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..core.exit_codes import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ..core.options import (
    CALL_OPTIONS, FLAG, ITEMS, PATHS, Front, Option, Resolved, resolve_options, share, whole,
)

if TYPE_CHECKING:
    from ..core.config import RunConfig
    from ..core.spec import NarrativeSpec, SpecError
    from ..lint.core import LintFinding

__all__ = [
    "EXIT_ERROR_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "add_options", "check_specs",
    "call_config", "client_settings", "error_rate", "load_specs_or_report", "positive", "resolve_args", "summary",
    "usage", "whole_number",
]


def usage(message: str, command: str = "ncp") -> int:
    """Say what is wrong on stderr (``ncp: error: ...``) and return the usage exit code."""
    print(f"{command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def add_options(p: argparse.ArgumentParser, options: Iterable[Option], command: str) -> None:
    """Arguments of the option table (``core/options.py``) for ``ncp COMMAND``. They stay strings here (no
    argparse ``type``, default None): ``resolve_args`` parses them all at once, knowing which were given."""
    front = Front(command)
    declared = tuple(options)
    for option in declared:
        kwargs: dict[str, Any] = {"dest": option.dest, "default": None,
                                  "help": option.help_for(front).replace("%", "%%")}
        if option.kind == FLAG:
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = option.metavar
            kwargs["nargs"] = "+" if option.kind == PATHS else None
            kwargs["action"] = "append" if option.kind == ITEMS else "store"
        if option.ncp_required:
            kwargs["required"] = True
        p.add_argument(front.flag(option.name), **kwargs)
    p.set_defaults(ncp_options=(command, declared), ncp_resolved=None)


def resolve_args(args: argparse.Namespace) -> Resolved:
    """Parse the table options this command declared (``add_options``) and put the values back on ``args``,
    as argparse's ``type`` would, but with every problem at once (ValueError lists them, one a line) and
    knowing which were given. Once per ``args``: a second call returns the first answer."""
    if getattr(args, "ncp_resolved", None) is not None:
        resolved: Resolved = args.ncp_resolved
        return resolved
    command, declared = args.ncp_options
    front = Front(command)
    raw = {o.name: getattr(args, o.dest) for o in declared}
    given = {name: (value, front.flag(name)) for name, value in raw.items() if value is not None}
    opts = resolve_options(given, front, declared)
    if opts.problems:
        raise ValueError("\n  ".join(opts.problems))
    for option in declared:
        setattr(args, option.dest, opts[option.name])
    args.ncp_resolved = opts
    return opts


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The RunConfig fields of the model-call options (``CALL_OPTIONS``), resolved; ValueError for bad values."""
    opts = resolve_args(args)
    return {o.field_name: opts[o.name] for o in CALL_OPTIONS}


def call_config(args: argparse.Namespace, **fields: Any) -> RunConfig:
    """The run settings of a command that calls a model but plays no episode: its model-call options
    (``client_settings``) and ``fields``, for ``ModelClient.from_config``; ValueError for bad values."""
    from ..core.config import RunConfig

    return RunConfig(**{**client_settings(args), **fields})


def whole_number(minimum: int) -> Callable[[str], int]:
    """argparse type: a whole number >= ``minimum`` (the option table's parser), with a message that says so."""
    return _argparse_type(whole(minimum))


def _argparse_type(parse: Callable[[Any], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None

    convert.__name__ = parse.__name__  # argparse names the type in its messages
    return convert


positive = whole_number(1)


def error_rate(text: str) -> float:
    rate: float = _argparse_type(share)(text)
    return rate


def load_specs_or_report(paths: Sequence[str]) -> tuple[list[NarrativeSpec], list[SpecError]] | None:
    """Load specs for a command; a path that does not exist is reported on stderr (None returned)."""
    from ..core.spec import SpecError, load_specs

    try:
        return load_specs(paths)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return None


def check_specs(paths: Sequence[str], *, lint: bool,
                quiet: bool = False) -> tuple[list[NarrativeSpec], list[SpecError], list[LintFinding]] | None:
    """Load specs and print their problems (and, with ``lint``, their lint findings): validate and lint share it."""
    loaded = load_specs_or_report(paths)
    if loaded is None:
        return None
    specs, errors = loaded
    for err in errors:
        print(err)
    findings: list[LintFinding] = []
    if lint:
        from ..lint import lint_spec

        findings = [f for spec in specs for f in lint_spec(spec)]
        for finding in findings if not quiet else ():
            print(finding)
    return specs, errors, findings


def completeness_line(specs: Sequence[Any]) -> str | None:
    """How many specs have a playthrough the loader accepted, and how many are complete (docs/specs.md); None
    when no spec is a benchmark spec (one with a review record): a studio's own specs need neither."""
    if not any(s.review is not None for s in specs):
        return None
    played = sum(s.playthrough is not None for s in specs)
    complete = sum(s.complete for s in specs)
    return (f"complete: {complete} of {len(specs)} spec(s) (playthrough, sources named, independent read "
            f"accepted); {played} with a playthrough")


def summary(m: dict[str, Any], turn: int) -> str:
    rates = m["conflict_rates"]
    share = m.get("cached_share")
    cached = "" if share is None else f" ({share:.1%} of prompt tokens cached)"
    held = "n/a" if m.get("held_pct") is None else f"{m['held_pct']:.1f}%"
    if not m.get("judged", m["episodes"] - m["errors"]):
        figures = "nothing judged: every figure is n/a"
    else:
        figures = (f"avg turns {m['avg_turns']:.2f}, progress {m['progress_pct']:.1f}%, satisfied "
                   f"{m['satisfied_pct']:.1f}%, invariants held {held}, conflicts fact {rates['fact']:.0%} / "
                   f"commitment {rates['commitment']:.0%} / player input {rates['player_input']:.0%}, "
                   f"successes {m['successes']}, conflict-free {m['conflict_free']}, turn limit {m['turn_limit']}, "
                   f"script exhausted {m['script_exhausted']}")
    cut = f", {m['budget']} cut short by the cost cap (budget)" if m.get("budget") else ""
    from ..report.text import flags_text

    flags = flags_text(m.get("flags"))
    figures += f", conflict-check flags {flags}" if flags else ""
    return (f"{m['episodes']} episode(s), {m['narrator_errors']} narrator error(s) (failures), {m['unknown']} "
            f"unknown (auditor/model/player errors, player faults, split verdicts){cut}: survival@{turn} "
            f"{m['survival_point']['text']}, {figures}, tokens {m['tokens']}{cached}, cost ${m['cost_usd']:.4f}")


