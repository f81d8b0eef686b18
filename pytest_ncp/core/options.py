"""Every run option, declared once: its name, parser, default, help and which front ends expose it.

From ``OPTIONS`` are generated the pytest options (``--ncp-NAME`` in ``parser.getgroup("ncp")``) and their
ini keys (``ncp_NAME``, ``plugin/options.py``), the arguments of ``ncp run`` / ``ncp demo`` and the model-call
arguments every ``ncp`` command that calls a model shares (``cli/common.py``), and ``RunConfig``'s defaults
and validation (``core/config.py``). Values stay strings (or plain lists of strings) until one function,
``resolve_options``, parses them all and collects every problem in the words of the front end that took
them (``--ncp-max-turns='0': expected a whole number >= 1`` in pytest, ``--max-turns='0': ...`` in ``ncp``).
This module imports nothing outside the standard library: the pytest plugin loads it in every run.

Adding an option is one entry here plus the code that uses it. For example ``--max-cost`` (``ncp run``,
``ncp demo``) and ``--ncp-max-cost`` / ini ``ncp_max_cost`` (pytest), recorded in results.json but not part
of the resume fingerprint, is the entry ``Option("max-cost", dollars, None, "...", config=RECORDED,
metavar="USD")``, where ``dollars`` is a parser like ``seconds`` (a ValueError saying what is expected). The
engine reads it as ``RunConfig.max_cost``, declared with its type as ``max_cost: float | None =
default("max-cost")`` (``tests/unit/test_option_table.py`` fails until the field exists, and until README's
option tables list ``--max-cost`` and ``--ncp-max-cost``). An option only the front ends read (``config=None``, e.g.
``--margin``) has no field: ``ncp`` reads ``args.margin``, the plugin ``settings.options["margin"]``.
``pytest=False`` keeps an option out of pytest, ``ncp=None`` out of ``ncp``; ``ncp=CALLS`` puts it on
every command that calls a model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

from .bundled import NAMES as BUNDLED_NAMES
from .bundled import BundledDataMissing, resolve as resolve_bundled

# --- what the values may be ----------------------------------------------------------------------

PLAYER_KINDS: tuple[str, ...] = ("scripted", "adversarial", "natural")
DEFAULT_AUDITOR_MODEL = "openai/gpt-4o-mini"
ROLES: tuple[str, ...] = ("narrator", "player", "auditor", "author")  # author: drafting specs
# Every call is bounded: a model that never stops (a base model, a chat template that lost its stop
# token) would otherwise generate until its context is full. Per role, overridable (--max-tokens ROLE=N).
DEFAULT_MAX_TOKENS: dict[str, int] = {"narrator": 600, "player": 150, "auditor": 1024, "author": 4096}
# A narrator response longer than this is the narrator's error, before any audit call (--max-response-chars):
# about 2,000 tokens, over three times the built-in narrator's 600-token limit, well inside any auditor's window.
DEFAULT_MAX_RESPONSE_CHARS = 8000
# The same limit in the unit an endpoint counts (--max-response-tokens): the auditor model's tokenizer where
# litellm knows it, a conservative bound otherwise (llm/tokens.py). 8000 hieroglyphs are about 32,000 tokens.
DEFAULT_MAX_RESPONSE_TOKENS = 2000
# The auditor's input window when litellm's model map does not know the model (--auditor-context-tokens):
# the smallest window common among today's hosted and self-hosted chat models.
DEFAULT_AUDITOR_CONTEXT_TOKENS = 32768
# How structured (auditor, spec-drafting) answers are asked for. ``auto`` tries the others in this
# order, once per endpoint and model, moving on only when the server rejects the response format.
OUTPUT_MODES: tuple[str, ...] = ("auto", "json_schema", "json_object", "prompt")
# ``merge`` folds system prompts into the first user message, for chat templates that drop them.
SYSTEM_PROMPT_MODES: tuple[str, ...] = ("keep", "merge")
# Record / replay of model calls (``llm/cassette.py`` says what each mode does); pytest-recording's names.
RECORD_MODES: tuple[str, ...] = ("none", "once", "new_episodes", "all")
# The headline survival figure is survival@20 (the paper's), or survival@max_turns for a shorter run.
DEFAULT_SURVIVAL_TURN = 20
# ``--ncp-demo`` and ``ncp demo``: every role is the bundled scripted server under these names.
DEMO_MODELS: dict[str, str] = {"narrator": "openai/demo-narrator", "player": "openai/demo-player",
                               "auditor": "openai/demo-auditor"}


# --- parsers: one raw value (a string as typed, or a value a default or a caller holds) -> the value ----
# Each raises ValueError saying what is expected, without repeating the value: the caller names the
# option and the value as the user typed them.

Parser = Callable[[Any], Any]


def text(raw: Any) -> str:
    return str(raw)


def path_or_bundled(raw: Any) -> str:
    """A path, or the name of data bundled with the package (``ncp-bench``, ``ncp-gold``: core/bundled.py),
    which stands for its folder. A bundled folder that is not installed stays a name: the check that the path
    exists then says so."""
    try:
        return str(resolve_bundled(str(raw)))
    except BundledDataMissing:
        return str(raw)


def flag(raw: Any) -> bool:
    if isinstance(raw, str):
        if raw.strip().lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError("expected true or false")
        return raw.strip().lower() in ("1", "true", "yes", "on")
    return bool(raw)


def whole(minimum: int) -> Parser:
    """A whole number >= ``minimum``."""
    def parse(raw: Any) -> int:
        try:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            number = int(raw)
        except (TypeError, ValueError):
            number = minimum - 1
        if number < minimum:
            raise ValueError(f"expected a whole number >= {minimum}")
        return number

    parse.__name__ = f"whole_number_at_least_{minimum}"
    return parse


def seconds(raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not value > 0:  # NaN too
        raise ValueError("expected a number of seconds > 0")
    return value


def dollars(raw: Any) -> float:
    try:
        value = float(str(raw).strip().lstrip("$"))
    except (TypeError, ValueError):
        value = math.nan
    if not value > 0 or math.isinf(value):  # NaN too
        raise ValueError("expected an amount of US dollars > 0, such as 5 or 0.50")
    return value


def share(raw: Any) -> float:
    """A share within 0..1 (``0.05``) or a percentage (``5%``)."""
    s = str(raw).strip()
    try:
        value = float(s.rstrip("%")) / (100 if s.endswith("%") else 1)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN too
        raise ValueError("expected a share within 0..1 such as 0.05, or a percentage such as 5%")
    return value


def alpha(raw: Any) -> float:
    """A probability strictly within (0, 1): the chance of a wrong early decision (``0.05``)."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:  # NaN too
        raise ValueError("expected a number within (0, 1) such as 0.05")
    return value


