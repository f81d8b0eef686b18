"""The plugin's per-session state: runs episodes once, merges episode records, applies the gate.

The hooks (``plugin/__init__.py``) call into this object. Episodes run on a background event loop (every
selected episode starts at once, under the concurrency bound) while pytest reports items in order.
Episode records travel in each report's ``user_properties``, so the controller merges results.json
and computes the gate the same way with or without pytest-xdist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pytest

from .options import PROPERTY_PREFIX, Settings

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord
    from ..engine.episode import EpisodeResult
    from ..analysis.compare import Comparison
    from ..analysis.results import RunResults, Stopped
    from ..analysis.verdict import Verdict
    from ..engine.runner import BackgroundRunner
    from ..core.spec import NarrativeSpec


def start_demo_server(hook: Any) -> Any:
    """A started scripted server answering every role with the demo script, then with the rules of the
    project's ``pytest_ncp_demo_server`` hooks (``plugin/hooks.py``), which win over the demo's."""
    from ..testing import ScriptedModelServer
    from ..testing.demo import install_demo_script

    server = ScriptedModelServer().start()
    install_demo_script(server)
    if hook is not None:
        hook.pytest_ncp_demo_server(server=server)
    return server


class NcpSession:
    def __init__(self, settings: Settings, *, is_worker: bool, trace_root: Path, workers: int = 0,
                 stop_file: str | None = None, hook: Any = None):
        from .sequential import SessionStop

        self.settings = settings
        self.is_worker = is_worker
        self.workers = workers  # pytest-xdist workers of the session, 0 without (each has its own model client)
        self.stop = SessionStop(settings, is_worker=is_worker, stop_file=stop_file)  # --ncp-sequential
        self.trace_root = settings.report or trace_root
        self.episodes: dict[str, EpisodeRecord] = {}  # episode key (spec--rN) -> its record (from reports)
        self.expected: set[str] = set()  # episode keys of the selected spec tests (results.json: complete?)
        self._attached: set[str] = set()  # episodes whose record a test of this process already carries
        self.verdict: Verdict | None = None  # the session's verdict, once finish() decided it
        self.comparison: Comparison | None = None
        self.comparison_error: str | None = None
        self.interrupted = False
        self.started = False  # the test loop began (not --collect-only or --fixtures): finish() decides
        self._ids: dict[str, str] = {}
        self._collected: dict[str, NarrativeSpec] = {}  # the spec set of results.json's provenance
        self._background: BackgroundRunner | None = None
        self._server: Any = None
        self.hook = hook  # pytest's hook relay: conftest.py's pytest_ncp_demo_server scripts the demo's models
        self._canaries: Any = None  # future of the auditor canaries (controller only)
        self.canary_summary: dict[str, Any] | None = None
        self.canary_error: str | None = None
        self.canary_cut_by: str | None = None  # "max-cost": the cost cap stopped the canaries
        self.fork_outcomes: dict[str, bool] = {}  # stored failure file name -> its fork test passed
        self.stored: list[Path] = []  # failures stored this session (--ncp-failures)
        self.selection: str | None = None  # how -k, -m, --lf, --deselect narrowed the tests (gate.selection)
        self.exit_code: int | None = None  # the verdict's exit code, once conclude() decided it
        self.gate_items_reported = False  # the verdict's items (gate.py) are in the report stream
        self.status_before_items: pytest.ExitCode | None = None  # pytest's exit status as the tests alone gave it
        self._errors: dict[tuple[str, str], str] = {}  # (error kind, message) -> the test that showed it in full
        self.preflight_failed = False  # a broken endpoint stopped the session before any episode: no verdict
        from datetime import datetime, timezone

        self.started_at = datetime.now(timezone.utc)  # results.json's provenance: when the session started
        self._provenance: dict[str, Any] | None = None
        self.history_error: str | None = None

    # --- collection ------------------------------------------------------------------------
    def claim_id(self, spec: NarrativeSpec) -> None:
        """Spec ids name episodes, traces and tests: a second file with the same id is invalid."""
        from ..core.spec import SpecError, SpecProblem

        owner = self._ids.setdefault(spec.id, str(spec.path))
        if owner != str(spec.path):
            raise SpecError([SpecProblem(str(spec.path), spec.line_of("id"), "id",
                                         f"duplicate spec id {spec.id!r} (also in {owner})")])
        self._collected[spec.id] = spec

    # --- running -----------------------------------------------------------------------------
    def _runner(self) -> BackgroundRunner:
        if self._background is None:
            from dataclasses import replace

            from ..engine.narrators import load_narrator
            from ..engine.runner import BackgroundRunner, Runner

            config = self.settings.run
            if config.max_cost is not None and self.workers:
                # Under xdist every worker has its own model client, and so has the controller when it audits the
                # canaries: the cost cap is shared out between them (cap_share), so together they stay within it.
                from ..engine.workers import cap_share

                config = replace(config, max_cost=cap_share(config.max_cost, self.workers,
                                                            canaries_apart=bool(self.settings.canaries)))
            if self.settings.demo:
                config = replace(config, api_base=self.demo_server().base_url)
            assert config.narrator, "spec tests are only collected with a narrator"
            runner = Runner(config, out_dir=self.trace_root, write_results=False,
                            narrator_factory=load_narrator(config.narrator))
            if self.stop.enabled:  # the session's decision, not the runner's: it reads the reports (sequential.py)
                runner.halt, runner.cancel = self.stop.halt, self.stop.cancel
            if self.settings.resume:
                self._resume(runner)
            self._background = BackgroundRunner(runner)
        return self._background

    def demo_server(self) -> Any:
        """The scripted server of ``--ncp-demo``, one per process: spec episodes and hand-written tests share it."""
        if self._server is None:
            self._server = start_demo_server(self.hook)
        return self._server

    def _resume(self, runner: Any) -> None:
        from ..engine.runner import ResumeMismatch
        from ..core.spec import load_specs

        specs, _ = load_specs(self.settings.specs)
        try:
            runner.resume(specs, force=self.settings.force, force_flag="--ncp-resume --ncp-force")
        except ResumeMismatch as exc:
            raise pytest.UsageError(f"pytest-ncp: {exc}") from None

    def prefetch(self, specs: Sequence[tuple[NarrativeSpec, int]]) -> None:
        """Start these episodes now; items then only wait for their own result."""
        runner = self._runner()
        if not self.is_worker and runner.runner.monitor is None:
            # Episodes run in this process: the runner reads them as they finish (the reports come later).
            runner.runner.monitor = self.stop.monitor(self.expected)
        for spec, repeat in specs:
            runner.submit(spec, repeat)

    def result(self, spec: NarrativeSpec, repeat: int) -> EpisodeResult | None:
        """The episode's result; None when a sequential decision stopped the session before it started."""
        return self._runner().result(spec, repeat)

    def first_error(self, kind: str, message: str, nodeid: str) -> str | None:
        """Where this process already reported the same error in full (a test's node id), or None the first time:
        a broken endpoint or auditor then reads as one error and its count, not hundreds of copies."""
        first = self._errors.get((kind, message))
        if first is None:
            self._errors[(kind, message)] = nodeid
        return first

    def unstarted_skip(self, item: pytest.Item) -> None:
        """Skip a test whose episode never started (the session stopped early); says so to the controller."""
        spec, repeat = getattr(item, "spec"), getattr(item, "repeat")
        item.user_properties.append(self.stop.unstarted_property(spec.id, repeat))
        pytest.skip(self.stop.skip_reason())

    def preflight(self) -> str | None:
        """Probe each endpoint the session will call once (``engine.preflight``), before any episode starts: the
        message that stops the session when one is broken, else None."""
        if not self.settings.run.narrator or self.settings.demo:
            return None
        from ..engine.narrators import load_narrator
        from ..engine.preflight import endpoint_problems, preflight_message

        problems = endpoint_problems(self.settings.run, load_narrator(self.settings.run.narrator), "--ncp-api-base")
        if not problems:
            return None
        self.preflight_failed = True
        return preflight_message(problems)

    # --- auditor canaries (docs/auditor.md): known answers audited beside the episodes -------------
    def start_canaries(self) -> None:
        if not self.settings.canaries or self.is_worker or self._canaries is not None:
            return
        from ..calibration.audit import pick_canaries, run_canaries
        from ..calibration.goldset import GoldSetError

        s = self.settings
        try:
            cases = pick_canaries(s.canary_set, s.canaries, seed=s.canary_seed)
        except GoldSetError as exc:
            self.canary_error = f"auditor canaries could not start: {exc}"
            return
        background = self._runner()
        auditor = background.runner.auditor
        assert auditor is not None
        self._canaries = background.run_coroutine(run_canaries(
            auditor, cases, model=s.run.auditor_model, seed=s.canary_seed, min_recall=s.min_canary_recall,
            concurrency=s.run.concurrency))

    def _collect_canaries(self) -> None:
        if self._canaries is None or self.canary_summary is not None or self.interrupted:
            return
        try:
            self.canary_summary = self._canaries.result()
        except Exception as exc:  # noqa: BLE001 - reported: the canary gate then fails (or the cap says it stopped them)
            from ..calibration.audit import canaries_failed

            failed = canaries_failed(exc)
            self.canary_error, self.canary_cut_by = failed.error, failed.cut_by

    def junit_properties(self) -> list[tuple[str, Any]]:
        from ..calibration.audit import junit_properties

        return junit_properties(self.canary_summary, self.canary_error, PROPERTY_PREFIX) if self.settings.canaries else []

    def fork(self, stored: Any) -> Any:
        """Start (once) the fork of a stored failure (``failures.StoredFailure``); a future of its ForkOutcome."""
        background = self._runner()
        runner = background.runner
        factory, auditor = runner.narrator_factory, runner.auditor
        assert factory is not None and auditor is not None, "the session's runner is built with both"

        async def sample() -> Any:
            from ..engine.fork import fork

            state = stored.state()
            spec = state.load_spec()
            try:
                return await fork(state, spec, runner.config, narrator_factory=factory, auditor=auditor,
                                  samples=self.settings.fork_samples, client=runner.client,
                                  out_dir=Path(self.trace_root) / "forks")
            finally:
                if runner.cassettes is not None:
                    runner.cassettes.flush()

        return background.call(f"fork:{stored.path}", sample)

    # --- merging (controller) ------------------------------------------------------------------
    def record_report(self, nodeid: str, when: str, failed: bool, properties: Sequence[tuple[str, Any]]) -> None:
        props = dict(properties)
        unstarted = props.get(PROPERTY_PREFIX + "unstarted")
        if unstarted is not None and not self.is_worker:
            self.stop.skipped(str(unstarted), self.expected)
        forked = props.get(PROPERTY_PREFIX + "fork")
        if forked is not None and when == "call":
            self.fork_outcomes[forked] = not failed  # a fork never joins the episodes (metrics, results.json)
        episode = props.get(PROPERTY_PREFIX + "episode")
        if episode is None or not (when == "call" or (when == "setup" and failed)):
            return
        from ..core.records import EpisodeRecord

        record = EpisodeRecord.model_validate_json(episode)
        key = record.key
        if key in self.episodes:
            return  # the same episode, carried by another of its tests
        self.episodes[key] = record
        if not self.is_worker:
            self.stop.read(record, self.expected)
        self._store_failure(record)
        if not self.is_worker and self.settings.report:
            self.write_results(stopped="running")

    def expect(self, keys: Iterable[str]) -> None:
        """Episodes the session's selected spec tests read: results.json is complete once all have reported."""
        self.expected.update(keys)

    def attach(self, key: str) -> bool:
        """True the first time a test of this process asks to carry episode ``key``'s record: every
        episode reaches the controller once, whichever of its tests ran (``-k commitment`` included)."""
        if key in self._attached:
            return False
        self._attached.add(key)
        return True

    def _store_failure(self, record: EpisodeRecord) -> None:
        """--ncp-failures: keep the fork point of a confirmed conflict (on the controller, once per episode)."""
        failure = record.failure
        if self.is_worker or self.settings.failures is None or failure is None or not record.trace:
            return
        if not record.termination.is_conflict:
            return
        from ..engine.failures import store_failure

        try:
            path = store_failure(record.trace, failure.turn, self.settings.failures)
        except (OSError, ValueError, KeyError):
            return  # the episode's own test already reports the conflict; a missing trace only means no fixture
        if path is not None:
            self.stored.append(path)

    def episode_records(self) -> list[EpisodeRecord]:
        return sorted(self.episodes.values(), key=lambda e: (e.spec_id, e.repeat))

    def provenance(self) -> dict[str, Any]:
        """results.json's provenance: the rootdir's git commit and branch, the fingerprints (read once)."""
        if self._provenance is None:
            from ..core.spec import load_specs
            from ..engine.provenance import collect_provenance

            # The specs this session collected (a file named on the command line is the whole set); a pytest-xdist
            # controller collects none, and reads the configured spec paths.
            specs = list(self._collected.values()) or load_specs(self.settings.specs)[0]
            self._provenance = collect_provenance(self.settings.run.to_dict(), specs,
                                                  branch=self.settings.options.get("branch"), now=self.started_at)
        return self._provenance

    def results(self, stopped: Stopped | None = None, verdict: dict[str, Any] | None = None) -> RunResults:
        """The session's results (``stopped``, ``verdict``: see ``analysis.results.build_results``)."""
        from ..analysis.results import build_results

        run = self.stop.run
        return build_results(self.settings.run.to_dict(), self.episode_records(),
                             survival_turn=self.settings.run.survival_turn, expected=self.expected - self.stop.unstarted,
                             stopped=stopped, canaries=self.canary_summary,
                             sequential=run.to_dict() if run is not None else None, provenance=self.provenance(),
                             verdict=verdict)

    def record_history(self, stopped: Stopped | None) -> None:
        """``--ncp-history``: record the session's run; a problem is said as a warning (the verdict stands)."""
        from ..analysis.history import HistoryError, add_run, open_history

        path = self.settings.options.get("history")
        if not path:
            return
        try:
            conn = open_history(path)
            try:
                add_run(conn, self.results(stopped), self.settings.report.resolve() if self.settings.report else None)
            finally:
                conn.close()
        except (HistoryError, OSError, ValueError) as exc:
            self.history_error = f"--ncp-history {path}: the run was not recorded: {exc}"

    def write_results(self, stopped: Stopped | None = None, verdict: dict[str, Any] | None = None) -> Path:
        from ..analysis.results import write_results

        assert self.settings.report is not None
        return write_results(self.settings.report, self.results(stopped, verdict))

    def conclude(self) -> int:
        """Stop the episodes' loop and decide the verdict, once (at the end of the test loop, or at session
        finish when the loop never ended); the verdict's exit code."""
        if self.exit_code is None:
            self.close()
            self.exit_code = self.finish()
        return self.exit_code

    def finish(self) -> int:
        """On the controller: the session's verdict (``analysis.verdict.decide``) and its report files.

        Returns the verdict's exit code: 0, ``EXIT_FAILED`` (the gate, the canaries or the baseline failed or
        could not decide, the session is incomplete, a narrator error without a gate), or
        ``EXIT_ERROR_BUDGET`` (too many episodes could not be judged). An interrupted session (Ctrl-C, collection
        errors: ``pytest_keyboard_interrupt`` set ``interrupted``) is incomplete whatever reported.
        """
        from ..analysis.verdict import BaselineResult, CanaryResult, decide
        from ..core.exit_codes import EXIT_OK

        if self.is_worker or self.preflight_failed or not (self.started or self.interrupted):
            return EXIT_OK  # a session that runs no test (--collect-only, --fixtures) has nothing to decide
        if self.settings.failures is not None and self.fork_outcomes:
            from ..engine.failures import record_passes

            record_passes(self.settings.failures, self.fork_outcomes)
        records = self.episode_records()
        if self.settings.baseline is not None and records:
            self._compare(self.settings.baseline)
        s, run = self.settings, self.stop.run
        self.verdict = decide(
            records, gate=s.gate, max_error_rate=s.max_error_rate, expected=self.expected - self.stop.unstarted,
            interrupted=self.interrupted,
            canaries=CanaryResult(self.canary_summary, self.canary_error, self.canary_cut_by) if s.canaries else None,
            baseline=BaselineResult(str(s.baseline), self.comparison, self.comparison_error,
                                    run.paired if run is not None else None) if s.baseline else None,
            sequential=run.gate if run is not None else None, early=run.summary() if run is not None else None,
            max_cost=s.run.max_cost)
        stopped: Stopped | None = "interrupted" if self.interrupted else None
        if self.settings.report and self.episodes:
            from ..report.html import write_html

            from ..report.verdict import verdict_record

            record = verdict_record(self.verdict, "session", self.selection)
            write_html([self.write_results(stopped, verdict=record)], self.settings.report / "report.html")
        if self.episodes:
            self.record_history(stopped)
        return self.verdict.exit_code

    def _compare(self, baseline: Path) -> None:
        from ..analysis.compare import compare_runs, comparison_turn
        from ..analysis.results import load_results
        from ..core.spec import load_specs

        try:
            base = load_results(baseline)  # a RunFileError (a ValueError) names the file and what is wrong
            specs, _ = load_specs(self.settings.specs)
            kinds = {s.id: {c.id: c.kind for c in s.all_commitments} for s in specs}
            run = self.settings.run
            given = self.settings.sources.get("survival-turn", "default") != "default"
            turn = comparison_turn((base.metrics.survival_turn, base.config.max_turns),
                                   (run.survival_turn, run.max_turns), run.survival_turn if given else None,
                                   "--ncp-survival-turn")
            self.comparison = compare_runs(base, self.results(), turn=turn, kinds=kinds)
        except (OSError, ValueError) as exc:
            self.comparison_error = f"ncp baseline {baseline}: cannot compare: {exc}"

    def summary_lines(self) -> list[str]:
        """The terminal summary (``report/session.py``): the table, stored failures, the verdict's lines."""
        from ..analysis.metrics import compute_metrics
        from ..report.session import session_lines, session_title, stored_failure_lines

        records = self.episode_records()
        metrics = compute_metrics(records, survival_turn=self.settings.run.survival_turn) if records else None
        from ..report.text import repeated_error_lines

        failures = [*stored_failure_lines(self.fork_outcomes, self.stored, samples=self.settings.fork_samples,
                                          folder=self.settings.failures), *repeated_error_lines(records)]
        if self.verdict is None:  # finish() did not run (a worker, or pytest stopped before sessionfinish)
            return failures
        lines = session_lines(verdict=self.verdict, metrics=metrics, failures=failures, report=self.settings.report,
                              title=session_title(self.settings.run, demo=self.settings.demo),
                              interrupted=self.interrupted)
        if self.settings.options.get("history"):
            lines.append(f"history: {self.history_error}" if self.history_error
                         else f"history: recorded in {self.settings.options['history']}")
        return lines

    def close(self) -> None:
        self._collect_canaries()  # before the loop stops: canaries share it with the episodes
        if self._background is not None:
            self._background.close()
        if self._server is not None:
            self._server.stop()
        self.stop.close()


# The session's NcpSession, on pytest's config; only set when a narrator is configured.
SESSION_KEY = pytest.StashKey[NcpSession]()
