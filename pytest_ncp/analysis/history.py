"""The run history: every recorded run, its episodes and its commitments in one SQLite file (docs/history.md).

``ncp history add``, ``--ncp-history`` and ``ncp run --history`` write it; ``ncp history`` (list, trend, diff),
``ncp report --history`` and ``--estimate --history`` read it. Standard library ``sqlite3`` only.

- **Schema.** ``meta`` holds ``schema_version``; ``runs`` one row per run (provenance, the comparability key, the
  summary figures, the config and provenance as JSON); ``episodes`` one row per (run, spec, repeat) with the full
  episode record as JSON (a run is rebuilt from it as a ``RunResults``, so ``ncp compare``'s paired test reads a
  recorded run exactly as it reads a results.json); ``commitments`` one row per (run, spec, repeat, commitment).
  ``MIGRATIONS[v]`` turns a database of version ``v - 1`` into version ``v``; a database of a newer version is
  refused (never half-read), one of an older version is migrated on first open, in one transaction.
- **Identity.** A run's id is a hash of what identifies it, never a counter: adding the same folder twice changes
  nothing. The shards of one run (``--shard``) and the folder ``ncp merge`` made of them share one id (commit,
  fingerprints, seed, repeats and the CI run, not the start time), and their episodes are stored once each.
- **Concurrency.** WAL, a busy timeout, and every write in one ``BEGIN IMMEDIATE`` transaction: two CI jobs adding
  at once queue one behind the other, and a reader never sees half a run.
- **Comparable runs** share the spec set, horizon (max turns and the survival turn), auditor model, player and
  prompts: only those share one line of a trend or one row of a diff.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Final, Iterable, Mapping, Sequence

from ..core.records import EpisodeRecord
from .metrics import CONFLICT_KINDS, compute_metrics, failure_turn
from .results import RunResults, build_results, results_path

DEFAULT_DB: Final = ".ncp/history.sqlite"
SCHEMA_VERSION: Final = 1
BUSY_TIMEOUT_MS: Final = 60_000
# What two runs must share to be compared (a trend line, a diff, the pull-request summary).
COMPARABLE_FIELDS: Final = ("spec_set", "max_turns", "survival_turn", "auditor_model", "player", "prompts")

_V1: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,          -- hash of what identifies the run (module docstring, "Identity")
        added TEXT NOT NULL,              -- when it was first recorded, ISO 8601 UTC
        started TEXT,                     -- provenance.started
        commit_sha TEXT, branch TEXT, base_branch TEXT, dirty INTEGER,
        narrator TEXT, narrator_model TEXT, player TEXT, player_model TEXT, auditor_model TEXT,
        prompt_version TEXT, prompts TEXT,  -- PROMPT_VERSION and the hash of the templates
        max_turns INTEGER, survival_turn INTEGER NOT NULL,
        spec_set TEXT, specs INTEGER, config_fingerprint TEXT, pytest_ncp TEXT, demo INTEGER NOT NULL,
        comparable TEXT NOT NULL,         -- hash of COMPARABLE_FIELDS
        complete INTEGER NOT NULL,
        episodes INTEGER NOT NULL, judged INTEGER NOT NULL, errors INTEGER NOT NULL,
        survival REAL, survival_low REAL, survival_high REAL,  -- null when not measurable
        survival_text TEXT NOT NULL, reached INTEGER NOT NULL, observed INTEGER NOT NULL,
        rate_fact REAL NOT NULL, rate_commitment REAL NOT NULL, rate_player_input REAL NOT NULL,
        tokens INTEGER NOT NULL, prompt_tokens INTEGER, cost_usd REAL NOT NULL,
        ci_run TEXT,                      -- provenance.ci_run: GITHUB_RUN_ID.GITHUB_RUN_ATTEMPT
        source TEXT,                      -- the folder last added from
        config TEXT NOT NULL, provenance TEXT, expected TEXT NOT NULL, parts TEXT NOT NULL  -- JSON
    )""",
    """CREATE TABLE episodes (
        run_id TEXT NOT NULL REFERENCES runs(run_id), spec_id TEXT NOT NULL, repeat INTEGER NOT NULL,
        termination TEXT NOT NULL, owner TEXT NOT NULL, error_kind TEXT,  -- core.endings: who owns the outcome
        turns INTEGER NOT NULL, failure_turn INTEGER, failure_type TEXT,
        progress REAL NOT NULL, satisfied REAL NOT NULL, held REAL, spec_fingerprint TEXT,
        tokens INTEGER NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER, cached_tokens INTEGER,
        cost_usd REAL NOT NULL,
        record TEXT NOT NULL,             -- the episode as in results.json (JSON)
        PRIMARY KEY (run_id, spec_id, repeat)
    )""",
    """CREATE TABLE commitments (
        run_id TEXT NOT NULL, spec_id TEXT NOT NULL, repeat INTEGER NOT NULL, commitment_id TEXT NOT NULL,
        state TEXT NOT NULL,              -- PENDING | SATISFIED | VIOLATED at the episode's end
        PRIMARY KEY (run_id, spec_id, repeat, commitment_id)
    )""",
    "CREATE INDEX runs_by_branch ON runs (branch, started)",
    "CREATE INDEX runs_by_comparable ON runs (comparable, started)",
)
# version -> the statements that turn a database of version - 1 into that version (0: an empty file).
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1}


