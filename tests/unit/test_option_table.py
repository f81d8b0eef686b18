"""The option table (pytest_ncp/core/options.py) is the one declaration: README's option tables, RunConfig,
the fingerprint and the front ends all agree with it."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from pytest_ncp.core.config import FINGERPRINT_FIELDS, SCHEDULE_FIELDS, RunConfig
from pytest_ncp.core.options import (
    CALL_OPTIONS, CONFIG_OPTIONS, OPTION, OPTIONS, PYTEST, PYTEST_EXPERT, PYTEST_OPTIONS, RUN_OPTIONS, Front,
    resolve_options,
    survival_turn,
)
from tests.conftest import ROOT

NCP = Front("run")


def readme_table(heading: str) -> list[list[str]]:
    """The rows (cells, backticks kept) of the first table after the README heading that starts with ``heading``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n" + heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif rows:
            break
    return [r for r in rows[2:]]  # the header and its --- line


def flags(cell: str, prefix: str) -> list[str]:
    return re.findall(rf"`({re.escape(prefix)}[a-z][a-z-]*)", cell)


def test_readme_pytest_tables_list_every_pytest_option_once_and_nothing_else():
    # Flags shown by --help in the options table; the expert settings, as ini keys, in their own.
    listed = [f for row in readme_table("### Options (each also an ini key") for f in flags(row[0], "--ncp-")]
    assert sorted(listed) == sorted(PYTEST.flag(o.name) for o in PYTEST_OPTIONS if o.name not in PYTEST_EXPERT)
    expert = [k for row in readme_table("### Expert settings") for k in re.findall(r"`(ncp_[a-z_]+) =", row[0])]
    assert sorted(expert) == sorted("ncp_" + name.replace("-", "_") for name in PYTEST_EXPERT)
    assert PYTEST_EXPERT <= {o.name for o in PYTEST_OPTIONS}


def test_pytest_help_lists_the_common_flags_and_keeps_the_expert_ones_out():
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:randomly"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    shown = set(re.findall(r"^  (--ncp-[a-z-]+)", out, re.M))
    assert shown == {PYTEST.flag(o.name) for o in PYTEST_OPTIONS if o.name not in PYTEST_EXPERT}
    for name in PYTEST_EXPERT:  # still listed as ini keys
        assert re.search(rf"^  ncp_{name.replace('-', '_')} \(", out, re.M), name


def test_readme_ncp_run_table_lists_every_run_option_with_its_default():
    rows = readme_table("### `ncp run` options")
    listed = [f for row in rows for f in flags(row[0], "--")]
    assert sorted(listed) == sorted(NCP.flag(o.name) for o in RUN_OPTIONS if o not in CALL_OPTIONS)
    for row in rows:
        options = [o for o in OPTIONS if NCP.flag(o.name) in flags(row[0], "--")]
        shown = [f"`{o.default_text(NCP)}`" for o in options if o.default_text(NCP) is not None]
        assert row[2] == ", ".join(shown), f"README row {row[0]}: default column {row[2]!r}, the table says {shown}"


def test_readme_self_hosted_table_lists_the_model_call_options():
    listed = [f for row in readme_table("### Self-hosted models") for f in flags(row[0], "--")]
    assert sorted(listed) == sorted(NCP.flag(o.name) for o in CALL_OPTIONS)


def test_run_config_fields_and_defaults_come_from_the_table():
    derived = {"max_retries", "survival_turn"}  # not options: a client constant, and options.survival_turn's rule
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    assert {o.field_name for o in CONFIG_OPTIONS} == set(fields) - derived
    for option in CONFIG_OPTIONS:
        assert getattr(RunConfig(), option.field_name) == option.field_default(), option.name
    assert RunConfig().pipeline is True and RunConfig().max_tokens == {} and RunConfig().max_turns == 100