def margin(raw: Any) -> float:
    """A share of survival below 1 (``0.05``, ``5%``): a drop up to it is not a regression."""
    value = share(raw)
    if value >= 1.0:
        raise ValueError("expected a share within 0..1 (below 1) such as 0.05, or a percentage such as 5%")
    return value


def choice(label: str, valid: tuple[str, ...]) -> Parser:
    def parse(raw: Any) -> str:
        if str(raw) not in valid:
            raise ValueError(f"unknown {label}; valid: {', '.join(valid)}")
        return str(raw)

    parse.__name__ = f"one_of_{label.replace(' ', '_')}"
    return parse


def parse_gate(raw: Any) -> tuple[float, int]:
    """``RATE[@TURN]`` -> (rate, turn): ``0.4@20``, ``40%`` (TURN defaults to 20)."""
    rate_s, _, turn_s = str(raw).strip().partition("@")
    try:
        rate = float(rate_s.rstrip("%")) / (100 if rate_s.endswith("%") else 1)
        turn = int(turn_s) if turn_s else DEFAULT_SURVIVAL_TURN
    except ValueError:
        raise ValueError("expected RATE[@TURN], e.g. 0.4@20 or 40%@20") from None
    if not 0.0 <= rate <= 1.0 or turn < 0:
        raise ValueError("RATE must be within 0..1 (or 0%..100%), TURN >= 1")
    if turn == 0:
        raise ValueError("TURN must be at least 1: survival@0 is 100% before any turn is played, so a gate there "
                         "can never fail")
    return rate, turn