class HistoryError(ValueError):
    """The history database cannot be used as asked; the message says which file and what to do."""


# --- opening ---------------------------------------------------------------------------------------------


def open_history(path: str | Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and create or migrate) the history at ``path``. ``create=False``: a missing file is an error.

    Raises ``HistoryError`` for a file that is not an SQLite database, or was written by a newer pytest-ncp.
    """
    p = Path(path)
    if not p.exists():
        if not create:
            raise HistoryError(f"{p}: no history database here; record a run first "
                               f"(`ncp history add RUN_DIR --db {p}`, or `ncp run --history {p}`)")
        p.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: transactions are begun explicitly (BEGIN IMMEDIATE), never implicitly.
    conn = sqlite3.connect(p, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _wal(conn)
        _migrate(conn, p)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise HistoryError(f"{p}: not a usable history database ({exc}); give the file `ncp history add` "
                           "wrote, or a new path") from None
    except HistoryError:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. SQLite answers "database is locked" at once, without the busy handler, while another
    connection holds the new file (two jobs creating one history): retry within the busy timeout."""
    import time

    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def schema_version(conn: sqlite3.Connection) -> int:
    """The database's schema version; 0 for an empty database."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = schema_version(conn)
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise HistoryError(_newer(path, version))
    conn.execute("BEGIN IMMEDIATE")  # another process may be migrating the same file: one goes first
    try:
        version = schema_version(conn)
        if version > SCHEMA_VERSION:
            raise HistoryError(_newer(path, version))
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _newer(path: Path, version: int) -> str:
    return (f"{path}: history schema version {version} was written by a newer pytest-ncp (this one reads up to "
            f"version {SCHEMA_VERSION}); upgrade pytest-ncp, or record into another --db")


# --- what a run is, from its results -----------------------------------------------------------------------


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def comparable_key(config: Mapping[str, Any], spec_set: str | None) -> dict[str, Any]:
    """The fields two runs must share to be compared (``COMPARABLE_FIELDS``)."""
    environment = config.get("environment") or {}
    survival_turn = config.get("survival_turn")
    return {"spec_set": spec_set, "max_turns": config.get("max_turns"),
            "survival_turn": 20 if survival_turn is None else survival_turn,
            "auditor_model": config.get("auditor_model"), "player": config.get("player"),
            "prompts": f"{config.get('prompt_version')}|{environment.get('prompts')}"}


def run_identity(results: RunResults) -> tuple[str, bool]:
    """(run id, whether the file is part of a larger run: a shard, or the merge of shards)."""
    grouped = results.shard is not None or results.merge is not None
    prov = results.provenance
    if prov is None:  # a file from before provenance: its content is its identity
        return _hash(results.document()), grouped
    if grouped:
        config = results.config
        return _hash({"commit": prov.commit, "dirty": prov.dirty, "config": prov.config_fingerprint,
                      "spec_set": prov.spec_set, "ci_run": prov.ci_run, "seed": config.seed,
                      "repeats": config.repeats, "narrator": prov.narrator}), True
    return _hash(prov.model_dump(mode="json")), False


def _spec_set(results: RunResults) -> str:
    if results.provenance is not None:
        return results.provenance.spec_set
    return _hash(sorted({(e.spec_id, e.spec_fingerprint or "") for e in results.episodes}))


# --- writing --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Added:
    """What ``add_run`` did: ``added`` a new run, ``extended`` one already there, or ``unchanged``."""

    run_id: str
    outcome: str
    episodes: int  # episodes newly stored
    source: str


def add_run(conn: sqlite3.Connection, results: RunResults, source: str | Path | None = None,
            *, now: datetime | None = None) -> Added:
    """Record one results file (its summary, episodes and commitments) in one transaction.

    The same run twice is a no-op; a shard (or a merged folder) adds only the episodes its run does not yet have.
    """
    run_id, _ = run_identity(results)
    config = results.config.model_dump(mode="json", exclude_unset=True)
    config.setdefault("survival_turn", results.metrics.survival_turn)
    part = {"shard": f"{results.shard.index}/{results.shard.count}" if results.shard else None,
            "merge": results.merge is not None, "complete": results.complete}
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT expected, parts FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        expected = set(results.expected) | (set(json.loads(row[0])) if row else set())
        parts: list[dict[str, Any]] = json.loads(row[1]) if row else []
        new_part = part not in parts
        if new_part:
            parts.append(part)
        stored = 0
        for e in results.episodes:
            record = e.model_dump(mode="json", exclude_unset=True)  # the episode as results.json stores it
            failure = e.failure
            columns = {
                "run_id": run_id, "spec_id": e.spec_id, "repeat": e.repeat, "termination": e.termination.value,
                "owner": e.owner.value, "error_kind": e.error.kind if e.error else None, "turns": e.turns,
                "failure_turn": failure_turn(e), "failure_type": failure.type if failure else None,
                "progress": e.progress, "satisfied": e.satisfied, "held": e.held, "spec_fingerprint": e.spec_fingerprint,
                "tokens": e.tokens, "prompt_tokens": e.prompt_tokens, "completion_tokens": e.completion_tokens,
                "cached_tokens": e.cached_tokens, "cost_usd": e.cost_usd, "record": json.dumps(record, sort_keys=True)}
            cur = conn.execute(f"INSERT OR IGNORE INTO episodes ({', '.join(columns)}) "
                               f"VALUES ({', '.join(':' + k for k in columns)})", columns)
            if cur.rowcount:
                stored += 1
                conn.executemany("INSERT OR IGNORE INTO commitments (run_id, spec_id, repeat, commitment_id, state) "
                                 "VALUES (?, ?, ?, ?, ?)",
                                 [(run_id, e.spec_id, e.repeat, cid, state) for cid, state in e.commitments.items()])
        if row is not None and not stored and not new_part:
            conn.execute("COMMIT")
            return Added(run_id, "unchanged", 0, str(source or ""))
        _write_run_row(conn, run_id, results, config, sorted(expected), parts, source, exists=row is not None,
                       now=now)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return Added(run_id, "added" if row is None else "extended" if stored else "unchanged", stored, str(source or ""))


def _complete(parts: Sequence[Mapping[str, Any]]) -> bool:
    if any(p["complete"] and (p["merge"] or not p["shard"]) for p in parts):
        return True
    shards = [p for p in parts if p["shard"]]
    if not shards:
        return False
    count = int(str(shards[0]["shard"]).split("/")[1])
    done = {p["shard"] for p in shards if p["complete"]}
    return done == {f"{i}/{count}" for i in range(1, count + 1)}


def _write_run_row(conn: sqlite3.Connection, run_id: str, results: RunResults, config: Mapping[str, Any],
                   expected: list[str], parts: list[dict[str, Any]], source: str | Path | None, *, exists: bool,
                   now: datetime | None) -> None:
    records = _episodes(conn, run_id)
    turn = comparable_key(config, None)["survival_turn"]
    m = compute_metrics(records, survival_turn=turn)
    point = m["survival_point"]
    prov = results.provenance
    models = config.get("models") or {}
    environment = config.get("environment") or {}
    spec_set = _spec_set(results)
    values: dict[str, Any] = {
        "run_id": run_id, "added": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "started": prov.started if prov else None, "commit_sha": prov.commit if prov else None,
        "branch": prov.branch if prov else None, "base_branch": prov.base_branch if prov else None,
        "dirty": None if prov is None or prov.dirty is None else int(prov.dirty),
        "narrator": config.get("narrator"), "narrator_model": config.get("narrator_model") or models.get("narrator"),
        "player": config.get("player"), "player_model": config.get("player_model") or models.get("player"),
        "auditor_model": config.get("auditor_model"), "prompt_version": config.get("prompt_version"),
        "prompts": environment.get("prompts"), "max_turns": config.get("max_turns"), "survival_turn": turn,
        "spec_set": spec_set, "specs": prov.specs if prov else len({e.spec_id for e in results.episodes}),
        "config_fingerprint": prov.config_fingerprint if prov else config.get("fingerprint"),
        "pytest_ncp": prov.pytest_ncp if prov else environment.get("pytest_ncp"), "demo": int(bool(config.get("demo"))),
        "comparable": _hash(comparable_key(config, spec_set)), "complete": int(_complete(parts)),
        "episodes": m["episodes"], "judged": m["judged"], "errors": m["errors"],
        "survival": point["value"], "survival_low": point["ci"][0] if point["ci"] else None,
        "survival_high": point["ci"][1] if point["ci"] else None, "survival_text": point["text"],
        "reached": point["reached"], "observed": point["observed"],
        **{f"rate_{k}": float(m["conflict_rates"].get(k, 0.0)) for k in CONFLICT_KINDS},
        "tokens": m["tokens"], "prompt_tokens": m.get("prompt_tokens"), "cost_usd": m["cost_usd"],
        "ci_run": prov.ci_run if prov else None, "source": str(source) if source is not None else None,
        "config": json.dumps(config, sort_keys=True),
        "provenance": json.dumps(prov.model_dump(mode="json"), sort_keys=True) if prov else None,
        "expected": json.dumps(expected), "parts": json.dumps(parts, sort_keys=True),
    }
    if exists:
        values.pop("added")  # when it was first recorded
        sets = ", ".join(f"{k} = :{k}" for k in values if k != "run_id")
        conn.execute(f"UPDATE runs SET {sets} WHERE run_id = :run_id", values)
    else:
        conn.execute(f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join(':' + k for k in values)})", values)


# --- reading --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    """One recorded run as the listings show it (a row of ``runs``)."""

    run_id: str
    added: str
    started: str | None
    commit: str | None
    branch: str | None
    base_branch: str | None
    dirty: bool | None
    narrator: str | None
    narrator_model: str | None
    auditor_model: str | None
    player: str | None
    prompt_version: str | None
    max_turns: int | None
    survival_turn: int
    spec_set: str | None
    specs: int | None
    comparable: str
    complete: bool
    episodes: int
    judged: int
    errors: int
    survival: float | None
    survival_ci: tuple[float, float] | None
    survival_text: str
    conflict_rates: dict[str, float]
    tokens: int
    prompt_tokens: int | None
    cost_usd: float
    source: str | None
    demo: bool
    config: dict[str, Any] = field(default_factory=dict)
    ci_run: str | None = None

    @property
    def short(self) -> str:
        """The commit's first 10 characters (``-dirty`` when uncommitted changes were run), or ``no-git``."""
        if self.commit is None:
            return "no-git"
        return self.commit[:10] + ("-dirty" if self.dirty else "")

    @property
    def when(self) -> str:
        return self.started or self.added

    def comparable_with(self, other: RunRow) -> bool:
        return self.comparable == other.comparable

    def comparable_text(self) -> str:
        """What this run's comparable group shares, as one line."""
        return (f"spec set {self.spec_set} ({self.specs} spec(s)), max turns {self.max_turns}, "
                f"survival@{self.survival_turn}, auditor {self.auditor_model}, player {self.player}, "
                f"prompts {self.prompt_version}")


