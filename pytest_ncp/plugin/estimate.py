"""``pytest --ncp-estimate``: print what the session's episodes may cost, then exit 0 before anything runs.

Done at configure time, before pytest-xdist starts a worker, over the spec files the session would collect
(the configured ``--ncp-specs``, or the spec files among the paths given on the command line); ``-k`` and
``-m`` are not applied: the estimate covers every episode of those files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .options import Settings


def spec_files(config: pytest.Config, settings: Settings) -> list[Path]:
    """The spec files the session would collect (``collect.is_spec_file``), in a stable order."""
    from .collect import _given_paths, is_spec_file

    here = Path(config.invocation_params.dir)
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    roots = _given_paths(config) if given else [(here / p).resolve() for p in settings.specs]
    found: list[Path] = []
    for root in roots:
        candidates = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and not any(
                part.startswith(".") for part in p.relative_to(root).parts)) if root.is_dir() else []
        found += [f for f in candidates if f not in found and is_spec_file(config, settings.specs, f)]
    return found


def print_estimate(config: pytest.Config, settings: Settings) -> None:
    """Print the estimate and exit 0 (``pytest.exit``): no test is collected or run, no model is called."""
    from ..core.spec import SpecError, load_spec
    from ..engine.estimate import estimate_run
    from ..engine.narrators import load_narrator
    from ..report.estimate import estimate_lines

    specs, problems = [], []
    for path in spec_files(config, settings):
        try:
            specs.append(load_spec(path))
        except SpecError as exc:
            problems.append(str(exc).splitlines()[0])
    run = settings.run
    jobs = [(s, r) for s in specs for r in range(run.repeats)]
    canaries = []
    if settings.canaries:
        from ..calibration.audit import pick_canaries

        canaries = [c.context() for c in pick_canaries(settings.canary_set, settings.canaries,
                                                       seed=settings.canary_seed)]
    assert run.narrator, "the estimate is only made with a narrator configured"
    estimate = estimate_run(run, jobs, narrator_factory=load_narrator(run.narrator), canaries=canaries)
    lines = estimate_lines(estimate, max_tokens_flag="--ncp-max-tokens", cap=run.max_cost, cap_flag="--ncp-max-cost",
                           front="--ncp-estimate")
    lines += [f"not counted (the spec does not load): {p}" for p in problems]
    if settings.options.get("history"):
        from ..report.history import estimate_history_lines

        lines += estimate_history_lines(settings.options["history"], run.to_dict(), specs, len(jobs),
                                        flag="--ncp-history")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    pytest.exit("pytest-ncp: --ncp-estimate printed the estimate; nothing was run", returncode=0)
