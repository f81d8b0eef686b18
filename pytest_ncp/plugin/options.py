"""The pytest front end of the option table (``core/options.py``): ``--ncp-*`` options, ``ncp_*`` ini keys,
marker and property names (named once, imported by tests), resolved into one Settings object.

Options stay strings until configure time, where they are validated together; a bad value stops the
run with ``pytest.UsageError`` (exit code 4) saying what is valid. For hand-written tests, ``run_episode``
applies the ``@pytest.mark.ncp(...)`` marker over these settings, and its own arguments over the marker.
"""

from __future__ import annotations

import dataclasses
# pytest's parser is argparse, which leaves an option out of --help only when its help *is* this object
# (an equal string is not enough); pyproject's import contract allows this one import outside cli/.
from argparse import SUPPRESS as _HIDDEN
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pytest

from ..core.config import RunConfig
from ..core.options import (
    FLAG, ITEMS, PATHS, PLAYER_KINDS, PYTEST, PYTEST_EXPERT, PYTEST_OPTIONS, Option, Resolved, resolve_options,
)

if TYPE_CHECKING:
    from ..analysis.metrics import Gate

GROUP = "ncp"
MARKER = "ncp"
PROPERTY_PREFIX = "ncp."


def cli_flag(name: str) -> str:
    return PYTEST.flag(name)


def ini_key(name: str) -> str:
    return "ncp_" + name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    """Every option of the table that pytest takes, as ``--ncp-NAME`` and ini ``ncp_NAME``. Values stay strings
    (lists of strings): they reach pytest-xdist workers as they are, and ``resolve`` parses them."""
    group = parser.getgroup(GROUP, "narrative commitment preservation (pytest-ncp)")
    for option in PYTEST_OPTIONS:
        dest, ini_help = ini_key(option.name), option.help_for(PYTEST)
        # The ini key's help is always listed; an expert setting's flag is an alias kept out of --help.
        help_text = _HIDDEN if option.name in PYTEST_EXPERT else ini_help.replace("%", "%%")  # argparse: %
        if option.kind == FLAG:
            group.addoption(cli_flag(option.name), action="store_true", default=None, dest=dest, help=help_text)
            parser.addini(dest, ini_help, type="bool", default=False)
        elif option.kind in (PATHS, ITEMS):
            group.addoption(cli_flag(option.name), action="append", default=None, dest=dest,
                            metavar=option.metavar, help=help_text)
            if option.kind == PATHS:  # relative to the ini file
                parser.addini(dest, ini_help, type="paths", default=[])
            else:
                parser.addini(dest, ini_help, type="args", default=[])
        else:
            group.addoption(cli_flag(option.name), default=None, dest=dest, help=help_text)
            parser.addini(dest, ini_help, default=None)

@dataclass
class Settings:
    """Everything the plugin needs, validated (built by ``resolve``: the defaults are the option table's).
    ``enabled`` is False when no narrator is configured."""

    run: RunConfig
    specs: list[Path]
    gate: Gate | None
    report: Path | None
    demo: bool
    resume: bool
    force: bool
    max_error_rate: float
    baseline: Path | None
    canaries: int
    min_canary_recall: float
    canary_set: Path
    canary_seed: int
    failures: Path | None  # --ncp-failures DIR (see engine/failures.py)
    fork_samples: int
    failures_only: bool
    sources: dict[str, str] = field(default_factory=dict)  # how each option was given ("default" when not)
    options: dict[str, Any] = field(default_factory=dict)  # every option's value, by table name

    @property
    def enabled(self) -> bool:
        return bool(self.run.narrator)


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _model_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


# ``@pytest.mark.ncp(...)`` on a hand-written test: run_episode's defaults (plugin/fixtures.py reads them).
MARKER_ARGUMENTS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "max_turns": ("a whole number >= 1", _whole_number),
    "player": (f"one of {', '.join(PLAYER_KINDS)}", lambda v: v in PLAYER_KINDS),
    "player_model": ("a model name, e.g. 'openai/gpt-4o-mini'", _model_name),
    "narrator_model": ("a model name, e.g. 'openai/gpt-4o-mini'", _model_name),
}


def marker_problems(mark: pytest.Mark) -> list[str]:
    """What is wrong with one ``@pytest.mark.ncp(...)``: an argument a test cannot mean (a typo would
    otherwise be ignored and the test run with the session's settings), or a value of the wrong kind."""
    valid = ", ".join(f"{name}= ({what})" for name, (what, _) in MARKER_ARGUMENTS.items())
    problems = [f"positional arguments {mark.args!r}: give keyword arguments ({valid})"] if mark.args else []
    for name, value in mark.kwargs.items():
        if name not in MARKER_ARGUMENTS:
            problems.append(f"unknown argument {name}={value!r}; valid: {valid}")
        elif not MARKER_ARGUMENTS[name][1](value):
            problems.append(f"{name}={value!r}: expected {MARKER_ARGUMENTS[name][0]}")
    return problems


MARKER_PROBLEMS = pytest.StashKey[str]()


