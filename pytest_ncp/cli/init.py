"""``ncp init``: write a studio starter into the working directory (or DIR).

The starter is a narrator stub, one spec of an original world with a comment per field, a pytest.ini
that points at them and routes every model to the bundled scripted server, a conftest.py whose rules
make that offline auditor read the spec's facts, one test file and a GitHub Actions workflow that runs
a real auditor. ``pytest`` passes there at once, offline. Existing files are never replaced without
``--force``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import EXIT_OK, usage

# template in cli/starter/ -> where it goes
FILES: dict[str, str] = {
    "narrator.py.tmpl": "narrator.py",
    "glasswater-relay.yaml": "specs/glasswater-relay.yaml",
    "pytest.ini.tmpl": "pytest.ini",
    "conftest.py.tmpl": "conftest.py",
    "test_narrator.py.tmpl": "tests/test_narrator.py",
    "narrator.yml.tmpl": ".github/workflows/narrator.yml",
}


def register(sub: Any) -> None:
    p = sub.add_parser("init", help="write a starter project: narrator stub, a spec of your world, pytest setup, CI",
                       description="Write a studio starter into DIR (default: the working directory): narrator.py, "
                                   "specs/glasswater-relay.yaml, pytest.ini, conftest.py, tests/test_narrator.py and "
                                   ".github/workflows/narrator.yml. Then `pytest` there plays the spec offline. "
                                   "Exit 2 without writing anything when a file exists, unless --force.")
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to write the starter (default: .)")
    p.add_argument("--force", action="store_true", help="replace files that exist")
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from importlib import resources

    root = Path(args.dir)
    targets = {template: root / target for template, target in FILES.items()}
    existing = [str(path) for path in targets.values() if path.exists()]
    if existing and not args.force:
        return usage(f"would overwrite {', '.join(existing)}: nothing written (pass --force to replace them)",
                     "ncp init")
    starter = resources.files("pytest_ncp.cli") / "starter"
    for template, path in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((starter / template).read_text(encoding="utf-8"), encoding="utf-8")
        print(f"wrote {path}")
    print("next: pytest    (offline: one episode of specs/glasswater-relay.yaml and tests/test_narrator.py; "
          "then describe your own world in specs/, docs/specs.md)")
    return EXIT_OK