def test_the_resume_fingerprint_covers_every_setting_that_can_change_a_verdict():
    # --resume used to keep episodes after changes the old fingerprint (narrator, models, player, max_turns,
    # prompt version) did not see: the demo flag, the endpoint, max tokens, the output and system-prompt modes,
    # the package version, the world rules. Only how a run is served and scheduled stays out;
    # audit_votes and player_retries change verdicts too.
    assert set(FINGERPRINT_FIELDS) == {"narrator", "narrator_model", "player", "player_model", "auditor_model",
                                       "api_base", "max_turns", "max_response_chars", "max_response_tokens",
                                       "auditor_context_tokens", "max_tokens",
                                       "structured_output", "system_prompt", "record_mode", "demo",
                                       "audit_votes", "player_retries", "prompt_version", "environment",
                                       "narrator_code"}
    assert SCHEDULE_FIELDS == ("pipeline", "shard")
    assert not set(SCHEDULE_FIELDS) & set(RunConfig(shard="1/2", pipeline=False).to_dict())
    base = RunConfig(narrator="a:B", api_base="http://h:1/v1").to_dict()["fingerprint"]
    for change in ({"demo": True}, {"api_base": "http://other:1/v1"}, {"max_tokens": {"auditor": 99}},
                   {"structured_output": "prompt"}, {"system_prompt": "merge"}, {"max_response_chars": 10}):
        assert RunConfig(**{"narrator": "a:B", "api_base": "http://h:1/v1", **change}).to_dict()["fingerprint"] \
            != base, change
    for same in ({"concurrency": 3}, {"timeout": 5.0}, {"repeats": 4}, {"pipeline": False}, {"max_retries": 1}):
        assert RunConfig(**{"narrator": "a:B", "api_base": "http://h:1/v1", **same}).to_dict()["fingerprint"] == base
    env = RunConfig(narrator="a:B").to_dict()["environment"]
    assert set(env) == {"pytest_ncp", "world_rules", "prompts"} and all(env.values())


def test_every_option_has_help_a_known_kind_and_valid_references():
    for option in OPTIONS:
        assert option.help and option.kind in ("value", "flag", "paths", "items"), option.name
        assert option.pytest or option.ncp, f"{option.name} reaches no front end"
        for reference in re.findall(r"{([^}]*)}", option.help + option.notes.get("pytest", "") +
                                    option.notes.get("ncp", "") + (option.shown_default or "")):
            assert reference in OPTION, f"{option.name}: help names {{{reference}}}, which is no option"
        if option.needs:
            assert option.needs[0] in OPTION, option.name


def test_defaults_parse_and_are_plain_data_for_xdist():
    values = {o.name: o.default_for(front) for o in OPTIONS for front in ("pytest", "run", "doctor")}
    json.dumps(values)
    json.dumps(RunConfig().to_dict())


def test_values_from_the_command_line_and_ini_parse_the_same_way():
    given = {"max-turns": ("7", "--ncp-max-turns"), "max-tokens": (["auditor=300,narrator=50", "player=9"],
             "ini ncp_max_tokens"), "specs": (["a", "b"], "--ncp-specs"), "no-pipeline": (True, "--ncp-no-pipeline")}
    opts = resolve_options(given, PYTEST, PYTEST_OPTIONS)
    assert opts.problems == []
    assert opts["max-turns"] == 7 and opts["specs"] == ["a", "b"]
    assert opts["max-tokens"] == {"auditor": 300, "narrator": 50, "player": 9}
    config = RunConfig.from_options(opts)
    assert config.max_turns == 7 and config.pipeline is False and config.survival_turn == 7
    assert opts.spell("max-tokens") == "ini ncp_max_tokens" and opts.spell("repeats") == "--ncp-repeats"


