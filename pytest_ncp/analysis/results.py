"""``results.json`` as one typed model: the one place that builds, writes, locates, loads and checks it.

Written by ``ncp run --out DIR``, ``pytest --ncp-report=DIR``, ``ncp merge``, ``ncp fork --out`` and
``ncp reaudit``; read by ``ncp compare``/``agree``/``reaudit``/``review``/``report``/``merge``, the HTML
report, the pytest session's ``--ncp-baseline`` and resume. :class:`RunResults` is the format (every
field documented, as Inspect AI's ``EvalLog`` documents its own): ``ncp schema --results`` prints its
JSON Schema and ``docs/results.md`` is generated from it (a test keeps the two equal).

- :func:`build_results` makes a ``RunResults`` from the engine's episode records (``core.records.EpisodeRecord``,
  which also travel as JSON through pytest-xdist reports and worker queues);
- :func:`write_results` writes one atomically (``core.files.atomic_write_text``);
- :func:`load_results` reads one from a file or a run folder, upgrading older versions, and
  :func:`parse_results` checks a document already in memory. The file is an input a person may have
  moved, truncated or edited: every problem is a ``RunFileError`` naming the file, the entry and the fix.

**Growing the format.** Every record keeps fields it does not know (``extra="allow"``), so a file with
keys added by another tool loads, and ``ncp merge`` writes them back. A new field is added with a
default (``None``, an empty list) so that older files still validate; when the shape changes,
``RESULTS_VERSION`` goes up by one and ``_UPGRADES`` gets the step that turns the previous version into
the new one, so every version this package ever wrote still loads. Fields the open issues add fit
this way: outcome owners and a blame table, ``budget`` terminations and spent cost, sequential-gate
decisions, votes and player faults (each a new optional field, or a new value of ``termination``).

Pure data and checks (pydantic, standard library, ``core``); the metrics are computed by
:mod:`pytest_ncp.analysis.metrics` from the episode records, never stored by hand.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Final, Iterable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.config import episode_name
from ..core.options import DEFAULT_SURVIVAL_TURN, survival_turn
from ..core.files import atomic_write_text
from ..core.records import (
    Agreement, EpisodeRecord, ErrorRecord, Failure, FlagCounts, ForkOrigin, NodeReached, PlayerFault, ScreenProblem,
    Screening, SpeculativeUsage,
)
from ..core.traces import RunFileError, trace_reference
from .metrics import compute_metrics

RESULTS_FILE = "results.json"
# 2: ``complete``, ``expected``, ``finished`` and ``stopped``; ``merge``. 3: each episode entry is the record the
# engine produces (``core.records.EpisodeRecord``), no field changed. Versions 1 and 2 still load.
RESULTS_VERSION: Final = 3
_HINT = "give the results.json written by `ncp run --out DIR` or `pytest --ncp-report=DIR`, or its directory"

# Why a run is not complete (``None`` when it is): still being written, stopped by Ctrl-C / SIGINT or an
# interrupted pytest session, ended with expected episodes missing (a worker died, ``-x`` stopped pytest,
# a shard merged with --allow-incomplete), or written by a version that did not record it.
Stopped = Literal["running", "interrupted", "unfinished", "unrecorded"]


class _Record(BaseModel):
    # strict: "3" is not a number and true is not 1 (a hand-edited file is refused, not reinterpreted);
    # extra="allow": fields this version does not know are kept (module docstring, "Growing the format").
    model_config = ConfigDict(strict=True, extra="allow")


class Models(_Record):
    """The litellm model of each role."""

    narrator: str | None = Field(default=None, description="Model of a built-in narrator.")
    player: str | None = Field(default=None, description="Model of a simulated player.")
    auditor: str | None = Field(default=None, description="Model of the auditor.")


class RunConfigRecord(_Record):
    """The run's settings (``RunConfig.to_dict()``). Every field is optional: forks, re-audits and
    older files record fewer, and ``ncp compare`` notes the fields that differ."""

    narrator: str | None = Field(default=None, description="The narrator under test, `module:Attr`.")
    narrator_model: str | None = Field(default=None, description="litellm model of a built-in narrator.")
    player: str | None = Field(default=None, description="Who played: scripted, adversarial or natural.")
    player_model: str | None = Field(default=None, description="litellm model of a simulated player.")
    auditor_model: str | None = Field(default=None, description="litellm model of the auditor.")
    api_base: str | None = Field(default=None, description="Endpoint for every role, credentials scrubbed.")
    max_turns: int | None = Field(default=None, ge=0, description="Turn limit per episode.")
    repeats: int | None = Field(default=None, ge=1, description="Episodes per spec.")
    concurrency: int | None = Field(default=None, ge=1, description="Episodes and calls in flight.")
    timeout: float | None = Field(default=None, description="Seconds per model request.")
    deadline: float | None = Field(default=None, description="Seconds per model call with its retries.")
    max_retries: int | None = Field(default=None, ge=0, description="Retries per model call.")
    concurrency_per_endpoint: int | None = Field(default=None, description="Requests in flight per endpoint.")
    max_tokens: dict[str, int] = Field(default_factory=dict, description="Token limit per call, by role.")
    structured_output: str | None = Field(default=None, description="How auditor answers were asked for "
                                                                    "(auto, json_schema, json_object, prompt).")
    structured_output_used: dict[str, str] = Field(default_factory=dict,
                                                   description="The mode each `endpoint|model` ended up with.")
    system_prompt: str | None = Field(default=None, description="keep, or merge (system prompts folded into "
                                                                "the first user message).")
    max_cost: float | None = Field(default=None, description="The cost cap in US dollars (`--max-cost`); null "
                                                             "when none.")
    max_response_chars: int | None = Field(default=None, ge=1, description="A narrator response longer than this "
                                                                         "was the narrator's error, before any audit.")
    narrator_timeout: float | None = Field(default=None, gt=0, description="Seconds a narrator hook (respond, "
                                                                          "opening, reset) could take before it "
                                                                          "was the narrator's error.")
    max_response_tokens: int | None = Field(default=None, ge=1, description="The same limit in tokens of the "
                                                                          "auditor's tokenizer (or a conservative bound).")
    auditor_context_tokens: int | None = Field(default=None, ge=1, description="The auditor's input window when "
                                                                             "litellm does not know the model.")
    audit_votes: int | None = Field(default=None, ge=1, description="Confirmation samples per flagged conflict "
                                                                    "(`--audit-votes`); absent: 1.")
    player_retries: int | None = Field(default=None, ge=0, description="Regenerations of an unfair simulated "
                                                                       "input (`--player-retries`).")
    survival_turn: int | None = Field(default=None, ge=0, description="Turn of the headline survival figure.")
    record_mode: str | None = Field(default=None, description="Cassette record mode; null when off.")
    cassettes: str | None = Field(default=None, description="Cassette directory.")
    demo: bool = Field(default=False, description="Every model was the bundled scripted server: the figures "
                                                  "judge no real model.")
    seed: int | None = Field(default=None, ge=0, description="Seed of the order the episodes started in (`--seed`): "
                                                            "a seeded random order of (spec, repeat).")
    prompt_version: str | None = Field(default=None, description="Version of the auditor and player prompts.")
    narrator_code: dict[str, str] | None = Field(default=None, description="The narrator's module and a hash of "
                                                 "its file (`sha256`), or a `note` that it could not be read; part "
                                                 "of the resume fingerprint.")
    environment: dict[str, str] = Field(default_factory=dict, description="What the installed package brings to "
                                        "every verdict: `pytest_ncp` (its version), `world_rules` and `prompts` "
                                        "(hashes of the shared world rules and the prompt templates).")
    models: Models | None = Field(default=None, description="The model of each role.")
    fingerprint: str | None = Field(default=None, description="Hash of the settings an outcome depends on "
                                                              "(resume and merge compare it).")
    fork: ForkOrigin | None = Field(default=None, description="Set on the results of `ncp fork`.")
    reaudit_of: str | None = Field(default=None, description="Set on the results of `ncp reaudit`: the run "
                                                             "it re-judged.")


class SurvivalPoint(_Record):
    """survival@T with its interval, or why it is not a number."""

    turn: int = Field(ge=0, description="T.")
    value: float | None = Field(description="Kaplan-Meier S(T); null when too few episodes were observed to T.")
    ci: list[float] | None = Field(description="95% interval (Greenwood, log-log); null with `value`.")
    reached: int = Field(ge=0, description="Episodes still in the story at T (at risk).")
    observed: int = Field(ge=0, description="Episodes whose outcome through T is known.")
    episodes: int = Field(ge=0, description="All episodes.")
    text: str = Field(description="As printed, e.g. `75.0% (95% CI ...)` or `n/a (0 of 4 reached turn 20)`.")


class BlameRow(_Record):
    """The episodes one owner's outcomes ended."""

    count: int = Field(ge=0, description="Episodes.")
    kinds: dict[str, int] = Field(default_factory=dict, description="By kind of outcome: `conflict:fact`, "
                                                                    "`error:model`, `player_fault`, `contested`, ...")
    episodes: list[str] = Field(default_factory=list, description="Their keys (`spec--rN`), sorted.")
    split: dict[str, int] | None = Field(default=None, description="Conflicts of the row that stood on a split "
                                                                  "vote, by tally (`2/3`); absent when none.")
    cost_usd: float = Field(default=0.0, ge=0, description="What the row's episodes cost in US dollars (list "
                                                         "prices, cache reads and writes at their rates, calls "
                                                         "played ahead and discarded included); 0 in older files.")