def gate(raw: Any) -> str:
    """A survival gate stays text (``analysis.metrics.Gate.parse`` reads it); checked here."""
    parse_gate(raw)
    return str(raw).strip()


def parse_shard(raw: Any) -> tuple[int, int]:
    """``i/n`` with 1 <= i <= n -> (i, n)."""
    left, sep, right = str(raw).partition("/")
    try:
        index, count = int(left), int(right)
    except ValueError:
        index = count = 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise ValueError("expected i/n with 1 <= i <= n (e.g. 1/4 ... 4/4)")
    return index, count


def shard(raw: Any) -> str:
    parse_shard(raw)
    return str(raw)


def max_tokens(raw: Any) -> dict[str, int]:
    """``narrator=300`` or ``auditor=800,player=100`` (or a mapping) -> ``{"narrator": 300, ...}``."""
    if isinstance(raw, Mapping):
        parts = [f"{role}={number}" for role, number in raw.items()]
    else:
        parts = [p.strip() for p in str(raw).replace(" ", ",").split(",") if p.strip()]
    limits: dict[str, int] = {}
    for part in parts:
        where = f" (in {part!r})" if len(parts) > 1 else ""
        role, sep, number = part.partition("=")
        if not sep or role not in ROLES:
            raise ValueError(f"expected ROLE=N with ROLE one of {', '.join(ROLES)}{where}")
        try:
            limits[role] = whole(1)(number.strip())
        except ValueError:
            raise ValueError(f"ROLE=N: N must be a whole number >= 1{where}") from None
    return limits


def workers(raw: Any) -> int | str:
    if str(raw) == "auto":
        return "auto"
    try:
        number: int = whole(1)(raw)
    except ValueError:
        raise ValueError("expected a whole number >= 1, or auto") from None
    return number


# --- the table -----------------------------------------------------------------------------------

VALUE, FLAG, PATHS, ITEMS = "value", "flag", "paths", "items"  # how an option is given (``Option.kind``)
RUN, CALLS = "run", "calls"  # ncp: ``ncp run`` and ``ncp demo``; every ncp command that calls a model
# How RunConfig holds an option: part of the resume fingerprint (what an episode's outcome depends on);
# recorded in results.json's config (how the run was served); only scheduling (left out of results.json,
# so runs differing only there compare, merge and resume as one configuration).
FINGERPRINT, RECORDED, SCHEDULE = "fingerprint", "recorded", "schedule"


@dataclass(frozen=True)
class Option:
    """One option of a run. ``help`` may name another option as ``{other-name}``, written as each front end
    spells it; ``(default: ...)`` is appended from ``default`` unless ``help`` already says it."""

    name: str                   # --NAME in ncp, --ncp-NAME and ini ncp_NAME (dashes as underscores) in pytest
    parse: Parser               # one raw value -> the value; ValueError says what is valid
    default: Any
    help: str
    kind: str = VALUE           # VALUE; FLAG (store_true); PATHS (repeatable: a list); ITEMS (repeatable: merged)
    pytest: bool = True         # exposed as --ncp-NAME / ncp_NAME
    ncp: str | None = RUN       # RUN, CALLS, or None (pytest only)
    ncp_name: str | None = None  # the ncp flag when it differs (--out for --ncp-report)
    ncp_required: bool = False  # ``ncp run`` cannot start without it
    config: str | None = None   # FINGERPRINT, RECORDED, SCHEDULE: a RunConfig field; None: front ends only
    config_field: str | None = None  # that field, when not the name with underscores
    to_field: Callable[[Any], Any] | None = None  # value -> field (--no-pipeline -> pipeline=False)
    needs: tuple[str, str] | None = None  # (an option this one means nothing without, why)
    metavar: str | None = None  # shown by ncp's help (pytest shows NCP_NAME)
    shown_default: str | None = None  # for the help, when the default is a rule rather than a value
    defaults: Mapping[str, Any] = field(default_factory=dict)  # front ends with a default of their own
    relative_default: bool = False  # a path: pytest reads the default relative to the rootdir
    notes: Mapping[str, str] = field(default_factory=dict)  # help added by one front end ("pytest" or "ncp")

    @property
    def dest(self) -> str:
        """The attribute of ``ncp``'s parsed arguments: ``args.max_turns``, ``args.out``."""
        return (self.ncp_name or self.name).replace("-", "_")

    @property
    def field_name(self) -> str:
        return self.config_field or self.name.replace("-", "_")

    def default_for(self, front: str) -> Any:
        default = self.defaults.get(front, self.default)
        if self.kind == PATHS:
            return [self.parse(item) for item in default or ()]
        if self.kind == ITEMS:
            return merge_items(self.parse(item) for item in default or ())
        return default if default is None or self.kind == FLAG else self.parse(default)

    def field_default(self) -> Any:
        """RunConfig's default for this option's field."""
        value = self.default_for("")
        return self.to_field(value) if self.to_field else value

    def help_for(self, front: Front) -> str:
        shown = _with_flags(self.help + self.notes.get("pytest" if front.is_pytest else "ncp", ""), front)
        default = self.default_text(front)
        return shown if default is None or "default" in shown else f"{shown} (default: {default})"

    def default_text(self, front: Front) -> str | None:
        """The default as the help (and README's option tables) show it; None when there is none to show."""
        default = self.defaults.get(front.name, self.default)
        if self.shown_default is not None:
            return _with_flags(self.shown_default, front)
        if default is None or default in ((), "") or self.kind == FLAG:
            return None
        if self.relative_default:  # pytest: in the rootdir; ncp: in the working directory (a bundled name: anywhere)
            return " ".join(d if d in BUNDLED_NAMES else f"./{d}"
                            for d in ([default] if isinstance(default, str) else default))
        if isinstance(default, (list, tuple)):
            return " ".join(map(str, default))
        if isinstance(default, float) and default.is_integer():
            return str(int(default))
        return str(default)