_ROW_SQL = ("SELECT run_id, added, started, commit_sha, branch, base_branch, dirty, narrator, narrator_model, "
            "auditor_model, player, prompt_version, max_turns, survival_turn, spec_set, specs, comparable, complete, "
            "episodes, judged, errors, survival, survival_low, survival_high, survival_text, rate_fact, "
            "rate_commitment, rate_player_input, tokens, prompt_tokens, cost_usd, source, demo, config, ci_run "
            "FROM runs")


def _row(r: Sequence[Any]) -> RunRow:
    ci = (float(r[22]), float(r[23])) if r[22] is not None and r[23] is not None else None
    return RunRow(run_id=r[0], added=r[1], started=r[2], commit=r[3], branch=r[4], base_branch=r[5],
                  dirty=None if r[6] is None else bool(r[6]), narrator=r[7], narrator_model=r[8], auditor_model=r[9],
                  player=r[10], prompt_version=r[11], max_turns=r[12], survival_turn=int(r[13]), spec_set=r[14],
                  specs=r[15], comparable=r[16], complete=bool(r[17]), episodes=int(r[18]), judged=int(r[19]),
                  errors=int(r[20]), survival=r[21], survival_ci=ci, survival_text=r[24],
                  conflict_rates={"fact": r[25], "commitment": r[26], "player_input": r[27]}, tokens=int(r[28]),
                  prompt_tokens=r[29], cost_usd=float(r[30]), source=r[31], demo=bool(r[32]),
                  config=json.loads(r[33]), ci_run=r[34])