class Blame(_Record):
    """Every episode in the row of the owner of its outcome (``analysis.owners``): the counts sum to ``episodes``.

    Owners: narrator (conflicts, also those that stood on a split vote, and narrator errors), player (player
    faults and errors), auditor (auditor errors, and contested verdicts of files written before a split
    majority was the narrator's), model (model errors), harness (anything else), budget (episodes a cost cap or an
    early gate decision left unfinished), none (success, turn limit, script exhausted)."""

    episodes: int = Field(ge=0, description="Episodes in the table.")
    owners: dict[str, BlameRow] = Field(description="By owner, every owner present.")


class Metrics(_Record):
    """Run-level figures (DESIGN 4), computed from ``episodes`` by ``analysis.metrics.compute_metrics``.

    Also holds ``survival_at_<T>`` for the run's survival turn T (when it is not 20)."""

    episodes: int = Field(ge=0, description="Episodes in the file.")
    judged: int = Field(ge=0, description="Episodes with a known outcome (all but unknown errors).")
    errors: int = Field(ge=0, description="Episodes that ended in an error of any kind.")
    narrator_errors: int = Field(ge=0, description="Errors the narrator caused (counted as failures).")
    unknown: int = Field(ge=0, description="Auditor, model and player errors: unknown outcomes.")
    error_rate: float = Field(ge=0, le=1, description="unknown / episodes (what the error budget bounds).")
    survival: dict[str, float] = Field(description="S(t) for every turn t up to the horizon, by turn.")
    survival_turn: int = Field(ge=0, description="The turn of the headline figure.")
    survival_point: SurvivalPoint = Field(description="survival@survival_turn in full.")
    survival_at_20: float | None = Field(description="S(20); null when not measurable.")
    survival_ci: list[float] | None = Field(description="Interval of survival@survival_turn.")
    avg_turns: float = Field(ge=0, description="Mean turns over judged episodes.")
    progress_pct: float = Field(ge=0, description="Mean trajectory progress, percent.")
    satisfied_pct: float = Field(ge=0, description="Mean satisfied-commitment share, percent.")
    held_pct: float | None = Field(description="Mean invariants held, percent; null when none were audited.")
    conflict_rates: dict[str, float] = Field(description="Share of judged episodes ending in each conflict type.")
    conflict_rate_ci: dict[str, list[float]] = Field(description="Wilson 95% interval of each conflict rate.")
    narrator_error_rate: float = Field(ge=0, description="narrator_errors / judged.")
    successes: int = Field(ge=0, description="Episodes that satisfied every achievement.")
    conflict_free: int = Field(ge=0, description="Judged episodes without a failure.")
    turn_limit: int = Field(ge=0, description="Episodes that reached the turn limit.")
    script_exhausted: int = Field(ge=0, description="Episodes whose scripted inputs ran out first.")
    budget: int = Field(default=0, ge=0, description="Episodes cut short by the run's budget (`--max-cost`): "
                                                     "censored, left out of every rate, outside the error budget.")
    pass_k: dict[str, float | None] = Field(description="pass^k by k, with repeats (empty without).")
    tokens: int = Field(ge=0, description="Tokens of every episode.")
    prompt_tokens: int = Field(default=0, ge=0, description="Prompt tokens of the episodes that recorded them.")
    cached_tokens: int = Field(default=0, ge=0, description="Of those, tokens a provider's prompt cache served.")
    cache_write_tokens: int = Field(default=0, ge=0, description="Of those, tokens written to a provider's prompt "
                                                                 "cache (priced at the cache-write rate).")
    cached_share: float | None = Field(default=None, ge=0, le=1, description="cached_tokens / prompt_tokens; null "
                                                                             "without prompt tokens.")
    cost_usd: float = Field(ge=0, description="Cost of every episode in US dollars.")
    spent_usd: float | None = Field(default=None, ge=0, description="What the episodes' calls cost, the turns "
                                                                    "played ahead and discarded included.")
    blame: Blame | None = Field(default=None, description="Who owns each episode's outcome (DESIGN 7.5); absent "
                                                          "in files written before it was recorded.")
    flags: FlagCounts | None = Field(default=None, description="The episodes' `flags` summed: every flag the "
                                                               "conflict check raised over the run and what became "
                                                               "of the doubtful ones.")


