"""Re-judge recorded transcripts with another auditor model, without calling the narrator again.

The paper's auditor-robustness ablation runs several auditor models over the *same* narrator
transcripts. ``ncp reaudit`` does that from any finished run: each trace's narrator responses are
played back turn by turn (the opening as turn 0 when there was one) by :class:`ReplayNarrator`, the
player's recorded inputs by a :class:`~pytest_ncp.engine.players.ReplayPlayer`, and a normal
:class:`~pytest_ncp.engine.episode.Episode` audits them with the new auditor, writing results.json and
traces like any run (``config["reaudit_of"]`` names the source).

The new auditor may judge differently from the old one. When it flags a conflict earlier, the
episode ends there, as any episode would. When it would go on past the last recorded turn (the
source episode ended in a conflict, or succeeded, before the turn limit), there is nothing recorded
to judge: the episode ends as a *player* error there (an unknown outcome, censored at its last turn),
never as ``script_exhausted`` or any other "survived" ending. The same holds for a source episode
that ended in an *error* (or was interrupted). Only a source whose scripted player ran out of inputs
ends its re-audit as ``script_exhausted``.

A simulated player's inputs are replayed as they were played, with the source's screen records: a turn the
source played with an unfair input stays unfair, so a conflict the new auditor confirms there is still a
player fault, never the narrator's. The source's ``--audit-votes`` are kept.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..core.config import RunConfig, episode_key, episode_name
from ..core.options import default
from .players import PlayerView, ReplayPlayer
from ..analysis.results import load_results, results_path
from ..core.traces import RunFileError, find_spec_file, read_trace, resolve_trace

if TYPE_CHECKING:
    from .episode import EpisodeResult
    from ..core.spec import NarrativeSpec


@dataclass(frozen=True)
class RecordedEpisode:
    """A finished episode's transcript, read back from its trace."""

    trace: Path
    spec_id: str
    spec_path: str | None
    repeat: int
    max_turns: int
    config: dict[str, Any]
    opening: str | None
    exchanges: tuple[tuple[str, str], ...]  # (player input, narrator response) for turns 1..n
    termination: str | None                 # of the source episode; None when its trace has no end
    screens: dict[int, dict[str, Any]] = field(default_factory=dict)  # a simulated player's screened inputs

    @property
    def cut_short(self) -> bool:
        """The transcript ended for a reason other than the narrator's own play (error, interruption)."""
        return self.termination in (None, "error")


def read_recorded(path: str | Path) -> RecordedEpisode:
    """Parse one trace; RunFileError names the file and the problem."""
    path = Path(path)
    start: dict[str, Any] | None = None
    opening: str | None = None
    exchanges: list[tuple[str, str]] = []
    screens: dict[int, dict[str, Any]] = {}
    termination: str | None = None
    for event in read_trace(path, strict=True).events:
        kind = event["event"]
        if kind == "start":
            start = event
        elif kind == "turn":
            turn = int(event.get("turn", -1))
            if turn == 0:
                opening = str(event.get("response") or "")
            elif turn == len(exchanges) + 1:
                exchanges.append((str(event.get("player_input") or ""), str(event.get("response") or "")))
                if isinstance(event.get("screen"), dict):
                    screens[turn] = event["screen"]
            else:
                raise RunFileError(f"{path}: turn {turn} follows turn {len(exchanges)}; the trace is out of "
                                   "order or was edited")
        elif kind == "end":
            termination = str(event.get("termination"))
        elif kind == "error" and termination is None:
            termination = "error"
    if start is None or "spec_id" not in start:
        raise RunFileError(f"{path}: no start event with a spec_id; is this an ncp episode trace?")
    return RecordedEpisode(
        trace=path, spec_id=str(start["spec_id"]), spec_path=start.get("spec_path"),
        repeat=int(start.get("repeat", 0)), max_turns=int(start.get("max_turns") or 100),
        config=dict(start.get("config") or {}), opening=opening, exchanges=tuple(exchanges),
        termination=termination, screens=screens,
    )