def parse_since(text: str, *, now: datetime | None = None) -> str:
    """``--since``: an ISO date or time (``2026-12-01``, ``2026-12-01T10:00``) or an age (``7d``, ``12h``), as the
    ISO 8601 UTC time the listings compare ``started`` with. ValueError says what is valid."""
    t = text.strip()
    now = now or datetime.now(timezone.utc)
    if t[:-1].isdigit() and t[-1:] in ("d", "h"):
        delta = timedelta(days=int(t[:-1])) if t.endswith("d") else timedelta(hours=int(t[:-1]))
        return (now - delta).isoformat()
    try:
        when = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a date or time such as 2026-12-01 or 2026-12-01T10:00 (UTC), "
                         "or an age such as 7d or 12h") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()


def list_runs(conn: sqlite3.Connection, *, branch: str | None = None, narrator: str | None = None,
              spec_set: str | None = None, since: str | None = None, comparable: str | None = None) -> list[RunRow]:
    """Recorded runs, oldest first (by start time), filtered. ``narrator`` matches the narrator or its model;
    ``spec_set`` a prefix of the spec-set fingerprint; ``since`` an ISO time (``parse_since``)."""
    where: list[str] = []
    params: list[Any] = []
    if branch is not None:
        where.append("branch = ?")
        params.append(branch)
    if narrator is not None:
        where.append("(narrator = ? OR narrator_model = ? OR narrator LIKE ?)")
        params += [narrator, narrator, f"%{narrator}%"]
    if spec_set is not None:
        where.append("spec_set LIKE ?")
        params.append(spec_set + "%")
    if since is not None:
        where.append("COALESCE(started, added) >= ?")
        params.append(since)
    if comparable is not None:
        where.append("comparable = ?")
        params.append(comparable)
    sql = _ROW_SQL + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY COALESCE(started, added), run_id"
    return [_row(r) for r in conn.execute(sql, params)]