class CanaryCase(_Record):
    """One gold case audited beside the episodes."""

    case: str = Field(description="The gold case id.")
    spec: str = Field(description="Its spec id.")
    violation: bool = Field(description="The gold label holds a violation.")
    outcome: Literal["caught", "missed", "passed", "false_alarm", "invalid"] = Field(
        description="How the auditor did on it.")


class Canaries(_Record):
    """The auditor's score on known answers (``--canaries K``; docs/auditor.md)."""

    k: int = Field(ge=0, description="Cases audited.")
    seed: int = Field(description="Seed of the sample.")
    model: str = Field(description="The auditor model.")
    min_recall: float = Field(ge=0, le=1, description="Share of violations caught and clean passed required.")
    violations: int = Field(ge=0, description="Cases with a violation.")
    caught: int = Field(ge=0, description="Violations the auditor confirmed.")
    clean: int = Field(ge=0, description="Clean cases.")
    passed: int = Field(ge=0, description="Clean cases the auditor passed.")
    invalid: int = Field(ge=0, description="Cases without a valid answer (counted as misses).")
    recall: float | None = Field(description="caught / violations.")
    clean_rate: float | None = Field(description="passed / clean.")
    ok: bool = Field(description="Both rates reach min_recall: the canary gate passed.")
    tokens: int = Field(default=0, ge=0, description="Tokens of the canary calls.")
    cost_usd: float = Field(default=0.0, ge=0, description="Their cost in US dollars.")
    cases: list[CanaryCase] = Field(default_factory=list, description="Every case and its outcome.")