def _with_flags(text: str, front: Front) -> str:
    """``{other-name}`` in help text -> that option as ``front`` spells it."""
    class Flags(dict[str, str]):
        def __missing__(self, name: str) -> str:
            return front.flag(name)

    return text.format_map(Flags())


def merge_items(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        merged.update(part)
    return merged


def _not(value: Any) -> bool:
    return not value


OPTIONS: tuple[Option, ...] = (
    Option("narrator", text, None, "narrator under test as module:Attr (e.g. my_agent:Narrator or "
           "pytest_ncp.narrators:LLMNarrator)", config=FINGERPRINT, ncp_required=True, metavar="MODULE:ATTR"),
    Option("specs", path_or_bundled, ("specs",), "spec files or directories; ncp-bench: the NCP-Bench specs "
           "installed with the package", kind=PATHS, metavar="PATH", relative_default=True, defaults={"demo": ("ncp-bench",)}),
    Option("player", choice("player", PLAYER_KINDS), "scripted", "who plays: the spec's scripted inputs, or an "
           "LLM-simulated player (needs {player-model})", config=FINGERPRINT,
           metavar="{" + ",".join(PLAYER_KINDS) + "}"),
    Option("narrator-model", text, None, "litellm model for built-in narrators (e.g. openai/gpt-4o-mini)",
           config=FINGERPRINT, metavar="MODEL"),
    Option("player-model", text, None, "litellm model for simulated players", config=FINGERPRINT,
           metavar="MODEL"),
    Option("auditor-model", text, DEFAULT_AUDITOR_MODEL, "litellm model of the auditor", config=FINGERPRINT,
           metavar="MODEL"),
    Option("api-base", text, None, "OpenAI-compatible endpoint for every role; overrides litellm's environment "
           "variables", config=FINGERPRINT, metavar="URL"),
    Option("max-turns", whole(1), 100, "turn limit per episode", config=FINGERPRINT, metavar="N"),
    Option("max-response-chars", whole(1), DEFAULT_MAX_RESPONSE_CHARS, "a narrator response longer than this "
           "is the narrator's error before any audit call (it would not fit an auditor's window)",
           config=FINGERPRINT, metavar="N"),
    Option("narrator-timeout", seconds, 120.0, "seconds a narrator's respond(), opening() or reset() may take "
           "(sync ones run in a thread, async ones are awaited); past it the episode ends as the narrator's error "
           "and the run goes on. Built-in narrators are bounded by the model calls' own {timeout}",
           config=RECORDED, metavar="S"),
    Option("max-response-tokens", whole(1), DEFAULT_MAX_RESPONSE_TOKENS, "a narrator response longer than this "
           "many tokens (the auditor model's tokenizer where litellm knows it, else a conservative bound) is the "
           "narrator's error before any audit call", config=FINGERPRINT, metavar="N"),
    Option("auditor-context-tokens", whole(256), DEFAULT_AUDITOR_CONTEXT_TOKENS, "the auditor's input window "
           "when litellm's model map does not know the model: an audit prompt over it (less the answer's "
           "{max-tokens}) is not sent; the narrator's error when its narration makes it too large",
           config=FINGERPRINT, metavar="N"),
    Option("audit-votes", whole(1), 1, "confirmation samples per flagged conflict: it stands on a strict majority "
           "and the agreement (e.g. 2/3) is recorded; a conflict short of unanimity is the auditor's doubt, not the "
           "narrator's failure. Above 1 the samples run at temperature 0.7, so they are independent "
           "(1: one confirmation at temperature 0, as without votes)", config=FINGERPRINT, metavar="K"),
    Option("player-retries", whole(0), 2, "a simulated player's input that states world events, other characters' "
           "acts or what the character cannot know is regenerated, told why, up to N times; still unfair, it is "
           "played, and a conflict it provokes is a player fault, never the narrator's (scripted inputs are not "
           "screened)", config=FINGERPRINT, metavar="N"),
    Option("repeats", whole(1), 1, "episodes per spec (pass^k needs k >= 2)", config=RECORDED, metavar="K"),
    Option("concurrency", whole(1), 16, "episodes and model calls in flight", config=RECORDED, metavar="N"),
    # --- how every model call is bounded and shaped (README "Self-hosted models") ---
    Option("timeout", seconds, 120.0, "seconds per model request; a call with its retries gets 2.5x that, or "
           "{deadline}", ncp=CALLS, config=RECORDED, metavar="S",
           defaults={"doctor": 60.0, "specs draft": 300.0, "lint": 300.0}),
    Option("deadline", seconds, None, "seconds per model call including its retries", ncp=CALLS,
           config=RECORDED, metavar="S", shown_default="2.5 x {timeout}"),
    Option("concurrency-per-endpoint", whole(1), None, "model requests in flight per endpoint; 1 for servers that "
           "answer one request at a time (llama.cpp)", ncp=CALLS, config=RECORDED, metavar="N",
           shown_default="4 per episode"),
    Option("max-tokens", max_tokens, (), "limit on generated tokens per call as ROLE=N, repeatable or "
           "comma-separated", kind=ITEMS, ncp=CALLS, config=FINGERPRINT, metavar="ROLE=N",
           shown_default=", ".join(f"{r}={n}" for r, n in DEFAULT_MAX_TOKENS.items())),
    Option("structured-output", choice("structured-output mode", OUTPUT_MODES), "auto", "how auditor answers are "
           "asked for (auto tries json_schema, then json_object, then prompt, once per endpoint and model)",
           ncp=CALLS, config=FINGERPRINT, metavar="{" + ",".join(OUTPUT_MODES) + "}"),
    Option("system-prompt", choice("system-prompt mode", SYSTEM_PROMPT_MODES), "keep", "merge folds system "
           "prompts into the first user message, for chat templates that drop them", ncp=CALLS, config=FINGERPRINT,
           metavar="{" + ",".join(SYSTEM_PROMPT_MODES) + "}"),
    # --- what the run reports and gates on ---
    Option("survival-turn", whole(1), None, "turn of the headline survival figure", pytest=False, metavar="TURN",
           shown_default=f"the gate's TURN, else {DEFAULT_SURVIVAL_TURN} or {{max-turns}} when lower"),
    Option("min-survival", gate, None, "survival gate RATE[@TURN] (TURN defaults to 20; 1 <= TURN <= "
           "{max-turns}): fails when survival@TURN < RATE, or when it cannot be measured (too few episodes "
           "observed up to TURN)", metavar="RATE[@TURN]",
           notes={"pytest": "; conflicts within the gate are reported as xfail"}),
    Option("max-cost", dollars, None, "cost cap in US dollars at the cost map's list prices: an episode starts "
           "only while the cap can still pay for it to its end (its expected cost, measured as the run goes), and "
           "no model call starts once what the run's calls cost, plus the most each call in flight may cost, "
           "would pass it; episodes not started or cut short end as budget (censored, never a narrator failure) "
           "and the run exits 7. Every model must be priced", config=RECORDED, metavar="USD"),
    Option("estimate", flag, False, "print an upper bound and an expected figure of the run's model calls, "
           "tokens and list-price cost (per role and audit step), then exit 0 without calling a model", kind=FLAG),
    # --- gates that decide early (docs/gates.md) ---
    Option("seed", whole(0), 0, "seed of the episode order: episodes start in a seeded random order of (spec, repeat), "
           "the order a sequential gate reads their outcomes in; the same seed and episodes give the same order. "
           "With {sequential} and no seed, the run picks one (recorded in results.json), so no narrator can know "
           "which episodes decide early; shards of one sequential run ({shard}) must all be given the same seed",
           config=RECORDED, metavar="N"),
    Option("sequential", flag, False, "with {min-survival}: decide as soon as an anytime-valid confidence sequence "
           "for survival@TURN is certainly above or below RATE, then start no new episode (the report says decided "
           "after N of M episodes); a run that never becomes certain goes to the end and the fixed gate decides",
           kind=FLAG, needs=("min-survival", "the survival gate it decides early"),
           notes={"pytest": "; with {baseline}, also the paired regression check (see {margin}); unstarted spec "
                            "tests are reported as skipped"}),
    Option("sequential-alpha", alpha, 0.05, "with {sequential}: the chance of a wrong early decision, split evenly "
           "between wrong passes and wrong fails", metavar="ALPHA"),
    Option("sequential-cancel", flag, False, "with {sequential}: once decided, cancel the episodes in flight at their "
           "next turn (they end as cancelled: censored, never a failure) instead of letting them finish",
           kind=FLAG, needs=("sequential", "the decision that cancels them")),
    Option("margin", margin, 0.0, "the sequential regression check's margin (with {sequential} and a baseline): a "
           "drop in survival@TURN up to this share is no regression, and the check ends early once any drop is "
           "certainly smaller (non-inferior); 0: only a certain regression or a certain improvement ends it",
           ncp=None, metavar="M"),
    Option("max-error-rate", share, "0", "error budget: share of episodes allowed to end in an auditor, model or "
           "player error (unknown outcome), e.g. 0.05 or 5%; above it the run exits 6 (0: none allowed)",
           metavar="RATE"),
    Option("report", text, None, "write DIR/results.json and DIR/traces/", ncp_name="out", metavar="DIR",
           notes={"pytest": " (and DIR/report.html)"}),
    Option("history", text, None, "record the run (its summary, episodes and commitments) in this history "
           "database (SQLite; `ncp history`, docs/history.md); with {estimate}: the expected cost from the last "
           "comparable run in it", metavar="DB"),
    Option("branch", text, None, "branch recorded in results.json's provenance (default: the CI's "
           "GITHUB_HEAD_REF or GITHUB_REF_NAME, else git's current branch)", metavar="NAME"),
    Option("baseline", text, None, "compare with an earlier results.json: the session fails only when "
           "survival@TURN is significantly lower (exact McNemar over specs, alpha 0.05)", ncp=None,
           metavar="BASE.json"),
    Option("resume", flag, False, "keep the episodes already finished in the {report} directory and run the rest "
           "(errored ones again); refuses when the settings or a spec changed since (see {force})", kind=FLAG,
           needs=("report", "the run to continue")),
    Option("force", flag, False, "with {resume}: re-run the episodes whose settings or spec changed instead of "
           "refusing", kind=FLAG),
    Option("record-mode", choice("record mode", RECORD_MODES), None, "record/replay every model call to cassettes: "
           "none (replay only) | once | new_episodes | all", config=FINGERPRINT, shown_default="off",
           needs=("cassettes", "where the calls are recorded"),
           metavar="{" + ",".join(RECORD_MODES) + "}"),
    Option("cassettes", text, None, "cassette directory for {record-mode}", config=RECORDED, metavar="DIR",
           defaults={"pytest": "cassettes"}, relative_default=True,
           notes={"ncp": " (no default: give it with a record mode)"}),
    Option("no-pipeline", flag, False, "audit each turn before playing the next (the sequential reference "
           "schedule; same results, slower)", kind=FLAG, config=SCHEDULE, config_field="pipeline",
           to_field=_not),
    Option("workers", workers, "auto", "processes to spread episodes over (auto: 1 up to 32 episodes in flight, "
           "then one more per 32, at most one per core); one results.json, one progress bar", pytest=False,
           metavar="N|auto"),
    Option("shard", shard, None, "run only slice I of N of the (spec, repeat) episodes (CI matrices); join the "
           "slices' {report} folders with ncp merge", pytest=False, config=SCHEDULE, metavar="I/N"),
    # --- the auditor's canaries (docs/auditor.md) ---
    Option("canaries", whole(0), 0, "audit K gold cases (known violations and clean turns) beside the episodes "
           "with the same auditor; they never touch episode results (0: off)", metavar="K"),
    Option("min-canary-recall", share, 0.8, "with {canaries}: fail when the auditor catches fewer canary "
           "violations, or passes fewer clean canaries, than this share", metavar="R"),
    Option("canary-set", path_or_bundled, "ncp-gold", "gold set the canaries come from (ncp-gold: the one "
           "installed with the package)", metavar="DIR"),
    Option("canary-seed", whole(0), 0, "seed of the canary sample: the same seed and set give the same canaries",
           metavar="N"),
    # --- pytest only: stored failures, the offline demo ---
    Option("failures", text, None, "failures folder (commit it): the fork point of every confirmed conflict is "
           "stored there, and stored failures run first as fork[<spec>@t<turn>] tests", ncp=None, metavar="DIR"),
    Option("fork-samples", whole(1), 3, "responses sampled per stored failure (fork[...] tests)", ncp=None,
           metavar="K"),
    Option("failures-only", flag, False, "run only the stored failures of {failures} (the quick check after a "
           "prompt change)", kind=FLAG, ncp=None, needs=("failures", "the stored failures")),
    Option("demo", flag, False, "route every model call to the bundled scripted server (offline demo; judges "
           "nothing real)", kind=FLAG, ncp=None, config=FINGERPRINT),
)
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
PYTEST_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o.pytest)
RUN_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o.ncp in (RUN, CALLS))
CALL_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o.ncp == CALLS)
# Settings few pytest users need, documented as ini keys first (README, "Expert settings"): their --ncp-*
# flags keep working but stay out of `pytest --help`, so the flags a studio reads there are the ones it
# uses (pytest-recording keeps its flags as few). `ncp`'s own subcommands list all of theirs.
PYTEST_EXPERT: frozenset[str] = frozenset({
    "max-response-chars", "max-response-tokens", "auditor-context-tokens", "player-retries", "max-tokens", "deadline", "concurrency-per-endpoint",
    "structured-output", "system-prompt", "sequential-alpha", "sequential-cancel", "seed", "margin",
    "canary-set", "canary-seed", "fork-samples", "no-pipeline",
})
CONFIG_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o.config)