def find_traces(source: str | Path) -> tuple[list[Path], dict[str, Any] | None]:
    """The traces a source names, and the source run's config when results.json is available.

    ``source`` may be a run directory (with results.json, or with only traces/), a results.json
    file, a directory of ``*.jsonl`` traces, or a single trace file. Errored episodes that recorded
    no trace (they never started) are left out.
    """
    src = Path(source)
    if src.is_file() and src.suffix == ".jsonl":
        return [src], None
    results = results_path(src)
    if results.is_file():
        run = load_results(results)
        paths, missing = [], []
        for e in run.episodes:
            if not e.trace and e.termination == "error":
                continue  # the episode could not even start (e.g. the narrator failed to build): nothing to judge
            found = resolve_trace(e.trace, results.parent)
            if found is None:
                missing.append(f"{episode_name(e.spec_id, e.repeat)} ({e.trace or 'no trace recorded'})")
            else:
                paths.append(found)
        if missing:
            raise RunFileError(f"{results}: trace(s) not found: {', '.join(missing)}; keep the run's traces/ "
                               "directory next to results.json, or pass the traces directory instead")
        return paths, run.config.model_dump(mode="json", exclude_unset=True)
    if src.is_dir():
        traces = sorted((src / "traces").glob("*.jsonl")) or sorted(src.glob("*.jsonl"))
        if traces:
            return traces, None
        raise RunFileError(f"{src}: no results.json and no *.jsonl traces here (expected a run directory "
                           "written by ncp run --out DIR, its results.json, or its traces/ directory)")
    raise RunFileError(f"{src}: no such file or directory")


def resolve_specs(recorded: Sequence[RecordedEpisode], spec_paths: Sequence[str | Path] | None,
                  source: str | Path) -> tuple[dict[str, NarrativeSpec], list[str]]:
    """The spec of every recorded episode: from ``spec_paths`` (``--specs``, when files moved) or from
    each trace's recorded ``spec_path``. Returns (spec_id -> spec, problems)."""
    from ..core.spec import SpecError, load_spec, load_specs

    problems: list[str] = []
    if spec_paths:
        try:
            specs, errors = load_specs(spec_paths)
        except SpecError as exc:
            return {}, [str(exc)]
        loaded = {s.id: s for s in specs}
        missing = sorted({r.spec_id for r in recorded} - loaded.keys())
        for rid in missing:
            problems.append(f"spec {rid!r}: not found under {' '.join(map(str, spec_paths))}")
        if missing:  # a broken file there may be the missing spec; otherwise it does not matter here
            problems += [str(e) for e in errors]
        return loaded, problems
    by_id: dict[str, NarrativeSpec] = {}
    src = Path(source)
    for r in recorded:
        if r.spec_id in by_id:
            continue
        found = find_spec_file(r.spec_path, src if src.is_dir() else src.parent, r.trace.parent)
        if found is None:
            problems.append(f"{r.trace}: spec file {r.spec_path!r} (recorded spec_path of {r.spec_id!r}) not "
                            "found; pass --specs DIR where the spec files are now")
            continue
        try:
            spec = load_spec(found)
        except SpecError as exc:
            problems.append(str(exc))
            continue
        if spec.id != r.spec_id:
            problems.append(f"{found}: has id {spec.id!r}, but the trace {r.trace} recorded {r.spec_id!r}; "
                            "pass --specs DIR with the right files")
            continue
        by_id[r.spec_id] = spec
    return by_id, problems


class ReplayNarrator:
    """Answers with the recorded responses, turn by turn; the recorded opening as turn 0."""

    def __init__(self, recorded: RecordedEpisode):
        self.recorded = recorded

    def opening(self) -> str | None:
        return self.recorded.opening

    def respond(self, player_input: str, context: Any) -> str:
        turn = context.turn
        if not 1 <= turn <= len(self.recorded.exchanges):
            raise RuntimeError(f"no recorded response for turn {turn} in {self.recorded.trace}")
        said, response = self.recorded.exchanges[turn - 1]
        if said != player_input:
            # The replay player feeds the recorded inputs, so this means the trace is inconsistent.
            raise RuntimeError(f"{self.recorded.trace}: turn {turn} input {player_input!r} differs from the "
                               f"recorded {said!r}")
        return str(response)


class _RecordedPlayer(ReplayPlayer):
    """Replays the recorded inputs; past the last one, a transcript cut short by an error is an error."""

    def __init__(self, recorded: RecordedEpisode):
        super().__init__([said for said, _ in recorded.exchanges])
        self.recorded = recorded

    def next_input(self, view: PlayerView) -> str | None:
        said = super().next_input(view)
        if said is None and self.recorded.termination != "script_exhausted":
            # Only a source whose own script ran out ends here as script_exhausted. Any other source
            # (a conflict, a success, an error, an interruption) stopped before the new auditor would: the
            # turns past the recording were never played, so their outcome is unknown, not "survived".
            if self.recorded.cut_short:
                why = ("ended in error" if self.recorded.termination == "error"
                       else "has no end event (the run was interrupted)")
            else:
                why = f"ended as {self.recorded.termination}"
            raise RuntimeError(f"the source episode {why} after turn {len(self.recorded.exchanges)}: nothing "
                               f"recorded to judge past it ({self.recorded.trace})")
        return said