class ShardRecord(_Record):
    """This file is one slice of a run (``ncp run --shard i/n``); ``ncp merge`` joins the slices."""

    index: int = Field(ge=1, description="i, 1-based.")
    count: int = Field(ge=1, description="n.")


class SequentialGateRecord(_Record):
    """The sequential survival gate at the threshold (``analysis.sequential.SequentialGate``)."""

    threshold: float = Field(ge=0, le=1, description="RATE of the gate.")
    alpha: float = Field(gt=0, lt=1, description="The gate's alpha (a shard's share of the run's).")
    split: float = Field(default=0.5, description="Share of alpha spent on wrong passes (the rest: wrong fails).")
    trunc: float = Field(default=0.5, description="Bet truncation of the hedged-capital process.")
    decision: Literal["pass", "fail"] | None = Field(default=None, description="The early decision; null when "
                                                                              "undecided.")
    decided_after: int | None = Field(default=None, ge=0, description="Observed (uncensored) outcomes at the "
                                                                      "decision.")
    seen_at_decision: int | None = Field(default=None, ge=0, description="Outcomes read at the decision, censored "
                                                                         "ones included.")
    observed: int = Field(default=0, ge=0, description="Observed outcomes read in all (in-flight episodes that "
                                                      "finished after the decision included).")
    censored: int = Field(default=0, ge=0, description="Censored outcomes read in all (left out of the gate).")
    planned: int | None = Field(default=None, ge=0, description="Episodes the run set out to play.")
    conflict: bool = Field(default=False, description="Both sides crossed on one outcome: the gate abstained.")
    e_pass: float = Field(ge=0, description="The capital against `survival <= RATE` at the decision (now, "
                                            "when undecided): an e-value.")
    e_fail: float = Field(ge=0, description="The capital against `survival >= RATE`: an e-value.")
    lower: float = Field(ge=0, le=1, description="Lower bound of the confidence sequence now.")
    upper: float = Field(ge=0, le=1, description="Upper bound of the confidence sequence now.")
    history: list[list[float]] = Field(default_factory=list, description="[lower, upper] after each observed "
                                                                         "outcome: the confidence sequence drawn "
                                                                         "in the HTML report.")


class PairedRecord(_Record):
    """The sequential paired regression check against a baseline (``analysis.sequential.PairedSequentialTest``)."""

    margin: float = Field(ge=0, lt=1, description="A drop in survival up to this is no regression.")
    alpha: float = Field(gt=0, lt=1, description="The check's alpha.")
    decision: Literal["regression", "non-inferior"] | None = Field(default=None, description="The early decision; "
                                                                                           "null when undecided.")
    decided_after: int | None = Field(default=None, ge=0, description="Pairs read at the decision.")
    pairs: int = Field(default=0, ge=0, description="Pairs with a known outcome on both sides.")
    skipped: int = Field(default=0, ge=0, description="Pairs censored (or missing) on either side.")
    base_only: int = Field(default=0, ge=0, description="Survived in base, failed in the new run.")
    new_only: int = Field(default=0, ge=0, description="Failed in base, survived in the new run.")
    e_regression: float = Field(ge=0, description="The e-value against `drop <= margin`.")
    e_non_inferior: float = Field(ge=0, description="The e-value against `drop >= margin`.")
    drop_lower: float = Field(description="Anytime-valid lower bound of survival(base) - survival(new).")
    drop_upper: float = Field(description="Anytime-valid upper bound of survival(base) - survival(new).")


class SequentialOutcome(_Record):
    """One outcome the sequential checks read, in start order."""

    episode: str = Field(description="The episode key (`spec--rN`).")
    survived: bool | None = Field(description="Survived TURN; false: failed before it; null: censored.")


class MergedSequentialRecord(_Record):
    """``ncp merge`` of sequential shards: the mean of the shards' e-values (docs/gates.md, "Shards")."""

    method: Literal["mean", "product"] = Field(default="mean", description="How the e-values were combined.")
    decision: Literal["pass", "fail"] | None = Field(default=None, description="The merged decision; null: the "
                                                                              "merged run decides as the fixed "
                                                                              "gate does.")
    e_pass: float = Field(ge=0, description="Combined e-value against `survival <= RATE`.")
    e_fail: float = Field(ge=0, description="Combined e-value against `survival >= RATE`.")
    conflict: bool = Field(default=False, description="Shards decided opposite ways: no merged decision.")
    shards: list[dict[str, Any]] = Field(default_factory=list, description="Each shard's decision, "
                                                                           "decided_after, planned and e-values.")