def default(name: str) -> Any:
    """RunConfig's default for option ``name`` (``max_turns: int = default("max-turns")``)."""
    return OPTION[name].field_default()


# --- the headline turn: one rule ----------------------------------------------------------------------

def survival_turn(max_turns: int, asked: int | None = None, gate_text: str | None = None) -> int:
    """The turn of the headline survival figure: the one asked for (``--survival-turn``), else the gate's
    TURN, else 20, or ``max_turns`` when the run is shorter: survival@5 for a 5-turn run, not survival@20."""
    if asked:
        return int(asked)
    if gate_text:
        return parse_gate(gate_text)[1]
    return min(DEFAULT_SURVIVAL_TURN, int(max_turns))


# --- front ends and resolution ---------------------------------------------------------------------

class Spelling(Protocol):
    """How the user wrote an option (``--ncp-max-turns``, ``ini ncp_max_turns``, ``--max-turns``)."""

    def spell(self, name: str) -> str: ...

    def example(self, name: str) -> str: ...


@dataclass(frozen=True)
class Front:
    """A front end: ``pytest``, or the ``ncp`` command named (``run``, ``demo``, ``doctor``, ``specs draft``)."""

    name: str

    @property
    def is_pytest(self) -> bool:
        return self.name == "pytest"

    def flag(self, name: str) -> str:
        option = OPTION.get(name)
        return f"--ncp-{name}" if self.is_pytest else f"--{option.ncp_name if option and option.ncp_name else name}"

    def spell(self, name: str) -> str:
        return self.flag(name)

    def example(self, name: str) -> str:
        """The option with a placeholder value, as this front end takes it: ``--ncp-report=DIR``, ``--out DIR``."""
        option = OPTION[name]
        if option.kind == FLAG:
            return self.flag(name)
        return f"{self.flag(name)}{'=' if self.is_pytest else ' '}{option.metavar or 'VALUE'}"


