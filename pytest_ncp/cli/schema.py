"""``ncp schema``: the JSON Schema of the spec format (for editor completion), or of results.json."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the spec format (or, with --results, of results.json)")
    p.add_argument("--results", action="store_true",
                   help="the schema of results.json (ncp run --out, pytest --ncp-report) instead; docs/results.md "
                        "describes every field")
    p.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    if args.results:
        from ..analysis.results import results_json_schema

        print(json.dumps(results_json_schema(), indent=2))
        return EXIT_OK
    from ..core.spec import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))
    return EXIT_OK