class SequentialRecord(_Record):
    """A run with ``--sequential``: where it stopped and why (docs/gates.md)."""

    rate: float = Field(ge=0, le=1, description="The gate's RATE.")
    turn: int = Field(ge=0, description="The gate's TURN.")
    alpha: float = Field(gt=0, lt=1, description="The alpha the checks ran at (a shard's: run_alpha / shards).")
    run_alpha: float = Field(gt=0, lt=1, description="The run's alpha (`--sequential-alpha`).")
    shards: int = Field(default=1, ge=1, description="Shards the run was split into (each stops on its own).")
    seed: int | str = Field(description="Seed of the start order.")
    cancel: bool = Field(default=False, description="Episodes in flight were cancelled at the stop "
                                                    "(`--sequential-cancel`).")
    planned: int = Field(ge=0, description="Episodes the run (or shard) set out to play: M of `decided after N "
                                           "of M`.")
    started: int = Field(ge=0, description="Episodes started: the planned ones less `unstarted`.")
    stopped: bool = Field(description="True when the run stopped early: no episode started after the decision.")
    stopped_by: str | None = Field(default=None, description="What stopped it: gate, baseline, or gate and "
                                                             "baseline; null when it ran to the end.")
    decided_after: int | None = Field(default=None, ge=0, description="Outcomes read in start order when it "
                                                                      "stopped: N of `decided after N of M`.")
    unstarted: list[str] = Field(default_factory=list, description="Episode keys never started (not expected: "
                                                                   "the run is complete without them).")
    cancelled: list[str] = Field(default_factory=list, description="Episode keys cancelled in flight.")
    outcomes: list[SequentialOutcome] = Field(default_factory=list, description="The outcomes read, in start "
                                                                                "order.")
    gate: SequentialGateRecord | None = Field(default=None, description="The survival gate's record.")
    baseline: PairedRecord | None = Field(default=None, description="The paired regression check, with a "
                                                                    "baseline.")
    merged: MergedSequentialRecord | None = Field(default=None, description="Set by `ncp merge` of sequential "
                                                                            "shards.")


class MergeRecord(_Record):
    """How ``ncp merge`` made this file."""

    sources: list[str] = Field(description="The results files merged.")
    incomplete: list[str] = Field(default_factory=list, description="Sources that were incomplete, merged "
                                                                    "anyway with --allow-incomplete.")
    missing_shards: list[str] = Field(default_factory=list, description="Shards (`i/n`) left out with "
                                                                        "--allow-missing.")


CheckKind = Literal["complete", "error-budget", "cost-cap", "survival", "narrator-errors", "canaries", "baseline",
                    "problems"]


class VerdictCheck(_Record):
    """One check of the run's verdict (``analysis.verdict.decide``): what it required, what it measured, and how
    it decided. Under pytest each one asked for (or not passed) is also the test item ``ncp::gate[KIND]``."""

    kind: CheckKind = Field(description="The check: complete (every expected episode reported), error-budget, "
                                        "cost-cap, survival (the gate), narrator-errors, canaries, baseline, "
                                        "problems.")
    decision: Literal["passed", "failed", "undecided"] = Field(description="undecided: the check could not decide, "
                                                                           "which never counts as a pass.")
    threshold: float | None = Field(default=None, description="What it required: survival rate (0..1), allowed "
                                                              "error rate, the cap in US dollars, the canaries' "
                                                              "minimum recall, the baseline's alpha, the episodes "
                                                              "expected; null when nothing is numeric.")
    value: float | None = Field(default=None, description="What the run measured, in the threshold's unit; null "
                                                          "when not measurable.")
    interval: list[float] | None = Field(default=None, description="95% interval of `value` [low, high], when it "
                                                                   "has one.")
    turn: int | None = Field(default=None, description="The survival gate's turn T (survival@T).")
    reason: str = Field(description="The verdict's own words for this check.")


class VerdictRecord(_Record):
    """The run's verdict: the exit code and every check behind it."""

    outcome: Literal["passed", "failed", "undecided"] = Field(description="passed (exit 0), failed (a check "
                                                                          "failed), undecided (none failed, but "
                                                                          "the run proves nothing).")
    exit_code: int = Field(description="The exit code it gives (README: exit codes).")
    checks: list[VerdictCheck] = Field(description="Every check, in the order the verdict explains them.")
    selection: str | None = Field(default=None, description="Set when the verdict judged a selection of a "
                                                            "session's tests (-k, -m, --lf, --deselect).")
