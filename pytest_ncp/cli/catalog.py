"""``ncp catalog specs/ > specs/README.md``: the specs catalog page, generated from the specs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, load_specs_or_report


def register(sub: Any) -> None:
    p = sub.add_parser("catalog", help="print the specs catalog (specs/README.md) generated from the specs")
    p.add_argument("paths", nargs="*", default=["specs"], help="spec files or directories (default: specs)")
    p.set_defaults(func=cmd_catalog)


def cmd_catalog(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..authoring.catalog import catalog_markdown

    loaded = load_specs_or_report(args.paths)
    if loaded is None:
        return EXIT_FAILED
    specs, errors = loaded
    if errors:
        # A catalog of only the valid specs would silently drop rows; make the author fix them.
        for err in errors:
            print(err, file=sys.stderr)
        print(f"{len(errors)} spec(s) invalid: fix them (`ncp validate`) before generating the catalog",
              file=sys.stderr)
        return EXIT_FAILED
    # Links in the page are relative to the directory it describes (the usual `ncp catalog specs/`).
    base = Path(args.paths[0]) if len(args.paths) == 1 and Path(args.paths[0]).is_dir() else None
    sys.stdout.write(catalog_markdown(specs, base=base))
    return EXIT_OK