def check_markers(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Raise pytest.UsageError naming every test whose ``ncp`` marker is wrong, and what is valid.

    An xdist worker cannot stop the session with a usage error (xdist reports it as its own crash), so
    there each such test fails at setup with the same words (``fail_on_marker_problems``)."""
    problems = [(item, f"{item.nodeid}: @pytest.mark.{MARKER}(...): {problem}")
                for item in items for mark in item.iter_markers(MARKER) for problem in marker_problems(mark)]
    if not problems:
        return
    if not hasattr(config, "workerinput"):
        raise pytest.UsageError("pytest-ncp: " + "\n  ".join(["invalid markers:", *(p for _, p in problems)]))
    for item, problem in problems:
        item.stash[MARKER_PROBLEMS] = "\n".join(filter(None, [item.stash.get(MARKER_PROBLEMS, ""), problem]))


def fail_on_marker_problems(item: pytest.Item) -> None:
    problems = item.stash.get(MARKER_PROBLEMS, None)
    if problems is not None:
        pytest.fail(f"pytest-ncp: invalid markers:\n{problems}", pytrace=False)


# The resolved settings of a session, set at configure time (``plugin.pytest_configure``).
SETTINGS_KEY = pytest.StashKey[Settings]()


def _given(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    # Precedence: command line > ini (ncp_*) > default (the table's, applied by resolve_options).
    value = config.getoption(ini_key(option.name), default=None)
    if value is not None:
        return value, cli_flag(option.name)
    ini = config.getini(ini_key(option.name))
    if ini not in (None, "", []) and ini is not False:
        return ini, f"ini {ini_key(option.name)}"
    return None


# The controller's run seed, handed to each pytest-xdist worker (``xdist.py``).
SEED_KEY = "ncp_seed"


def resolve(config: pytest.Config) -> Settings:
    """Read and validate every ncp option. Raises pytest.UsageError listing what is wrong and what is valid."""
    given = {o.name: g for o in PYTEST_OPTIONS if (g := _given(config, o)) is not None}
    opts = resolve_options(given, PYTEST, PYTEST_OPTIONS)
    root = Path(config.rootpath)
    for option in PYTEST_OPTIONS:  # a default path is the project's (rootdir), a given one is as typed
        if option.relative_default and not opts.given(option.name) and opts[option.name]:
            value = opts[option.name]
            opts.values[option.name] = [root / v for v in value] if option.kind == PATHS else str(root / value)
    run = RunConfig.from_options(opts)
    seed = getattr(config, "workerinput", {}).get(SEED_KEY)
    if seed is not None:  # an xdist worker: the controller's seed (it drew one for a sequential run)
        run = dataclasses.replace(run, seed=int(seed))
    problems = [*opts.problems, *run.validate(opts), *_path_problems(opts, run), *_cap_problems(opts, run)]
    if problems:
        raise pytest.UsageError("pytest-ncp: " + "\n  ".join(["invalid options:", *problems]))
    from ..analysis.metrics import Gate

    failures = _path(opts["failures"])
    if failures is not None and not failures.is_absolute():
        failures = Path(config.invocation_params.dir) / failures
    return Settings(
        run=run, specs=[Path(p) for p in opts["specs"]], options=opts.values, sources=opts.sources,
        gate=Gate.parse(opts["min-survival"]) if opts["min-survival"] else None, report=_path(opts["report"]),
        demo=run.demo, resume=opts["resume"], force=opts["force"], max_error_rate=opts["max-error-rate"],
        baseline=_path(opts["baseline"]), canaries=opts["canaries"], min_canary_recall=opts["min-canary-recall"],
        canary_set=Path(opts["canary-set"]), canary_seed=opts["canary-seed"], failures=failures,
        fork_samples=opts["fork-samples"], failures_only=opts["failures-only"])


def _cap_problems(opts: Resolved, run: RunConfig) -> list[str]:
    """A cost cap needs every model of the run priced (``engine.estimate.unpriced_under_cap``)."""
    if run.max_cost is None or not run.narrator:
        return []
    from ..engine.estimate import unpriced_under_cap

    return unpriced_under_cap(run, opts.spell("max-cost"))


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _path_problems(opts: Resolved, run: RunConfig) -> list[str]:
    """What must exist before anything starts: the narrator, the specs, the baseline, the canaries' gold set."""
    problems = []
    if run.narrator:
        from ..engine.narrators import NarratorLoadError, load_narrator

        try:
            load_narrator(run.narrator)
        except NarratorLoadError as exc:
            problems.append(f"{opts.spell('narrator')}: {exc}")
        missing = [str(p) for p in opts["specs"] if not Path(p).exists()]
        if missing:
            problems.append(f"{opts.spell('specs')}: no such spec file or directory: {', '.join(missing)}")
    baseline = _path(opts["baseline"])
    if baseline is not None and not baseline.is_file():
        problems.append(f"{opts.spell('baseline')}: no such results file: {baseline} (a results.json from "
                        "--ncp-report or ncp run --out)")
    canary_set = Path(opts["canary-set"])
    if opts["canaries"] and not (canary_set / "cases").is_dir():
        problems.append(f"{opts.spell('canary-set') if opts.given('canary-set') else opts.spell('canaries')}: no "
                        f"gold set at {canary_set} (a directory with cases/ and specs/); set "
                        f"{opts.example('canary-set')}")
    return problems