@pytest.mark.parametrize("name,raw,message", [
    ("player", "chaotic", "--ncp-player='chaotic': unknown player; valid: scripted, adversarial, natural"),
    ("max-turns", "-3", "--ncp-max-turns='-3': expected a whole number >= 1"),
    ("min-survival", "lots", "--ncp-min-survival='lots': expected RATE[@TURN], e.g. 0.4@20 or 40%@20"),
    ("max-tokens", ["judge=5"], "--ncp-max-tokens='judge=5': expected ROLE=N with ROLE one of narrator, player, "
                                "auditor, author"),
    ("timeout", "0", "--ncp-timeout='0': expected a number of seconds > 0"),
    ("min-canary-recall", "2", "--ncp-min-canary-recall='2': expected a share within 0..1"),
])
def test_a_bad_value_names_the_option_as_typed_and_what_is_valid(name, raw, message):
    opts = resolve_options({name: (raw, PYTEST.flag(name))}, PYTEST, PYTEST_OPTIONS)
    assert len(opts.problems) == 1 and opts.problems[0].startswith(message)
    assert opts[name] == OPTION[name].default_for("pytest")  # the default stands in, so later checks still run


def test_validate_names_options_in_the_words_of_each_front_end():
    config = RunConfig(player="natural", max_turns=0, record_mode="once")
    assert config.validate() == [
        "--max-turns=0: expected a whole number >= 1",
        "--record-mode needs --cassettes DIR (where the calls are recorded)",
        "--player=natural needs --player-model MODEL: a simulated player is a model (e.g. openai/gpt-4o-mini)"]
    assert config.validate(PYTEST)[1] == "--ncp-record-mode needs --ncp-cassettes=DIR (where the calls are recorded)"


def test_the_headline_survival_turn_rule():
    assert survival_turn(100) == 20 and survival_turn(5) == 5  # survival@5 for a 5-turn run, not survival@20
    assert survival_turn(100, gate_text="0.4@10") == 10 and survival_turn(100, gate_text="40%") == 20
    assert survival_turn(100, asked=30, gate_text="0.4@10") == 30


def test_demo_model_names_apply_only_where_none_was_asked_for():
    opts = resolve_options({"player": ("natural", "--ncp-player"), "narrator-model": ("openai/mine", "x")},
                           PYTEST, PYTEST_OPTIONS)
    config = RunConfig.from_options(opts, demo=True)
    assert (config.narrator_model, config.player_model, config.auditor_model) == (
        "openai/mine", "openai/demo-player", "openai/demo-auditor")
    given_auditor = resolve_options({"auditor-model": ("openai/gpt-4o-mini", "x")}, PYTEST, PYTEST_OPTIONS)
    assert RunConfig.from_options(given_auditor, demo=True).auditor_model == "openai/gpt-4o-mini"


def test_the_table_and_the_plugin_import_nothing_heavy():
    code = ("import sys, pytest_ncp.core.options, pytest_ncp.plugin; print([m for m in ('yaml', 'pydantic', "
            "'litellm', 'syrupy', 'aiohttp', 'jinja2') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_new_entry_reaches_the_front_ends_with_no_other_code():
    """The module docstring's example: one Option, and ncp's parser, the resolution and the help have it."""
    import argparse

    from pytest_ncp.cli.common import add_options, resolve_args
    from pytest_ncp.core.options import RECORDED, Option, seconds

    max_cost = Option("max-cost", seconds, None, "stop starting new episodes once the run has cost this many US "
                      "dollars", config=RECORDED, metavar="USD")
    parser = argparse.ArgumentParser()
    add_options(parser, [OPTION["max-turns"], max_cost], "run")
    args = parser.parse_args(["--max-cost", "2.5"])
    opts = resolve_args(args)
    assert args.max_cost == 2.5 and args.max_turns == 100 and opts.given("max-cost")
    assert "--max-cost USD" in parser.format_help()
    with pytest.raises(ValueError, match=r"--max-cost='free': expected a number"):
        resolve_args(parser.parse_args(["--max-cost", "free"]))
    pytest_side = resolve_options({"max-cost": ("1", "ini ncp_max_cost")}, PYTEST, [max_cost])
    assert pytest_side["max-cost"] == 1.0 and max_cost.help_for(PYTEST).startswith("stop starting")
