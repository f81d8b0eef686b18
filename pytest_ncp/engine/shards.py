"""Splitting a run's episodes across machines (``ncp run --shard i/n``) and merging the parts (``ncp merge``).

A shard is a deterministic, balanced slice of the run's (spec, repeat) episodes: the episodes are
ordered by (spec id, repeat), and episode k goes to shard k mod n + 1. Every episode is in exactly
one shard, shard sizes differ by at most one, the repeats of one spec spread over shards, and the
slice does not depend on the order specs were found in. Each shard writes an ordinary run folder
whose results.json also says ``"shard": {"index": i, "count": n}``; ``merge_runs`` checks that the
parts belong to one run (same configuration bar the endpoint and cassette folder each machine used,
same shard count, none missing, no episode twice) and writes one results.json with traces copied beside it, whose metrics are those of the unsharded run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Sequence

from ..core.config import Shard  # noqa: F401 - the value type lives with the run settings that carry it


# Where each machine found its models and cassettes: allowed to differ between the shards of one run.
PLACES = frozenset({"api_base", "cassettes"})


class MergeError(ValueError):
    """The runs cannot be merged into one; the message says which and why."""


def merge_runs(sources: Sequence[str | Path], out: str | Path, *, allow_missing: bool = False) -> tuple[Path, list[str]]:
    """Merge the results of shard runs into ``out``; returns the results path and notes worth printing."""
    from ..analysis.results import RESULTS_VERSION, results_path, write_results
    from ..core.traces import resolve_trace

    if not sources:
        raise MergeError("nothing to merge: give the run folders of the shards")
    out = Path(out)
    parts: list[tuple[Path, dict[str, Any]]] = []
    for source in sources:
        file = results_path(source)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MergeError(f"{source}: no results.json (is it the --out folder of a run?)") from None
        except (OSError, ValueError) as exc:
            raise MergeError(f"{file}: not a readable results.json: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != RESULTS_VERSION:
            raise MergeError(f"{file}: results version {data.get('version') if isinstance(data, dict) else '?'}, "
                             f"expected {RESULTS_VERSION}")
        parts.append((file, data))

    first_file, first = parts[0]
    notes: list[str] = []
    for file, data in parts[1:]:
        a, b = first.get("config") or {}, data.get("config") or {}
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if set(diff) - PLACES:
            raise MergeError(f"{file} and {first_file} were run with different configurations "
                             f"(differing: {', '.join(k for k in diff if k not in PLACES and k != 'fingerprint')}); "
                             "merge only shards of one run")
        if "api_base" in diff and "api_base differs" not in " ".join(notes):
            notes.append("api_base differs between shards (each machine had its own endpoint); "
                         f"the merged config keeps {a.get('api_base')!r}")
    counts = {(d.get("shard") or {}).get("count") for _, d in parts}
    if len(counts) > 1:
        raise MergeError(f"the runs were split into different numbers of shards ({sorted(map(str, counts))})")
    count = counts.pop()
    if count:
        seen: dict[int, Path] = {}
        for file, data in parts:
            index = data["shard"]["index"]
            if index in seen:
                raise MergeError(f"shard {index}/{count} is given twice: {seen[index]} and {file}")
            seen[index] = file
        missing = sorted(set(range(1, count + 1)) - set(seen))
        if missing:
            message = f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing"
            if not allow_missing:
                raise MergeError(message + " (pass --allow-missing to merge the others anyway)")
            notes.append(message + ": the merged metrics cover the other shards only")

    episodes: dict[tuple[str, int], dict[str, Any]] = {}
    where: dict[tuple[str, int], Path] = {}
    (out / "traces").mkdir(parents=True, exist_ok=True)
    for file, data in parts:
        for entry in data.get("episodes", []):
            key = (entry["spec_id"], int(entry["repeat"]))
            if key in episodes:
                raise MergeError(f"episode {key[0]}[r{key[1]}] is in both {where[key]} and {file}")
            entry = dict(entry)
            trace = resolve_trace(entry.get("trace"), file.parent)
            if trace is not None:
                target = out / "traces" / trace.name
                if trace.resolve() != target.resolve():
                    shutil.copy2(trace, target)
                entry["trace"] = str(target)
            episodes[key], where[key] = entry, file
    config = first.get("config") or {}
    path = write_results(out, config, list(episodes.values()), survival_turn=int(config.get("survival_turn", 20)))
    return path, notes