class Provenance(_Record):
    """Where and from what the run came: the git commit of the working directory it started in, its branch, and
    fingerprints that say which runs may share one line of a history (docs/history.md). Git fields are null
    outside a git repository, and ``git`` says why."""

    commit: str | None = Field(default=None, description="Full hash of the commit checked out in the working "
                                                         "directory the run started in; null outside git.")
    branch: str | None = Field(default=None, description="The branch: `--branch`, else the pull request's head "
                                                         "branch (GITHUB_HEAD_REF), the CI's ref name "
                                                         "(GITHUB_REF_NAME), or git's current branch; null when "
                                                         "detached with no CI variable.")
    base_branch: str | None = Field(default=None, description="On a pull request, the branch it merges into "
                                                              "(GITHUB_BASE_REF, or `--base-branch`).")
    dirty: bool | None = Field(default=None, description="True when tracked files had uncommitted changes; null "
                                                         "outside git.")
    git: str | None = Field(default=None, description="Why the git fields are null (not a git repository, git "
                                                      "not installed); null when they were read.")
    started: str = Field(description="When the run started, ISO 8601 in UTC.")
    config_fingerprint: str = Field(description="Hash of the settings an outcome depends on, less the endpoint "
                                                "URL (host-independent: the same on a laptop and in CI).")
    narrator: str | None = Field(default=None, description="The narrator under test, `module:Attr`.")
    models: Models = Field(default_factory=Models, description="The model of each role.")
    spec_set: str = Field(description="Hash of the ids and fingerprints of every spec the run was given "
                                      "(shards included, not only their slice).")
    specs: int = Field(ge=0, description="Number of those specs.")
    pytest_ncp: str = Field(description="Version of pytest-ncp that ran.")
    ci_run: str | None = Field(default=None, description="The CI run (GITHUB_RUN_ID.GITHUB_RUN_ATTEMPT) shards of "
                                                         "one run share; null outside CI.")


class RunResults(_Record):
    """A run's ``results.json``: its settings, every episode, the figures, and whether it is complete."""

    version: Literal[3] = Field(default=RESULTS_VERSION, description="Format version; older versions are upgraded "
                                                                     "on load.")
    complete: bool = Field(description="True only when the run ended and every expected episode finished. "
                                       "False while it runs (the file is rewritten as episodes end), after "
                                       "an interruption or a dead worker, and for files that did not record it.")
    stopped: Stopped | None = Field(default=None, description="Why the run is not complete: running, "
                                                              "interrupted, unfinished, unrecorded; null when "
                                                              "complete.")
    expected: list[str] = Field(default_factory=list, description="Episode keys (`spec--rN`) the run set out to "
                                                                  "finish: for a shard, its slice.")
    finished: list[str] = Field(default_factory=list, description="Episode keys of the episodes in this file, "
                                                                  "sorted.")
    config: RunConfigRecord = Field(default_factory=RunConfigRecord, description="The run's settings.")
    episodes: list[EpisodeRecord] = Field(description="Every finished episode, sorted by spec id and repeat.")
    metrics: Metrics = Field(description="The run's figures, computed from `episodes`.")
    shard: ShardRecord | None = Field(default=None, description="Set when the file is one shard of a run.")
    canaries: Canaries | None = Field(default=None, description="The auditor canaries' score, with --canaries.")
    merge: MergeRecord | None = Field(default=None, description="Set on the output of `ncp merge`.")
    sequential: SequentialRecord | None = Field(default=None, description="Set when a sequential gate ran "
                                                                          "(`--sequential`): where the run "
                                                                          "stopped and why.")
    verdict: VerdictRecord | None = Field(default=None, description="The run's verdict, once the run has ended "
                                                                    "(absent while it runs and in files of older "
                                                                    "versions).")
    provenance: Provenance | None = Field(default=None, description="Git commit, branch and fingerprints of the "
                                                                    "run (`ncp history`); null in files written "
                                                                    "before it was recorded.")

    @model_validator(mode="after")
    def _consistent(self) -> RunResults:
        keys = [e.key for e in self.episodes]
        twice = sorted(k for k, n in Counter(keys).items() if n > 1)
        if twice:
            e = next(e for e in self.episodes if e.key == twice[0])
            raise ValueError(f"episode {episode_name(e.spec_id, e.repeat)} appears twice; a results file holds "
                             "each (spec_id, repeat) once")
        if sorted(self.finished) != sorted(keys):
            raise ValueError(f"'finished' ({len(self.finished)} key(s)) does not list the {len(keys)} episode(s) "
                             "of the file; it is written from them: restore the file or re-run")
        missing = sorted(set(self.expected) - set(keys))
        if self.complete and (missing or self.stopped is not None):
            raise ValueError(f"'complete' is true but {len(missing)} expected episode(s) are missing"
                             + (f" (first: {missing[0]})" if missing else f" and 'stopped' is {self.stopped!r}"))
        if not self.complete and self.stopped is None:
            raise ValueError("'complete' is false but 'stopped' does not say why")
        return self

    # --- what readers ask ----------------------------------------------------------------------------
    @property
    def missing(self) -> list[str]:
        """Expected episode keys with no episode in the file."""
        have = set(self.finished)
        return [k for k in self.expected if k not in have]

    def document(self) -> dict[str, Any]:
        """The file's JSON document: the fields the file (or the builder) gave, defaults left out."""
        return self.model_dump(mode="json", exclude_unset=True)

    def incompleteness(self) -> str | None:
        """Why the run is not complete, as a clause for messages; None when it is complete."""
        if self.complete:
            return None
        why = {"running": "it was still running when this file was written",
               "interrupted": "it was interrupted",
               "unfinished": "it ended with expected episodes missing",
               "unrecorded": "it was written by a pytest-ncp that did not record completeness (results version 1)",
               }.get(self.stopped or "", str(self.stopped))
        return f"{len(self.finished)} of {len(self.expected)} expected episode(s) finished; {why}" \
            if self.expected else why