def find_run(conn: sqlite3.Connection, ref: str) -> RunRow:
    """A run by id prefix, by commit prefix or branch name (its latest run), or ``latest``. HistoryError when none
    or several."""
    runs = list_runs(conn)
    if not runs:
        raise HistoryError("the history holds no run yet; record one with `ncp history add RUN_DIR`")
    if ref == "latest":
        return runs[-1]
    by_id = [r for r in runs if r.run_id.startswith(ref)]
    if len(by_id) == 1:
        return by_id[0]
    if len(by_id) > 1:
        raise HistoryError(f"run {ref!r} is ambiguous: {len(by_id)} run ids start with it; give more characters")
    by_commit = [r for r in runs if r.commit and r.commit.startswith(ref)]
    if by_commit:
        return by_commit[-1]
    by_branch = [r for r in runs if r.branch == ref]
    if by_branch:
        return by_branch[-1]
    raise HistoryError(f"no run, commit or branch {ref!r} in the history; `ncp history` lists the runs")


def rebuild(conn: sqlite3.Connection, run_id: str) -> RunResults:
    """A recorded run as a ``RunResults`` (what ``analysis.compare`` reads): its config and every stored episode."""
    row = conn.execute("SELECT config, expected, provenance, survival_turn FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    if row is None:
        raise HistoryError(f"no run {run_id!r} in the history")
    records = _episodes(conn, run_id)
    expected = set(json.loads(row[1])) | {e.key for e in records}
    return build_results(json.loads(row[0]), records, survival_turn=int(row[3]), expected=expected,
                         provenance=json.loads(row[2]) if row[2] else None)


def _episodes(conn: sqlite3.Connection, run_id: str) -> list[EpisodeRecord]:
    """A run's stored episodes, read back as the typed records results.json holds."""
    return [EpisodeRecord.model_validate(json.loads(r)) for (r,) in conn.execute(
        "SELECT record FROM episodes WHERE run_id = ? ORDER BY spec_id, repeat", (run_id,))]


def commitment_states(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, int, str], str]:
    """(spec id, repeat, commitment id) -> state at the episode's end."""
    return {(s, int(r), c): state for s, r, c, state in conn.execute(
        "SELECT spec_id, repeat, commitment_id, state FROM commitments WHERE run_id = ?", (run_id,))}