PYTEST = Front("pytest")
NCP = Front("run")


@dataclass
class Resolved:
    """Every option of a front end, parsed: ``values`` by option name, ``sources`` (how each was given, or
    ``default``) and the ``problems`` found, each naming the option as the user typed it."""

    front: Front
    values: dict[str, Any]
    sources: dict[str, str]
    problems: list[str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def given(self, name: str) -> bool:
        return self.sources.get(name, "default") != "default"

    def spell(self, name: str) -> str:
        return self.sources[name] if self.given(name) else self.front.flag(name)

    def example(self, name: str) -> str:
        return self.front.example(name)


def resolve_options(given: Mapping[str, tuple[Any, str]], front: Front, options: Iterable[Option]) -> Resolved:
    """Parse the options ``given`` (name -> (raw value, how the user wrote the option)); the others take their
    default. A value that does not parse is a problem (and takes the default, so later checks still run)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    options = tuple(options)
    for option in options:
        name = option.name
        if name not in given:
            values[name], sources[name] = option.default_for(front.name), "default"
            continue
        raw, sources[name] = given[name]
        items = list(raw) if option.kind in (PATHS, ITEMS) and not isinstance(raw, str) else [raw]
        parsed = []
        for item in items:
            try:
                parsed.append(option.parse(item))
            except ValueError as exc:
                problems.append(f"{sources[name]}={item!r}: {exc}")
        if len(parsed) < len(items):
            values[name] = option.default_for(front.name)
        elif option.kind == PATHS:
            values[name] = parsed
        elif option.kind == ITEMS:
            values[name] = merge_items(parsed)
        else:
            values[name] = parsed[0]
    resolved = Resolved(front, values, sources, problems)
    for option in options:  # RunConfig.validate checks the needs of its own fields
        if not option.config:
            problems.extend(unmet_needs(option, values, resolved))
    problems.extend(_gate_beyond_turns(values, resolved))
    return resolved


def _gate_beyond_turns(values: Mapping[str, Any], spelling: Spelling) -> list[str]:
    """A survival gate at a turn no episode can reach (above the turn limit) can only say "cannot decide", after
    every episode was paid for: refused before anything runs."""
    gate, max_turns = values.get("min-survival"), values.get("max-turns")
    if not gate or not isinstance(max_turns, int):
        return []
    try:
        _, turn = parse_gate(gate)
    except ValueError:
        return []  # already a problem of its own
    if turn <= max_turns:
        return []
    written = "" if "@" in str(gate) else f" (a gate without @TURN is at turn {DEFAULT_SURVIVAL_TURN})"
    return [f"{spelling.spell('min-survival')}={gate} gates survival@{turn}{written}, but "
            f"{spelling.spell('max-turns')}={max_turns}: no episode can reach turn {turn}; gate at a turn <= "
            f"{max_turns} (RATE@TURN) or raise {spelling.spell('max-turns')}"]


def unmet_needs(option: Option, values: Mapping[str, Any], spelling: Spelling) -> list[str]:
    """``--resume needs --out DIR (the run to continue)``, when ``option`` is set and what it needs is not."""
    if option.needs is None or not values.get(option.name) or values.get(option.needs[0]):
        return []
    needed, why = option.needs
    return [f"{spelling.spell(option.name)} needs {spelling.example(needed)} ({why})"]