def split_key(key: str) -> tuple[str, int]:
    """``caligari--r0`` -> ``("caligari", 0)``: the inverse of ``core.config.episode_key``."""
    spec_id, sep, repeat = key.rpartition("--r")
    if not sep or not spec_id or not repeat.isdigit():
        raise ValueError(f"{key!r} is not an episode key (expected spec--rN, e.g. caligari--r0)")
    return spec_id, int(repeat)


# --- checking and upgrading ------------------------------------------------------------------------------


def _upgrade_1(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Version 1 had no completeness record and stored metrics by hand: they are recomputed."""
    from pydantic import TypeAdapter

    try:
        episodes = TypeAdapter(list[EpisodeRecord]).validate_python(data["episodes"])
    except ValidationError as exc:
        raise RunFileError(_first_problem(exc, name, prefix=("episodes",))) from None
    config = data.get("config") or {}
    turn = config.get("survival_turn") if isinstance(config, dict) else None
    if not (isinstance(turn, int) and turn >= 0):
        # The rule runs of version 1 applied (core/options.survival_turn): 20, or max_turns when lower.
        max_turns = config.get("max_turns") if isinstance(config, dict) else None
        turn = survival_turn(max_turns) if isinstance(max_turns, int) and max_turns >= 1 else DEFAULT_SURVIVAL_TURN
    return {**data, "version": 2, "complete": False, "stopped": "unrecorded", "expected": [],
            "finished": sorted(e.key for e in episodes),
            "metrics": compute_metrics(episodes, survival_turn=turn)}


def _upgrade_2(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Version 3 stores the same episode fields (they became the engine's own record): nothing to change."""
    return {**data, "version": 3}


# version -> the step that turns a document of that version into one of the next version.
_UPGRADES: dict[int, Callable[[dict[str, Any], str], dict[str, Any]]] = {1: _upgrade_1, 2: _upgrade_2}
SUPPORTED_VERSIONS: tuple[int, ...] = (*sorted(_UPGRADES), RESULTS_VERSION)


def parse_results(data: Any, name: str) -> RunResults:
    """Check a results document (parsed JSON) and return it as a ``RunResults``, upgrading older versions.

    ``name`` starts every message: the file, or a role such as ``base`` for a document in memory.
    Raises ``RunFileError`` (a ValueError) naming the entry and what is wrong.
    """
    if isinstance(data, RunResults):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise RunFileError(f"{name}: not an ncp results file: expected an object with an 'episodes' list ({_HINT})")
    version = data.get("version", 1)  # the first files had no version
    if not isinstance(version, int) or isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise RunFileError(f"{name}: results version {version!r} is not supported (this pytest-ncp reads versions "
                           f"{', '.join(map(str, SUPPORTED_VERSIONS))}); read it with the pytest-ncp that wrote it")
    if data.get("config") is not None and not isinstance(data["config"], dict):
        raise RunFileError(f"{name}: 'config' must be an object")
    data = {**data, "config": data.get("config") or {}}
    while version != RESULTS_VERSION:
        data = _UPGRADES[version](data, name)
        version = data["version"]
    try:
        return RunResults.model_validate(data)
    except ValidationError as exc:
        raise RunFileError(_first_problem(exc, name)) from None


def _where(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_EXPECTED = {"int_type": "a whole number", "float_type": "a number", "string_type": "text (a string)",
             "bool_type": "true or false", "list_type": "a list", "dict_type": "an object",
             "model_type": "an object", "model_attributes_type": "an object"}


def _first_problem(exc: ValidationError, name: str, prefix: tuple[int | str, ...] = ()) -> str:
    """One line for the first problem pydantic found, in the words of the file: ``name: episodes[0].turns: ...``."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = (*prefix, *first["loc"])
    if first["type"] == "missing":
        parent = loc[:-1]
        locs = [(*prefix, *e["loc"]) for e in errors if e["type"] == "missing"]
        keys = [loc[-1] for loc in locs if loc[:-1] == parent]
        where = _where(parent)
        return f"{name}: {where + ': ' if where else ''}missing {', '.join(map(repr, keys))}; {_HINT}"
    where = _where(loc)
    got = first.get("input")
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind in ("greater_than_equal", "less_than_equal") and isinstance(got, int) and not isinstance(got, float):
        what = f"a whole number {'>=' if kind == 'greater_than_equal' else '<='} {ctx.get('ge', ctx.get('le'))}"
    elif kind in ("greater_than_equal", "less_than_equal"):
        what = f"a number {'>=' if kind == 'greater_than_equal' else '<='} {ctx.get('ge', ctx.get('le'))}"
    elif kind in ("literal_error", "enum"):
        what = f"one of {ctx.get('expected')}"
    elif kind in _EXPECTED:
        what = _EXPECTED[kind]
    else:  # a consistency check of the whole file, or another rule: pydantic's own words
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{name}: {where + ': ' if where else ''}{message}"
    return f"{name}: {where}: expected {what}, got {got!r}"


# --- locating, loading, building, writing ----------------------------------------------------------------


def results_path(path: str | Path) -> Path:
    """``DIR`` -> ``DIR/results.json``; a file path is returned as it is."""
    p = Path(path)
    return p / RESULTS_FILE if p.is_dir() else p


def load_results(path: str | Path) -> RunResults:
    """Load and check a results file, or the ``results.json`` of a run directory (DESIGN 7.4)."""
    p = results_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file; {_HINT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{p}: cannot read it ({exc}); {_HINT}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); a run that was killed while "
                           "writing leaves the previous complete file, so re-run or restore it") from None
    return parse_results(data, str(p))


def build_results(config: Mapping[str, Any], episodes: Iterable[EpisodeRecord], *, survival_turn: int = 20,
                  expected: Iterable[str] | None = None, stopped: Stopped | None = None,
                  shard: Mapping[str, int] | None = None, canaries: Mapping[str, Any] | None = None,
                  merge: Mapping[str, Any] | None = None, sequential: Mapping[str, Any] | None = None,
                  verdict: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None
                  ) -> RunResults:
    """The results of a run from its episode records (``EpisodeResult.record``).

    ``expected`` are the episode keys the run set out to finish (default: the episodes given).
    ``stopped`` is None when the run has ended, ``"running"`` while a host rewrites the file as
    episodes end, ``"interrupted"`` after Ctrl-C. The run is complete when it ended and no expected
    episode is missing; an ended run with missing episodes is ``"unfinished"``. ``sequential`` is
    ``SequentialRun.to_dict()``: its ``unstarted`` episodes are not expected (a run that stopped early by
    design is complete once every episode it started has finished). ``verdict`` is the ended run's
    ``VerdictRecord`` (``report.verdict.verdict_record``).
    Raises ``RunFileError`` when a record does not fit the format (a bug of the writer, never silent).
    """
    records = sorted(episodes, key=lambda e: (e.spec_id, e.repeat))
    # The structured-output mode each model ended up with (``auto`` chooses per endpoint and model);
    # gathered from the episodes, so it is the same with or without pytest-xdist.
    modes: dict[str, str] = {}
    for e in records:
        modes.update(e.structured_output)
    finished = sorted(e.key for e in records)
    planned = sorted(set(expected)) if expected is not None else finished
    if sequential is not None:
        planned = sorted(set(planned) - set(sequential.get("unstarted") or ()))
    if stopped is None and set(planned) - set(finished):
        stopped = "unfinished"
    data: dict[str, Any] = {
        "version": RESULTS_VERSION, "complete": stopped is None, "stopped": stopped,
        "expected": planned, "finished": finished,
        "config": {**config, "structured_output_used": modes}, "episodes": records,
        "metrics": compute_metrics(records, survival_turn=survival_turn),
        "shard": dict(shard) if shard is not None else None,
        "canaries": dict(canaries) if canaries is not None else None,
        "merge": dict(merge) if merge is not None else None,
    }
    if sequential is not None:  # only then: files of runs without it keep their keys (results.py "Growing")
        data["sequential"] = dict(sequential)
    if verdict is not None:
        data["verdict"] = dict(verdict)
    if provenance is not None:
        data["provenance"] = dict(provenance)
    try:
        return RunResults.model_validate(data)
    except ValidationError as exc:
        raise RunFileError(_first_problem(exc, "results being written")) from None


def write_results(out_dir: str | Path, results: RunResults) -> Path:
    """Write ``results`` as ``out_dir/results.json`` atomically: readers never see half a file.

    Traces inside the results folder are recorded relative to it, so the folder can move whole.
    """
    out = Path(out_dir)
    document = results.document()
    for e in document["episodes"]:
        if e.get("trace"):
            e["trace"] = trace_reference(e["trace"], out)
    return atomic_write_text(out / RESULTS_FILE, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def results_json_schema() -> dict[str, Any]:
    """The JSON Schema of results.json (``ncp schema --results``)."""
    schema = RunResults.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-ncp results.json"
    return schema


__all__ = ["RESULTS_FILE", "RESULTS_VERSION", "SUPPORTED_VERSIONS", "Agreement", "Blame", "BlameRow", "Canaries",
           "CanaryCase", "EpisodeRecord", "ErrorRecord", "Failure", "FlagCounts", "ForkOrigin", "MergeRecord",
           "MergedSequentialRecord", "Metrics", "Models", "NodeReached", "PairedRecord", "PlayerFault", "Provenance",
           "RunConfigRecord", "RunResults", "ScreenProblem", "Screening", "SequentialGateRecord", "SequentialOutcome",
           "SequentialRecord", "ShardRecord", "SpeculativeUsage", "Stopped", "SurvivalPoint", "VerdictCheck",
           "VerdictRecord",
           "build_results", "load_results", "parse_results", "results_json_schema", "results_path", "split_key",
           "write_results"]
