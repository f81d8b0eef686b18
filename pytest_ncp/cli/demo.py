"""``ncp demo``: an offline run of the built-in narrator against the bundled scripted model server."""

from __future__ import annotations

import argparse
from typing import Any

from .common import resolve_args, usage
from .run import cmd_run, run_options


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="offline run against the bundled scripted model server (no API key)")
    run_options(p, "demo")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..testing import ScriptedModelServer
    from ..testing.demo import install_demo_script

    try:
        resolve_args(args)  # a bad value stops the demo before its server starts
    except ValueError as exc:
        return usage(str(exc))
    with ScriptedModelServer() as server:
        install_demo_script(server)
        print(f"offline demo: every model is the scripted server at {server.base_url} "
              "(scripted answers, not real judgments)")
        return cmd_run(args, narrator="pytest_ncp.narrators:LLMNarrator", api_base=server.base_url, demo=True)
