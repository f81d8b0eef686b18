"""The ``ncp`` command: the same engine as the pytest plugin, without pytest.

    ncp validate specs/            check every spec (path:line: field: message), exit 1 on problems
    ncp schema                     JSON Schema of the spec format
    ncp run --narrator M:A ...     play, audit and score episodes; writes DIR/results.json + traces
    ncp demo --out runs/demo       an offline run against the bundled scripted model server

One module per sub-command (``run.py``, ``compare.py``, ...), each with ``register(subparsers)``; what
they share (exit codes, argument types, the model-call options, ``usage()``, ``summary()``) is in
``common.py``. Entry point: ``ncp = pytest_ncp.cli:main``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from .common import EXIT_INTERRUPTED, EXIT_USAGE

# One module per sub-command, each with ``register(subparsers)`` that adds it (with
# ``set_defaults(func=...)``), in the order ``ncp --help`` lists them; heavy imports stay inside the
# command functions, so ``ncp --help`` is quick.
COMMAND_MODULES: tuple[str, ...] = ("validate", "schema", "run", "demo", "lint", "catalog", "report", "specs",
                                    "compare", "reaudit", "stability", "review", "merge", "doctor", "calibrate",
                                    "fork", "failures", "history")


def main(argv: Sequence[str] | None = None) -> int:
    from ..llm.litellm_path import quiet_in_own_process

    quiet_in_own_process()  # ncp owns its process: litellm's help banners stay out of its output
    if argv is None and "" not in sys.path and os.getcwd() not in sys.path:
        # Run as the ncp program, which owns its process: like `python -m`, a narrator module in the
        # working directory is importable (--narrator my_agent:Narrator). The pytest plugin, a guest in
        # pytest's process, never edits sys.path (README: "Making your narrator importable").
        sys.path.insert(0, os.getcwd())
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted: results.json and traces hold every finished episode and turn", file=sys.stderr)
        return EXIT_INTERRUPTED


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, when it has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or default in (None, False, argparse.SUPPRESS)
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else "%(default)s"
        return f"{text} (default: {shown})"


class _Parser(argparse.ArgumentParser):
    """``ncp`` and all its sub-commands (sub-parsers are made of the parent's class) show defaults."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-ncp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(prog="ncp", description="Narrative Commitment Preservation: test narrator agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser
