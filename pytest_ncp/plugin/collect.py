"""Spec files as pytest nodes: one episode test per (spec, repeat), one test per commitment.

Every test of a spec reads the same episode, which runs once per session (``NcpSession``). Outcomes:
a confirmed conflict, or a narrator error (it raised, timed out or answered nothing: the narrator's
fault), fails the episode test; a violated commitment fails that commitment's test, and an achievement the
episode never reached (it ended first) is skipped, "not reached in N turns"; auditor, model and player errors, player faults and contested conflicts
(unknown outcomes, ``analysis/owners.py``) raise in ``setup`` and so are pytest *errors*, never failures; with ``--ncp-max-error-rate`` above 0 they are skipped
instead and the session checks the budget at the end. Under a survival gate, failures are xfailed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pytest

from ..core.config import episode_key
from .options import MARKER, PROPERTY_PREFIX
from .session import SESSION_KEY, NcpSession

if TYPE_CHECKING:
    from ..engine.episode import EpisodeResult
    from ..core.spec import NarrativeSpec


class NarrativeFailure(AssertionError):
    """A narrator broke a commitment: the message is the whole failure text, headline first."""


class EpisodeError(pytest.fail.Exception):  # type: ignore[name-defined,misc]  # pytest's Failed, by its public name
    """The episode could not be judged (an auditor, model or player error, a player fault, a contested conflict).

    Raised in ``setup``, so pytest reports an error, not a failure. It is pytest's own ``Failed``
    outcome without a Python traceback: pytest formats setup errors itself (item.repr_failure is only
    used for the call phase), and the engine's traceback says nothing about the narrator. The message
    is the whole story: headline, error kind and message, the trace file (which keeps the traceback).
    """

    __module__ = "builtins"  # as pytest's own Failed: the summary line reads "EpisodeError: <headline>"

    def __init__(self, message: str):
        super().__init__(message, pytrace=False)


class SpecInvalid(pytest.fail.Exception):  # type: ignore[name-defined,misc]  # pytest's Failed, by its public name
    """A spec file failed validation; the message lists path:line: field: message (no traceback)."""

    __module__ = "builtins"

    def __init__(self, message: str):
        super().__init__(f"invalid spec\n{message}", pytrace=False)


def _key(spec_id: str, repeat: int, repeats: int) -> str:
    return spec_id if repeats == 1 else f"{spec_id}-r{repeat}"


_SPEC_TEST = re.compile(r"::(?:episode\[(?P<e>[^\]:]+)\]|commitment\[(?P<c>[^\]:]+):[^\]]+\])$")


def episode_of(nodeid: str, repeats: int) -> str | None:
    """The episode key (``spec--rN``) a spec test's node id reads (the inverse of the names ``_key``
    gives); None for any other test. The xdist controller learns the selected episodes this way."""
    m = _SPEC_TEST.search(nodeid)
    if m is None:
        return None
    key = m["e"] or m["c"]
    if repeats == 1:
        return episode_key(key, 0)
    spec_id, sep, repeat = key.rpartition("-r")
    return episode_key(spec_id, int(repeat)) if sep and repeat.isdigit() else None


def _given_paths(config: pytest.Config) -> list[Path]:
    """The paths of the session's arguments (node ids cut at ``::``), resolved from where pytest started."""
    here = Path(config.invocation_params.dir)
    return [(here / a.split("::", 1)[0]).resolve() for a in config.args]


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _add_arg(config: pytest.Config, path: Path) -> None:
    """Collect ``path`` too, unless an argument already covers it (pytest would collect it twice)."""
    path = (Path(config.invocation_params.dir) / path).resolve()
    if not any(_within(path, given) for given in _given_paths(config)):
        config.args.append(str(path))


def add_default_spec_paths(config: pytest.Config, specs: Sequence[Path]) -> None:
    """Spec tests come from ``--ncp-specs`` / ``ncp_specs`` when no path was given on the command line.

    ``pytest`` alone (or ``testpaths``) runs the configured specs beside the usual tests; ``pytest
    tests/test_x.py`` runs just that file; ``pytest specs/caligari.yaml`` just that spec. xdist workers
    re-parse the same command line, so they decide the same way.
    """
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    for spec in specs:
        _add_arg(config, spec)


def is_spec_file(config: pytest.Config, specs: Sequence[Path], file_path: Path) -> bool:
    """A YAML file is a spec when it lies under a configured spec path, was named on the command line, or lies
    under a folder named on the command line and looks like a spec (``pytest suite/``, as pytest collects the
    test files of a folder it is given; other YAML there, CI or tool settings, is left alone)."""
    path = file_path.resolve()
    here = Path(config.invocation_params.dir)
    if any(_within(path, (here / root).resolve()) for root in specs):
        return True
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    given = _given_paths(config)
    if path in given:
        return True
    return any(_within(path, g) for g in given if g.is_dir()) and looks_like_spec(path)


# A spec's own top-level keys: a YAML file with ``id`` and most of these is a spec, valid or not (a broken one is
# then reported as an invalid spec, with its file and line, rather than skipped in silence).
SPEC_KEYS = ("synopsis", "initial_facts", "commitments", "trajectory")
_TOP_KEY = re.compile(r"^([A-Za-z_]+):", re.MULTILINE)


def looks_like_spec(path: Path) -> bool:
    """Read without a YAML parser (collection stays cheap): top-level ``id:`` and at least three spec keys."""
    try:
        keys = set(_TOP_KEY.findall(path.read_text(encoding="utf-8", errors="replace")[:200_000]))
    except OSError:
        return False
    return "id" in keys and sum(k in keys for k in SPEC_KEYS) >= 3


def no_spec_collected_line(config: pytest.Config, specs: Sequence[Path], items: Sequence[pytest.Item]) -> str | None:
    """One line when a session with a narrator collected no spec test at all: where spec tests come from."""
    if any(isinstance(i, _SpecItem) for i in items):
        return None
    here = Path(config.invocation_params.dir)
    configured = ", ".join(str(p) for p in specs) or "none"
    given = [p for p in _given_paths(config) if p.is_dir()] if config.args_source == pytest.Config.ArgsSource.ARGS \
        else []
    yaml = [p for g in given for p in sorted(g.rglob("*.y*ml"))[:1]]
    if items and not yaml:  # other tests ran, and no YAML was passed over: nothing to explain
        return None
    where = f" (the YAML under {os.path.relpath(yaml[0].parent, here)} does not look like a spec: it needs top-level " \
            f"id and {', '.join(SPEC_KEYS)})" if yaml else ""
    return (f"pytest-ncp: no spec test collected{where}; spec tests come from --ncp-specs / ini ncp_specs (now: "
            f"{configured}) and the spec files and folders named on the command line")


class SpecFile(pytest.File):
    """A YAML spec, collected through ``pytest_collect_file`` (see ``is_spec_file``)."""

    @property
    def ncp(self) -> NcpSession:
        return self.config.stash[SESSION_KEY]

    def collect(self) -> Iterable[pytest.Item]:
        from ..core.spec import SpecError, load_spec

        try:
            spec = load_spec(self._display_path())
            self.ncp.claim_id(spec)
        except SpecError as exc:
            yield InvalidSpecItem.from_parent(self, name="spec", message=str(exc))
            return
        repeats = self.ncp.settings.run.repeats
        for repeat in range(repeats):
            key = _key(spec.id, repeat, repeats)
            yield EpisodeItem.from_parent(self, name=f"episode[{key}]", spec=spec, repeat=repeat)
            for index, commitment in enumerate(spec.commitments):
                yield CommitmentItem.from_parent(self, name=f"commitment[{key}:{commitment.id}]", spec=spec,
                                                 repeat=repeat, commitment_id=commitment.id, index=index)


    def _display_path(self) -> Path:
        # Headlines name the spec as the user would type it: relative to where pytest was started.
        here = Path(self.config.invocation_params.dir)
        try:
            return self.path.relative_to(here)
        except ValueError:
            return self.path


def _nodeid(kwargs: dict[str, Any]) -> dict[str, Any]:
    # Given as a string, the node id is parsed the way pytest parses the ids it stored (the --lf
    # cache, ids pasted on the command line): pytest 9.2 compares structured ids, and a name like
    # ``episode[caligari]`` built by the default child() would keep its brackets unparsed.
    kwargs.setdefault("nodeid", f"{kwargs['parent'].nodeid}::{kwargs['name']}")
    return kwargs


class _NcpItem(pytest.Item):
    """What every narrative test shares: the session, and a failure whose message is the whole report."""

    @property
    def ncp(self) -> NcpSession:
        return self.config.stash[SESSION_KEY]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (NarrativeFailure, EpisodeError)):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class _SpecItem(_NcpItem):
    def __init__(self, *, spec: NarrativeSpec, repeat: int, **kwargs: Any):
        super().__init__(**_nodeid(kwargs))
        self.spec, self.repeat = spec, repeat
        self.add_marker(MARKER)
        self.result: EpisodeResult | None = None

    def setup(self) -> None:
        result = self.ncp.result(self.spec, self.repeat)
        if result is None:  # --ncp-sequential stopped the session before this episode started
            self.ncp.unstarted_skip(self)
            return
        self.result = result
        self._properties(result)
        if result.cut_by is not None:  # the budget's outcome: neither a pass nor the narrator's failure
            when = f"cut short at turn {result.turns}" if result.turns else "not started: it would not fit"
            pytest.skip(f"{self.spec.id}: {when} by the cost cap (--ncp-{result.cut_by}): not judged")
        if result.termination.value == "cancelled":  # the budget's too: the sequential gate had decided
            pytest.skip(f"{self.spec.id}: cancelled at turn {result.turns} after the sequential gate decided "
                        "(--ncp-sequential-cancel): not judged")
        if result.unknown:  # an auditor, model or player error, a player fault, a contested conflict
            from ..report.text import failure_text, headline

            if self.ncp.settings.max_error_rate > 0:
                pytest.skip(f"unknown outcome, counted against the error budget: {headline(result)}")
            if result.error is None:
                raise EpisodeError(failure_text(result))
            first = self.ncp.first_error(result.error.kind, result.error.message, self.nodeid)
            if first is not None:  # said in full once; every other test it stops names where
                raise EpisodeError(f"{headline(result)}\n{result.error.kind} error, the same as in {first} (shown "
                                   "there in full)")
            raise EpisodeError(self._error_text())

    def _error_text(self) -> str:
        """Headline, the error, the trace path; the traceback only with -vv (it is in the trace)."""
        from ..report.text import headline
        from ..core.safe_text import printable

        assert self.result is not None and self.result.error is not None
        error = self.result.error
        text = f"{headline(self.result)}\n\n{error.kind} error:\n{error.message}"
        if self.result.trace:
            text += f"\n\ntrace: {self.result.trace}" + (" (the traceback is in it; -vv shows it here)"
                                                          if error.traceback else "")
        if error.traceback and (self.config.option.verbose or 0) >= 2:
            text += f"\n\n{error.traceback}"
        return printable(text)

    def _properties(self, result: EpisodeResult) -> None:
        pass

    def _fail(self, text: str, headline: str) -> None:
        if self.ncp.settings.gate is not None:
            pytest.xfail(headline)
        raise NarrativeFailure(text)


class EpisodeItem(_SpecItem):
    def _properties(self, result: EpisodeResult) -> None:
        data = result.record.model_dump(mode="json", exclude_unset=True)
        for key in ("spec_id", "repeat", "turns", "termination", "progress", "satisfied", "tokens", "cost_usd", "trace"):
            self.user_properties.append((PROPERTY_PREFIX + key, data[key]))
        self.user_properties.append((PROPERTY_PREFIX + "survived", result.survived))
        # who owns the outcome (DESIGN 7.5)
        self.user_properties.append((PROPERTY_PREFIX + "owner", result.owner.value))
        # The whole episode record, so the controller can merge results.json and the gate under xdist.
        self.ncp.attach(episode_key(result.spec.id, result.repeat))
        self.user_properties.append((PROPERTY_PREFIX + "episode", json.dumps(data, ensure_ascii=False)))

    def runtest(self) -> None:
        from ..report.text import failure_text, headline, transcript_text

        assert self.result is not None
        self.add_report_section("call", "ncp transcript", transcript_text(self.result))
        if self.result.termination.is_conflict:
            self._fail(failure_text(self.result), headline(self.result))
        if self.result.error:  # only a narrator error gets here (setup raised the others): the narrator's fault
            self._fail(self._error_text(), headline(self.result))