def latest_comparable(conn: sqlite3.Connection, run: RunRow, *, branch: str | None,
                      before: bool = True) -> RunRow | None:
    """The latest complete run comparable with ``run`` on ``branch`` (any branch when None), other than ``run``
    itself; ``before``: started no later than ``run``. An interrupted run is no baseline: its missing episodes may
    be the failing ones."""
    found = [r for r in list_runs(conn, branch=branch, comparable=run.comparable)
             if r.run_id != run.run_id and r.complete and (not before or r.when <= run.when)]
    return found[-1] if found else None


def groups(runs: Iterable[RunRow]) -> list[list[RunRow]]:
    """Runs split into comparable groups, each oldest first; groups in order of their latest run."""
    by_key: dict[str, list[RunRow]] = {}
    for r in runs:
        by_key.setdefault(r.comparable, []).append(r)
    return sorted(by_key.values(), key=lambda g: g[-1].when)


@dataclass(frozen=True)
class MeasuredUsage:
    """Tokens and cost per episode measured by a recorded run (``--estimate --history``)."""

    run: RunRow
    tokens_per_episode: float
    cost_per_episode: float


def measured_usage(conn: sqlite3.Connection, config: Mapping[str, Any], spec_set: str,
                   *, narrator: str | None = None) -> MeasuredUsage | None:
    """The last comparable run's measured tokens and cost per episode, preferring one of the same narrator."""
    key = _hash(comparable_key(config, spec_set))
    runs = [r for r in list_runs(conn, comparable=key) if r.episodes > 0]
    same = [r for r in runs if narrator is None or r.narrator == narrator]
    pick = (same or runs)[-1] if (same or runs) else None
    if pick is None:
        return None
    return MeasuredUsage(pick, pick.tokens / pick.episodes, pick.cost_usd / pick.episodes)


def expand_sources(sources: Sequence[str | Path]) -> list[Path]:
    """Run folders and results files as given; a folder with no results.json stands for the ``*.json`` files in it
    (one results file per run, as the CI recipe keeps them on a branch), in name order."""
    out: list[Path] = []
    for s in map(Path, sources):
        if s.is_dir() and not results_path(s).is_file():
            found = sorted(s.glob("*.json"))
            if not found:
                raise HistoryError(f"{s}: neither a results.json nor any *.json results file in it")
            out += found
        else:
            out.append(s)
    return out


def add_runs(path: str | Path, sources: Sequence[str | Path], load: Callable[[str | Path], RunResults]) -> list[Added]:
    """Open the history at ``path`` and add each results folder or file (``expand_sources``; ``load`` reads one;
    its errors go up). Each run is its own transaction: a bad file stops the command, the runs before it stay."""
    files = expand_sources(sources)
    conn = open_history(path)
    try:
        return [add_run(conn, load(s), results_path(s).resolve().parent if s.is_dir() else s.resolve())
                for s in files]
    finally:
        conn.close()


# --- what changed between two runs -------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeChange:
    """One episode whose outcome through the survival turn, or whose first failure's turn, differs."""

    spec_id: str
    repeat: int
    base: str   # termination (and turn of the failure) in the base run
    new: str
    base_turn: int | None = None  # first-failure turn
    new_turn: int | None = None


@dataclass(frozen=True)
class CommitmentChange:
    """A commitment whose state at the episode's end differs between the two runs."""

    spec_id: str
    repeat: int
    commitment_id: str
    base: str
    new: str


@dataclass(frozen=True)
class HistoryDiff:
    """Two recorded runs side by side: the paired test of ``ncp compare`` and what started or stopped holding.

    ``comparison`` is None when the runs are not comparable (``apart`` says which fields differ): they are then
    shown apart, never on one line.
    """

    base: RunRow
    new: RunRow
    apart: tuple[str, ...]
    comparison: Any = None  # analysis.compare.Comparison
    specs_stopped: tuple[EpisodeChange, ...] = ()   # survived the turn in base, failed by it in new
    specs_started: tuple[EpisodeChange, ...] = ()   # failed by the turn in base, survived it in new
    turns_moved: tuple[EpisodeChange, ...] = ()     # failed in both, at different turns
    commitments_stopped: tuple[CommitmentChange, ...] = ()  # VIOLATED in new, not in base
    commitments_started: tuple[CommitmentChange, ...] = ()  # VIOLATED in base, not in new
    commitments_other: tuple[CommitmentChange, ...] = ()    # any other change of state (an achievement missed)

    @property
    def comparable(self) -> bool:
        return not self.apart


