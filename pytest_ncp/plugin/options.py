"""Option, ini and marker names (named once, imported by tests), resolved into one Settings object.

Options stay strings until configure time, where they are validated together; a bad value stops the
run with ``pytest.UsageError`` (exit code 4) saying what is valid. Precedence, resolved here:
command line > ini (``ncp_*``) > default. For hand-written tests, ``run_episode`` applies the
``@pytest.mark.ncp(...)`` marker over these settings, and its own arguments over the marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..core.config import (DEFAULT_AUDITOR_MODEL, DEFAULT_MAX_TOKENS, OUTPUT_MODES, PLAYER_KINDS, SYSTEM_PROMPT_MODES,
                     RunConfig, parse_max_tokens)
from ..analysis.metrics import Gate

GROUP = "ncp"
MARKER = "ncp"
PROPERTY_PREFIX = "ncp."

# name -> (help, default, type); each becomes --ncp-NAME and ini ncp_NAME (dashes as underscores)
OPTIONS: dict[str, tuple[str, Any, type]] = {
    "narrator": ("narrator under test as module:Attr (e.g. my_agent:Narrator); without it no spec test is "
                 "collected", None, str),
    "specs": ("spec files or directories (repeatable; default: ./specs)", None, list),
    "player": (f"player: {' | '.join(PLAYER_KINDS)} (default: scripted)", "scripted", str),
    "narrator-model": ("litellm model for built-in narrators", None, str),
    "player-model": ("litellm model for simulated players", None, str),
    "auditor-model": (f"litellm model of the auditor (default: {DEFAULT_AUDITOR_MODEL})", DEFAULT_AUDITOR_MODEL, str),
    "api-base": ("OpenAI-compatible endpoint for every role; overrides litellm's environment variables", None, str),
    "max-turns": ("turn limit per episode (default: 100)", 100, int),
    "repeats": ("episodes per spec (default: 1)", 1, int),
    "concurrency": ("episodes and model calls in flight (default: 16)", 16, int),
    "concurrency-per-endpoint": ("model requests in flight per endpoint (default: 4 per episode); 1 for servers "
                                 "that answer one request at a time (llama.cpp)", None, int),
    "timeout": ("seconds per model request (default: 120); a call with its retries gets 2.5x that, or "
                "--ncp-deadline", 120.0, float),
    "deadline": ("seconds per model call including its retries (default: 2.5 x --ncp-timeout)", None, float),
    "max-tokens": ("ROLE=N limit on generated tokens per call, repeatable or comma-separated; roles and "
                   "defaults: " + ", ".join(f"{r}={n}" for r, n in DEFAULT_MAX_TOKENS.items()), None, dict),
    "structured-output": (f"how auditor answers are asked for: {' | '.join(OUTPUT_MODES)} (default: auto tries "
                          "json_schema, then json_object, then prompt, once per endpoint and model)", "auto", str),
    "system-prompt": ("keep | merge: merge folds system prompts into the first user message, for chat "
                      "templates that drop them (default: keep)", "keep", str),
    "min-survival": ("session gate RATE[@TURN] (TURN defaults to 20): conflicts become xfail and the session "
                     "fails only when survival@TURN < RATE", None, str),
    "report": ("write DIR/results.json, DIR/report.html and DIR/traces/", None, str),
    "baseline": ("compare with an earlier results.json: the session fails only when survival@TURN is "
                 "significantly lower (exact McNemar over specs, alpha 0.05)", None, str),
    "resume": ("with --ncp-report=DIR: keep episodes already finished there instead of running them again; "
               "refuses when the settings or a spec changed since (see --ncp-force)", False, bool),
    "force": ("with --ncp-resume: re-run the episodes whose settings or spec changed instead of refusing",
              False, bool),
    "max-error-rate": ("share of episodes allowed to end in an auditor, model or player error (unknown outcome), "
                       "e.g. 0.05 (5 percent); within it such episodes are skipped, above it the session exits 6 "
                       "(default 0: any such error)", "0", str),
    "record-mode": ("record/replay model calls to cassettes: none (replay only) | once | new_episodes | all "
                    "(default: off)", None, str),
    "cassettes": ("cassette directory for --ncp-record-mode (default: ./cassettes)", None, str),
    "no-pipeline": ("audit each turn before playing the next (the sequential reference schedule; results are "
                    "identical, only slower)", False, bool),
    "canaries": ("audit K gold cases (known violations and clean turns) beside the episodes with the same "
                 "auditor; they never touch episode results (default: 0, off)", 0, int),
    "min-canary-recall": ("with --ncp-canaries: the session fails when the auditor catches fewer canary violations, "
                          "or passes fewer clean canaries, than this share (default: 0.8)", 0.8, float),
    "canary-set": ("gold set the canaries come from (default: ./calibration)", None, str),
    "canary-seed": ("seed of the canary sample (default: 0): the same seed and set give the same canaries", 0, int),
    "failures": ("failures folder (commit it): the fork point of every confirmed conflict is stored there, and "
                 "stored failures run first as fork[<spec>@t<turn>] tests", None, str),
    "fork-samples": ("responses sampled per stored failure (fork[...] tests; default: 3)", 3, int),
    "failures-only": ("run only the stored failures of --ncp-failures (the quick check after a prompt change)",
                      False, bool),
    "demo": ("route every model call to the bundled scripted server (offline demo; judges nothing real)",
             False, bool),
}


def cli_flag(name: str) -> str:
    return f"--ncp-{name}"


def ini_key(name: str) -> str:
    return "ncp_" + name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "narrative commitment preservation (pytest-ncp)")
    for name, (help_text, _default, kind) in OPTIONS.items():
        dest = ini_key(name)
        if kind is bool:
            group.addoption(cli_flag(name), action="store_true", default=None, dest=dest, help=help_text)
            parser.addini(ini_key(name), help_text, type="bool", default=False)
        elif kind is list:
            group.addoption(cli_flag(name), action="append", default=None, dest=dest, metavar="PATH", help=help_text)
            parser.addini(ini_key(name), help_text, type="paths", default=[])
        elif kind is dict:
            group.addoption(cli_flag(name), action="append", default=None, dest=dest, metavar="ROLE=N", help=help_text)
            parser.addini(ini_key(name), help_text, type="args", default=[])
        else:
            group.addoption(cli_flag(name), default=None, dest=dest, help=help_text)
            parser.addini(ini_key(name), help_text, default=None)


@dataclass
class Settings:
    """Everything the plugin needs, validated. ``enabled`` is False when no narrator is configured."""

    run: RunConfig
    specs: list[Path]
    gate: Gate | None = None
    report: Path | None = None
    demo: bool = False
    resume: bool = False
    force: bool = False
    max_error_rate: float = 0.0
    baseline: Path | None = None
    canaries: int = 0
    min_canary_recall: float = 0.8
    canary_set: Path | None = None
    canary_seed: int = 0
    failures: Path | None = None      # --ncp-failures DIR (see failures.py)
    fork_samples: int = 3
    failures_only: bool = False
    sources: dict[str, str] = field(default_factory=dict)  # where each value came from, for messages

    @property
    def enabled(self) -> bool:
        return bool(self.run.narrator)


# The resolved settings of a session, set at configure time (``plugin.pytest_configure``).
SETTINGS_KEY = pytest.StashKey[Settings]()


def _raw(config: pytest.Config, name: str) -> tuple[Any, str]:
    value = config.getoption(ini_key(name), default=None)
    if value is not None:
        return value, cli_flag(name)
    ini = config.getini(ini_key(name))
    if ini not in (None, "", []):
        return ini, f"ini {ini_key(name)}"
    return OPTIONS[name][1], "default"


def resolve(config: pytest.Config) -> Settings:
    """Read and validate every ncp option. Raises pytest.UsageError listing what is wrong and what is valid."""
    problems: list[str] = []
    sources: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name in OPTIONS:
        values[name], sources[name] = _raw(config, name)

    def integer(name: str) -> int:
        raw = values[name]
        try:
            number = int(raw)
        except (TypeError, ValueError):
            problems.append(f"{sources[name]}={raw!r}: expected a whole number >= 1")
            return int(OPTIONS[name][1])
        if number < 1:
            problems.append(f"{sources[name]}={raw!r}: expected a whole number >= 1")
        return number

    def positive_number(name: str) -> float | None:
        raw = values[name]
        if raw is None:
            return None
        try:
            number = float(raw)
        except (TypeError, ValueError):
            number = 0.0
        if not number > 0:
            problems.append(f"{sources[name]}={raw!r}: expected a number of seconds > 0")
            return OPTIONS[name][1]
        return number

    def choice(name: str, valid: tuple[str, ...]) -> str:
        value = str(values[name])
        if value not in valid:
            problems.append(f"{sources[name]}={value!r}: valid: {', '.join(valid)}")
            return str(OPTIONS[name][1])
        return value

    try:
        max_tokens = parse_max_tokens(values["max-tokens"])
    except ValueError as exc:
        problems.append(f"{sources['max-tokens']}: {exc}")
        max_tokens = {}
    per_endpoint = integer("concurrency-per-endpoint") if values["concurrency-per-endpoint"] is not None else None
    player = str(values["player"])
    if player not in PLAYER_KINDS:
        problems.append(f"{sources['player']}={player!r}: unknown player; valid: {', '.join(PLAYER_KINDS)}")
    from ..analysis.metrics import parse_error_rate

    max_error_rate = 0.0
    try:
        max_error_rate = parse_error_rate(values["max-error-rate"])
    except ValueError as exc:
        problems.append(f"{sources['max-error-rate']}: {exc}")
    gate = None
    if values["min-survival"]:
        try:
            gate = Gate.parse(str(values["min-survival"]))
        except ValueError as exc:
            problems.append(f"{sources['min-survival']}: {exc}")
    demo = bool(values["demo"])
    run = RunConfig(
        narrator=values["narrator"] or None,
        narrator_model=values["narrator-model"] or ("openai/demo-narrator" if demo else None),
        player=player,
        player_model=values["player-model"] or ("openai/demo-player" if demo and player != "scripted" else None),
        auditor_model="openai/demo-auditor" if demo and sources["auditor-model"] == "default"
        else str(values["auditor-model"]),
        api_base=values["api-base"] or None,
        max_turns=integer("max-turns"),
        repeats=integer("repeats"),
        concurrency=integer("concurrency"),
        concurrency_per_endpoint=per_endpoint,
        timeout=positive_number("timeout") or 120.0,
        deadline=positive_number("deadline"),
        max_tokens=max_tokens,
        structured_output=choice("structured-output", OUTPUT_MODES),
        system_prompt=choice("system-prompt", SYSTEM_PROMPT_MODES),
        # The headline turn is one the run can reach: survival@5 for a 5-turn run, not survival@20.
        survival_turn=gate.turn if gate else min(20, integer("max-turns")),
        record_mode=values["record-mode"] or None,
        cassettes=str(values["cassettes"] or Path(config.rootpath) / "cassettes") if values["record-mode"] else None,
        demo=demo,
        pipeline=not values["no-pipeline"],
    )
    problems.extend(p for p in run.validate() if "record mode" in p or "deadline" in p)
    if player in PLAYER_KINDS and player != "scripted" and not run.player_model:
        problems.append(f"{cli_flag('player')}={player} needs {cli_flag('player-model')} (e.g. openai/gpt-4o-mini)")
    if run.narrator:
        from ..engine.narrators import NarratorLoadError, load_narrator

        try:
            load_narrator(run.narrator)
        except NarratorLoadError as exc:
            problems.append(f"{sources['narrator']}: {exc}")
    specs = [Path(p) for p in (values["specs"] or [])] or [Path(config.rootpath) / "specs"]
    if run.narrator:
        missing = [str(p) for p in specs if not p.exists()]
        if missing:
            problems.append(f"{sources['specs']}: no such spec file or directory: {', '.join(missing)}")
    if problems:
        raise pytest.UsageError("pytest-ncp: " + "\n  ".join(["invalid options:", *problems]))
    report = Path(values["report"]) if values["report"] else None
    resume = bool(values["resume"])
    if resume and report is None:
        problems.append(f"{cli_flag('resume')} needs {cli_flag('report')}=DIR (the run to continue)")
    baseline = Path(values["baseline"]) if values["baseline"] else None
    if baseline is not None and not baseline.is_file():
        problems.append(f"{sources['baseline']}: no such results file: {baseline} (a results.json from --ncp-report "
                        "or ncp run --out)")
    failures = Path(values["failures"]) if values["failures"] else None
    if failures is not None and not failures.is_absolute():
        failures = Path(config.invocation_params.dir) / failures
    fork_samples = integer("fork-samples")
    if values["failures-only"] and failures is None:
        problems.append(f"{cli_flag('failures-only')} needs {cli_flag('failures')}=DIR (the stored failures)")
    canaries, min_canary_recall, canary_seed = _canary_numbers(values, sources, problems)
    canary_set = Path(values["canary-set"] or Path(config.rootpath) / "calibration")
    if canaries and not (canary_set / "cases").is_dir():
        problems.append(f"{sources['canary-set'] if values['canary-set'] else cli_flag('canaries')}: no gold set at "
                        f"{canary_set} (a directory with cases/ and specs/); set {cli_flag('canary-set')}=DIR")
    if problems:
        raise pytest.UsageError("pytest-ncp: " + "\n  ".join(["invalid options:", *problems]))
    return Settings(failures=failures, fork_samples=fork_samples, failures_only=bool(values["failures-only"]),
                    run=run, specs=specs, gate=gate, report=report, demo=demo, resume=resume, baseline=baseline,
                    sources=sources, force=bool(values["force"]), max_error_rate=max_error_rate,
                    canaries=canaries, min_canary_recall=min_canary_recall, canary_set=canary_set,
                    canary_seed=canary_seed)


def _canary_numbers(values: dict[str, Any], sources: dict[str, str], problems: list[str]) -> tuple[int, float, int]:
    numbers: list[Any] = []
    for name, kind, low, high in (("canaries", int, 0, None), ("min-canary-recall", float, 0.0, 1.0),
                                  ("canary-seed", int, 0, None)):
        raw = values[name]
        try:
            number = kind(raw)
            if number < low or (high is not None and number > high):
                raise ValueError
        except (TypeError, ValueError):
            expected = f"a rate between {low} and {high}" if high is not None else f"a whole number >= {low}"
            problems.append(f"{sources[name]}={raw!r}: expected {expected}")
            number = OPTIONS[name][1]
        numbers.append(number)
    return numbers[0], numbers[1], numbers[2]