class CommitmentItem(_SpecItem):
    def __init__(self, *, commitment_id: str, index: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.commitment_id, self.index = commitment_id, index

    def _properties(self, result: EpisodeResult) -> None:
        self.user_properties.append((PROPERTY_PREFIX + "commitment", self.commitment_id))
        self.user_properties.append((PROPERTY_PREFIX + "state", result.commitment_states[self.commitment_id]))
        if self.ncp.attach(episode_key(result.spec.id, result.repeat)):
            # Its episode test was not selected (``-k commitment``): this test carries the record, so the
            # episode still counts in the error budget, the gate and results.json.
            record = result.record.model_dump_json(exclude_unset=True)
            self.user_properties.append((PROPERTY_PREFIX + "episode", record))

    def runtest(self) -> None:
        from ..report.text import commitment_text

        assert self.result is not None
        commitment = self.spec.commitment(self.commitment_id)
        state = self.result.commitment_states[self.commitment_id]
        if state == "VIOLATED":
            text = commitment_text(self.result, self.commitment_id)
            self._fail(text, text.splitlines()[0])
        if commitment.kind == "achievement" and state != "SATISFIED":
            # Not a broken promise: the episode stopped (its turn limit, the script's end, a failure elsewhere)
            # before the story got there. Only a violation fails a commitment's test.
            pytest.skip(f"{self.spec.id}: achievement {self.commitment_id} not reached in {self.result.turns} "
                        f"turn(s) (the episode ended: {self.result.termination.value})")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = self.spec.line_of("commitments", self.index)
        return self.path, (line - 1 if line else None), self.name


class InvalidSpecItem(pytest.Item):
    """Stands for a spec that failed validation: an error for that file only; the rest still runs."""

    def __init__(self, *, message: str, **kwargs: Any):
        super().__init__(**_nodeid(kwargs))
        self.message = message
        self.add_marker(MARKER)

    def setup(self) -> None:
        raise SpecInvalid(self.message)

    def runtest(self) -> None:  # pragma: no cover - setup always raises
        raise SpecInvalid(self.message)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, "invalid spec"


# --- stored failures (--ncp-failures) ------------------------------------------------------------------


def is_failure_file(config: pytest.Config, folder: Path | None, file_path: Path) -> bool:
    return folder is not None and file_path.suffix == ".jsonl" and file_path.resolve().parent == folder.resolve()


def add_failures_path(config: pytest.Config, folder: Path | None, only: bool = False) -> None:
    """Stored failures are collected (and run first, like --ff) when the session names the folder and no
    test paths were given on the command line (as the configured specs), or with --ncp-failures-only."""
    if folder is None or not folder.is_dir() or not any(folder.glob("*.jsonl")):
        return
    if config.args_source == pytest.Config.ArgsSource.ARGS and not only:
        return
    _add_arg(config, folder)


def failures_first(config: pytest.Config, items: list[pytest.Item], only: bool) -> None:
    """Stored failures run before everything else; with --ncp-failures-only, nothing else runs."""
    forks = [i for i in items if isinstance(i, ForkItem)]
    rest = [i for i in items if not isinstance(i, ForkItem)]
    if only and rest:
        config.hook.pytest_deselected(items=rest)
        rest = []
    items[:] = forks + rest


class FailureFile(pytest.File):
    """A stored failure ``<spec-id>@t<turn>.jsonl`` of the failures folder: one ``fork[...]`` test."""

    def collect(self) -> Iterable[pytest.Item]:
        from ..engine.failures import read_failure
        from ..core.traces import RunFileError

        try:
            stored = read_failure(self.path)
        except RunFileError as exc:
            yield InvalidSpecItem.from_parent(self, name="failure", message=str(exc))
            return
        yield ForkItem.from_parent(self, name=f"fork[{stored.name}]", stored=stored)


class ForkItem(_NcpItem):
    """Samples the stored failure's turn ``--ncp-fork-samples`` times from the state before it; passes when
    no sample is a confirmed conflict. Auditor/model errors are unknown outcomes (setup errors)."""

    def __init__(self, *, stored: Any, **kwargs: Any):
        super().__init__(**_nodeid(kwargs))
        self.stored = stored
        self.add_marker(MARKER)
        self.outcome: Any = None

    def setup(self) -> None:
        from ..engine.fork import ForkError
        from ..core.spec import SpecError

        self.user_properties.append((PROPERTY_PREFIX + "fork", self.stored.path.name))
        try:
            self.outcome = self.ncp.fork(self.stored).result()
        except (ForkError, SpecError) as exc:
            raise EpisodeError(f"{self.name}: cannot fork this stored failure: {exc}\n(remove it with "
                               f"`ncp failures prune {self.stored.path.parent}` or delete {self.stored.path})") from None
        unknown = [r for r in self.outcome.results if r.error and r.error.kind != "narrator"]
        if unknown:
            from ..core.safe_text import printable

            e = unknown[0].error
            raise EpisodeError(printable(f"{self.name}: {len(unknown)} sample(s) could not be judged: "
                                         f"{e.kind} error: {e.message}"))
        doubtful = [r for r in self.outcome.unknown if not r.error]
        if doubtful:  # a split verdict or a player fault at the forked turn: nobody's verdict on the narrator
            raise EpisodeError(f"{self.name}: {len(doubtful)} sample(s) could not be judged: "
                               + ", ".join(sorted({r.termination.value for r in doubtful})))

    def runtest(self) -> None:
        from ..core.safe_text import printable

        outcome = self.outcome
        bad = outcome.conflicts + [r for r in outcome.results if r.error and r.error.kind == "narrator"]
        if not bad:  # a failure's message already holds these lines
            self.add_report_section("call", "ncp fork", "\n".join(outcome.lines()))
        if bad:
            raise NarrativeFailure(printable("\n".join(
                [f"{self.name}: still failing: {len(bad)} of {len(outcome.results)} sample(s) at turn "
                 f"{self.stored.turn} ({self.stored.path})", *outcome.lines()[1:]])))


def bundled_args(config: pytest.Config, specs: list[Path]) -> None:
    """``pytest ncp-bench`` (or ``ncp-bench/caligari.yaml``, a node id in it): the benchmark installed with the
    package, named like a path in any directory. The argument becomes the installed folder and, like
    ``--ncp-specs=ncp-bench``, a spec path (``specs`` is the session's list of them)."""
    from ..core.bundled import BENCH, bundled_folder, bundled_name, resolve

    for i, arg in enumerate(config.args):
        path, sep, rest = arg.partition("::")
        if bundled_name(path) != BENCH or Path(path).is_absolute():
            continue
        config.args[i] = str(resolve(path)) + sep + rest
        if bundled_folder(BENCH) not in specs:
            specs.append(bundled_folder(BENCH))
