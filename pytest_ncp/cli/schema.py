"""``ncp schema``: the JSON Schema of the spec format, for editor completion."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the spec format")
    p.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from ..core.spec import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))
    return EXIT_OK