def _apart(a: RunRow, b: RunRow) -> tuple[str, ...]:
    ka, kb = comparable_key(a.config, a.spec_set), comparable_key(b.config, b.spec_set)
    return tuple(f"{f}: {ka[f]} vs {kb[f]}" for f in COMPARABLE_FIELDS if ka[f] != kb[f])


def diff_runs(conn: sqlite3.Connection, base: RunRow, new: RunRow, *, alpha: float = 0.05) -> HistoryDiff:
    """What changed from ``base`` to ``new``, through the paired test ``ncp compare`` uses (McNemar, paired
    bootstrap) at the runs' survival turn."""
    from .compare import compare_runs, survived_at

    apart = _apart(base, new)
    if apart:
        return HistoryDiff(base, new, apart)
    turn = new.survival_turn
    run0, run1 = rebuild(conn, base.run_id), rebuild(conn, new.run_id)
    comparison = compare_runs(run0, run1, turn=turn, alpha=alpha)
    eps0 = {(e.spec_id, e.repeat): e for e in run0.episodes}
    eps1 = {(e.spec_id, e.repeat): e for e in run1.episodes}
    stopped: list[EpisodeChange] = []
    started: list[EpisodeChange] = []
    moved: list[EpisodeChange] = []
    for key in sorted(eps0.keys() & eps1.keys()):
        e0, e1 = eps0[key], eps1[key]
        s0, s1 = survived_at(e0, turn), survived_at(e1, turn)
        t0, t1 = failure_turn(e0), failure_turn(e1)
        change = EpisodeChange(key[0], key[1], _ending(e0), _ending(e1), t0, t1)
        if s0 is True and s1 is False:
            stopped.append(change)
        elif s0 is False and s1 is True:
            started.append(change)
        elif t0 is not None and t1 is not None and t0 != t1:
            moved.append(change)
    c0, c1 = commitment_states(conn, base.run_id), commitment_states(conn, new.run_id)
    c_stopped: list[CommitmentChange] = []
    c_started: list[CommitmentChange] = []
    c_other: list[CommitmentChange] = []
    for ckey in sorted(c0.keys() & c1.keys()):
        if c0[ckey] == c1[ckey]:
            continue
        cchange = CommitmentChange(ckey[0], ckey[1], ckey[2], c0[ckey], c1[ckey])
        if c1[ckey] == "VIOLATED":
            c_stopped.append(cchange)
        elif c0[ckey] == "VIOLATED":
            c_started.append(cchange)
        else:
            c_other.append(cchange)
    return HistoryDiff(base, new, (), comparison, tuple(stopped), tuple(started), tuple(moved),
                       tuple(c_stopped), tuple(c_started), tuple(c_other))


def _ending(e: EpisodeRecord) -> str:
    turn = failure_turn(e)
    ending = e.termination.value + (f" ({e.error.kind})" if e.error is not None else "")
    return f"{ending} at turn {turn}" if turn is not None else f"{ending} after {e.turns} turn(s)"


def pull_request_diff(conn: sqlite3.Connection, run: RunRow, *, base_branch: str | None = None) -> HistoryDiff | None:
    """``run`` against the latest comparable run of its base branch (``base_branch``, else the one its provenance
    records, else ``main``), recorded before it; None when the base branch has none."""
    branch = base_branch or run.base_branch or "main"
    base = latest_comparable(conn, run, branch=branch)
    return None if base is None else diff_runs(conn, base, run)


__all__ = ["COMPARABLE_FIELDS", "DEFAULT_DB", "MIGRATIONS", "SCHEMA_VERSION", "Added", "CommitmentChange",
           "EpisodeChange", "HistoryDiff", "HistoryError", "MeasuredUsage", "RunRow", "add_run", "add_runs",
           "commitment_states", "comparable_key", "diff_runs", "expand_sources", "find_run", "groups", "latest_comparable", "list_runs",
           "measured_usage", "open_history", "parse_since", "pull_request_diff", "rebuild", "run_identity",
           "schema_version"]
