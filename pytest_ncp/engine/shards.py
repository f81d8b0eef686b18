"""Splitting a run's episodes across machines (``ncp run --shard i/n``) and merging the parts (``ncp merge``).

A shard is a deterministic, balanced slice of the run's (spec, repeat) episodes: the episodes are
ordered by (spec id, repeat), and episode k goes to shard k mod n + 1. Every episode is in exactly
one shard, shard sizes differ by at most one, the repeats of one spec spread over shards, and the
slice does not depend on the order specs were found in. A sequential run's shards (``--sequential``) are dealt
from the run's seeded order instead (``analysis.sequential_run.episode_order``), so that each is a random
sample of the run; each stops on its own gate at alpha / n, and the merge combines their e-values
(``merge_sequential``; docs/gates.md, "Shards"). Each shard writes an ordinary run folder
whose results.json also says ``"shard": {"index": i, "count": n}``; ``merge_runs`` checks that the
parts belong to one run (same configuration bar the endpoint and cassette folder each machine used,
same shard count, none missing, no episode twice, each shard complete and holding exactly its slice) and
writes one results.json with traces copied beside it, whose metrics are those of the unsharded run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..core.config import Shard  # noqa: F401 - the value type lives with the run settings that carry it

if TYPE_CHECKING:
    from ..analysis.results import RunResults
    from ..core.records import EpisodeRecord


# Where each machine found its models and cassettes: allowed to differ between the shards of one run.
PLACES = frozenset({"api_base", "cassettes"})


class MergeError(ValueError):
    """The runs cannot be merged into one; the message says which and why."""


def merge_runs(sources: Sequence[str | Path], out: str | Path, *, allow_missing: bool = False,
               allow_incomplete: bool = False) -> tuple[Path, RunResults, list[str]]:
    """Merge the results of shard runs into ``out``; returns the results path, the merged results and notes
    worth printing. Each part is read with ``load_results`` and checked against its slice."""
    from ..analysis.results import build_results, write_results

    parts = _read_parts(sources)
    notes = _same_configuration(parts)
    count, missing = _shards(parts, allow_missing, notes)
    incomplete = _incomplete_parts(parts, count if count and not missing else None)
    if incomplete and not allow_incomplete:
        raise MergeError("\n".join([f"{len(incomplete)} shard(s) are incomplete; their missing episodes may be the "
                                    "failing ones:", *(f"  {why}" for _, why in incomplete),
                                    "Finish them (the same ncp run command plus --resume), or pass "
                                    "--allow-incomplete to merge them anyway (the merged results.json then "
                                    "says complete: false)"]))
    for _, why in incomplete:
        notes.append(f"merged although incomplete (--allow-incomplete): {why}")
    out = Path(out)
    first = parts[0][1]
    sequential = _sequential(parts)
    merged = build_results(
        first.config.model_dump(mode="json", exclude_unset=True), _episodes(parts, out),
        survival_turn=20 if first.config.survival_turn is None else first.config.survival_turn,
        expected={k for _, data in parts for k in (data.expected or data.finished)},
        # Not complete when a shard, or part of one, is not there: the merged figures cover less than the run.
        stopped="unfinished" if incomplete or missing else None,
        merge={"sources": [str(f) for f, _ in parts], "incomplete": [str(f) for f, _ in incomplete],
               "missing_shards": [f"{i}/{count}" for i in missing]},
        sequential=sequential,
        # The shards of one run share commit, branch and fingerprints: the first one's stand for the run.
        provenance=first.provenance.model_dump(mode="json", exclude_unset=True) if first.provenance else None)
    return write_results(out, merged), merged, notes


def _sequential(parts: Sequence[tuple[Path, RunResults]]) -> dict[str, Any] | None:
    """The merged sequential record of sequential shards (None when none is); MergeError for a mix."""
    from ..analysis.sequential_run import merge_sequential

    records = [d.sequential for _, d in parts]
    if all(r is None for r in records):
        return None
    if any(r is None for r in records):
        raise MergeError("some of the runs were sequential (--sequential) and some not: merge only shards of one run")
    return merge_sequential([r.model_dump(mode="json") for r in records if r is not None]).record


def _read_parts(sources: Sequence[str | Path]) -> list[tuple[Path, RunResults]]:
    from ..analysis.results import load_results, results_path
    from ..core.traces import RunFileError

    if not sources:
        raise MergeError("nothing to merge: give the run folders of the shards")
    parts: list[tuple[Path, RunResults]] = []
    for source in sources:
        file = results_path(source)
        if not file.exists():
            raise MergeError(f"{source}: no results.json (is it the --out folder of a run?)")
        try:
            parts.append((file, load_results(file)))
        except RunFileError as exc:
            raise MergeError(str(exc)) from None
    return parts


def _same_configuration(parts: Sequence[tuple[Path, RunResults]]) -> list[str]:
    """MergeError unless every part was run with the first's configuration (bar ``PLACES``); the notes."""
    first_file, first = parts[0]
    notes: list[str] = []
    for file, data in parts[1:]:
        a, b = first.config.model_dump(mode="json"), data.config.model_dump(mode="json")
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        # The fingerprint hashes the settings, places too (api_base): it differs exactly when a setting does,
        # so the settings are named, and the fingerprint only when what it covers is not listed in the files.
        named = [k for k in diff if k not in PLACES and k != "fingerprint"]
        if not named and "fingerprint" in diff and _unplaced(a) != _unplaced(b):
            named = ["fingerprint (a setting these results files do not list)"]
        if named:
            raise MergeError(f"{file} and {first_file} were run with different configurations "
                             f"(differing: {', '.join(named)}); merge only shards of one run")
        if "api_base" in diff and "api_base differs" not in " ".join(notes):
            notes.append("api_base differs between shards (each machine had its own endpoint); "
                         f"the merged config keeps {first.config.api_base!r}")
    return notes