@dataclass(frozen=True)
class ReauditConfig(RunConfig):
    """A RunConfig that also names the run it re-judges (``config["reaudit_of"]`` in results.json)."""

    reaudit_of: str = ""


def reaudit_config(recorded: Sequence[RecordedEpisode], source_config: dict[str, Any] | None, *,
                   source: str | Path, auditor_model: str, api_base: str | None,
                   concurrency: int = default("concurrency"), timeout: float = default("timeout")) -> ReauditConfig:
    """The new run's settings: the source's narrator, player and limits, the new auditor."""
    src = dict(source_config or (recorded[0].config if recorded else {}))
    return ReauditConfig(
        narrator=src.get("narrator"), narrator_model=src.get("narrator_model"),
        player=src.get("player") or "scripted", player_model=src.get("player_model"),
        auditor_model=auditor_model, api_base=api_base,
        max_turns=max((r.max_turns for r in recorded), default=int(src.get("max_turns") or 100)),
        repeats=max((r.repeat + 1 for r in recorded), default=1),
        concurrency=concurrency, timeout=timeout, survival_turn=int(src.get("survival_turn") or 20),
        audit_votes=int(src.get("audit_votes") or 1), player_retries=int(src.get("player_retries", default("player-retries"))),
        reaudit_of=str(source),
    )


async def reaudit(recorded: Sequence[RecordedEpisode], specs: dict[str, NarrativeSpec], config: ReauditConfig,
                  *, out_dir: str | Path, on_episode: Callable[[EpisodeResult], None] | None = None,
                  client: Any = None) -> list[EpisodeResult]:
    """Audit every recorded transcript with ``config.auditor_model``; write ``out_dir`` as a run."""
    from .auditor import LLMAuditor
    from .episode import Episode
    from ..llm import ModelClient
    from .players import ScriptedPlayer
    from .runner import Runner

    client = client or ModelClient.from_config(config)
    # The Runner keeps results.json current as episodes end; the episodes themselves are built here
    # because each needs its own recorded narrator and player.
    runner = Runner(config, out_dir=Path(out_dir), narrator_factory=_built_per_trace,
                    auditor=LLMAuditor.from_config(config, client),
                    player_factory=lambda spec: ScriptedPlayer([]), client=client, on_episode=on_episode)
    bound = asyncio.Semaphore(config.concurrency)
    runner.expect(episode_key(r.spec_id, r.repeat) for r in recorded)

    async def one(r: RecordedEpisode) -> EpisodeResult:
        async with bound:
            assert runner.out_dir is not None and runner.auditor is not None
            episode = Episode.from_config(
                specs[r.spec_id], config, narrator=ReplayNarrator(r), player=_RecordedPlayer(r),
                auditor=runner.auditor, client=client, repeat=r.repeat, max_turns=r.max_turns,
                trace_path=runner.out_dir / "traces" / f"{episode_key(r.spec_id, r.repeat)}.jsonl",
                recorded_screens=r.screens,
            )
            result = await episode.run()
            runner.record(result)
            return result

    done = list(await asyncio.gather(*(one(r) for r in recorded)))
    runner.end()
    return done


def _built_per_trace() -> Any:
    raise RuntimeError("a re-audit builds one ReplayNarrator per recorded trace")


def check_distinct(recorded: Sequence[RecordedEpisode]) -> list[str]:
    """Two traces of the same (spec_id, repeat) would overwrite each other in the new run."""
    seen: dict[tuple[str, int], Path] = {}
    problems = []
    for r in recorded:
        key = (r.spec_id, r.repeat)
        if key in seen:
            problems.append(f"{r.trace}: {episode_name(*key)} is also recorded in {seen[key]}; "
                            "re-audit one run at a time")
        seen[key] = r.trace
    return problems


__all__ = ["RecordedEpisode", "ReplayNarrator", "ReauditConfig", "check_distinct", "find_traces",
           "read_recorded", "reaudit", "reaudit_config", "resolve_specs"]
