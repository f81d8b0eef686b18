"""Where a run came from: the git commit, branch and fingerprints recorded as results.json's ``provenance``.

Git is read with ``git`` itself (``rev-parse``, ``status``), in the working directory the run started in, with no
network. Outside a repository, or without git installed, the git fields are null and ``git`` says why: a run
never fails for want of a commit. On CI the checkout is often detached (a pull request's merge commit), so the
branch comes from the CI's variables first (``GITHUB_HEAD_REF`` / ``GITHUB_BASE_REF`` on a pull request,
``GITHUB_REF_NAME`` on a push), unless ``--branch`` names it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.config import FINGERPRINT_FIELDS, environment

# The endpoint's URL differs between a laptop and CI (and the demo's port every run) without changing what is
# judged: two runs differing only there share one line of a history.
HOST_FIELDS = frozenset({"api_base"})


def git(args: list[str], cwd: Path) -> str | None:
    """``git ARGS`` in ``cwd``: its output stripped, or None when git is missing or fails (not a repository)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(cwd: Path) -> dict[str, Any]:
    """commit, current branch (None when detached), dirty flag and, when they could not be read, why."""
    try:
        subprocess.run(["git", "--version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "branch": None, "dirty": None, "git": "git is not installed"}
    commit = git(["rev-parse", "--verify", "HEAD"], cwd)
    if commit is None:
        inside = git(["rev-parse", "--is-inside-work-tree"], cwd) == "true"
        why = "the git repository has no commit yet" if inside else f"{cwd} is not in a git repository"
        return {"commit": None, "branch": None, "dirty": None, "git": why}
    branch = git(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd)
    # Untracked files are left out: a run's own output folder is usually one of them.
    status = git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return {"commit": commit, "branch": branch or None, "dirty": None if status is None else bool(status),
            "git": None}


def host_independent_fingerprint(config: Mapping[str, Any]) -> str:
    """Hash of the settings an outcome depends on and of the installed package's prompts and rules, less the
    endpoint URL (``HOST_FIELDS``)."""
    judged = {k: config.get(k) for k in FINGERPRINT_FIELDS if k not in HOST_FIELDS}
    judged["environment"] = dict(config.get("environment") or environment())
    return hashlib.sha256(json.dumps(judged, sort_keys=True).encode()).hexdigest()[:16]


def spec_set_fingerprint(specs: Iterable[tuple[str, str]]) -> str:
    """Hash of (spec id, spec fingerprint) pairs, in id order."""
    pairs = sorted(set(specs))
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]


def collect_provenance(config: Mapping[str, Any], specs: Iterable[Any], *, branch: str | None = None,
                       base_branch: str | None = None, cwd: str | Path | None = None,
                       env: Mapping[str, str] | None = None, now: datetime | None = None) -> dict[str, Any]:
    """The ``provenance`` record of a run about to start (``analysis.results.Provenance``).

    ``config`` is ``RunConfig.to_dict()``; ``specs`` the specs the run was given (each with ``id`` and
    ``fingerprint``). ``branch`` / ``base_branch`` (``--branch``, ``--base-branch``) win over the CI's variables,
    which win over git.
    """
    env = os.environ if env is None else env
    state = git_state(Path.cwd() if cwd is None else Path(cwd))
    ci_branch = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None
    models = config.get("models") or {}
    specs = list(specs)
    run_id = env.get("GITHUB_RUN_ID")
    return {
        "commit": state["commit"], "branch": branch or ci_branch or state["branch"],
        "base_branch": base_branch or env.get("GITHUB_BASE_REF") or None,
        "dirty": state["dirty"], "git": state["git"],
        "started": (now or datetime.now(timezone.utc)).isoformat(),
        "config_fingerprint": host_independent_fingerprint(config),
        "narrator": config.get("narrator"),
        "models": {role: models.get(role) for role in ("narrator", "player", "auditor")},
        "spec_set": spec_set_fingerprint((s.id, s.fingerprint) for s in specs), "specs": len(specs),
        "pytest_ncp": (config.get("environment") or environment()).get("pytest_ncp", "unknown"),
        "ci_run": f"{run_id}.{env.get('GITHUB_RUN_ATTEMPT', '1')}" if run_id else None,
    }


__all__ = ["collect_provenance", "git_state", "host_independent_fingerprint", "spec_set_fingerprint"]