def _unplaced(config: dict[str, Any]) -> str:
    """The fingerprint of a recorded configuration, its places (``PLACES``) left out."""
    from ..core.config import config_fingerprint

    return config_fingerprint({k: (None if k in PLACES else v) for k, v in config.items()})


def _shards(parts: Sequence[tuple[Path, RunResults]], allow_missing: bool,
            notes: list[str]) -> tuple[int | None, list[int]]:
    """The shard count (None: not shards) and the missing shard indexes; MergeError for a shard given twice,
    different counts, or missing shards without ``allow_missing``."""
    counts = {d.shard.count if d.shard else None for _, d in parts}
    if len(counts) > 1:
        raise MergeError(f"the runs were split into different numbers of shards ({sorted(map(str, counts))})")
    count = counts.pop()
    if not count:
        return None, []
    seen: dict[int, Path] = {}
    for file, data in parts:
        assert data.shard is not None  # every part has a shard record: the counts agree and are not None
        index = data.shard.index
        if index in seen:
            raise MergeError(f"shard {index}/{count} is given twice: {seen[index]} and {file}")
        seen[index] = file
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        message = f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing"
        if not allow_missing:
            raise MergeError(message + " (pass --allow-missing to merge the others anyway)")
        notes.append(message + ": the merged metrics cover the other shards only")
    return count, missing


def _episodes(parts: Sequence[tuple[Path, RunResults]], out: Path) -> list[EpisodeRecord]:
    """Every part's episode records, their traces copied to ``out/traces``; MergeError for an episode twice."""
    from ..core.traces import resolve_trace

    episodes: dict[tuple[str, int], EpisodeRecord] = {}
    where: dict[tuple[str, int], Path] = {}
    (out / "traces").mkdir(parents=True, exist_ok=True)
    for file, data in parts:
        for entry in data.episodes:
            key = (entry.spec_id, entry.repeat)
            if key in episodes:
                raise MergeError(f"episode {key[0]}[r{key[1]}] is in both {where[key]} and {file}")
            trace = resolve_trace(entry.trace, file.parent)
            if trace is not None:
                target = out / "traces" / trace.name
                if trace.resolve() != target.resolve():
                    shutil.copy2(trace, target)
                entry = entry.model_copy(update={"trace": str(target)})
            episodes[key], where[key] = entry, file
    return list(episodes.values())


def _incomplete_parts(parts: Sequence[tuple[Path, RunResults]], count: int | None) -> list[tuple[Path, str]]:
    """The parts that are not a whole slice of the run, each with why: not complete, episodes outside
    the part's own list, or (``count`` given: every shard present) a list that is not the slice
    ``Shard.select`` cuts from the whole run's episodes."""
    from ..analysis.results import split_key

    found: list[tuple[Path, str]] = []
    # A sequential shard that stopped early leaves its unstarted episodes out of ``expected``: its slice is both.
    def planned(data: RunResults) -> set[str]:
        return set(data.expected) | set(data.sequential.unstarted if data.sequential is not None else ())

    every = sorted({split_key(k) for _, d in parts for k in planned(d)})
    for file, data in parts:
        if not data.complete:
            found.append((file, f"{file}: {data.incompleteness()}"))
            continue
        stray = sorted(set(data.finished) - set(data.expected))
        if stray:
            found.append((file, f"{file}: {len(stray)} episode(s) outside its expected list (first: {stray[0]})"))
            continue
        if count and data.shard is not None:
            from ..core.config import episode_key

            if data.sequential is not None:  # dealt from the run's seeded order (Runner.jobs)
                from ..analysis.sequential_run import episode_order

                cut = episode_order(every, data.sequential.seed, (data.shard.index, count))
            else:
                cut = Shard(data.shard.index, count).select(every)
            slice_ = sorted(episode_key(*job) for job in cut)
            if slice_ != sorted(planned(data)):
                found.append((file, f"{file}: shard {data.shard.index}/{count} holds {len(planned(data))} episode(s), "
                                    f"not its slice of the run's {len(every)} ({len(slice_)}): the shards were "
                                    "run over different specs or repeats"))
    return found
