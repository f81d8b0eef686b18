"""Every episode setting and every model-call setting of a run reaches the episodes and the model client of
each entry point: spec tests and ``ncp run`` (the Runner), ``run_episode``, forks, re-audits, the CLI
commands that call a model. Each builds them through ``Episode.from_config`` / ``ModelClient.from_config``;
this checks what they built, not that they called it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.core.options import CALL_OPTIONS, CONFIG_OPTIONS
from pytest_ncp.engine.episode import Episode
from pytest_ncp.llm import ModelClient
from tests.conftest import FIXTURES, ListNarrator

# What an episode reads from the run's settings (Episode.from_config), and what the run's model client reads.
EPISODE = {"max_turns": 3, "max_response_chars": 123, "max_response_tokens": 45, "player_retries": 5,
           "narrator_model": "openai/other-narrator", "pipeline": False, "narrator_timeout": 9.5}
CALLS = {"timeout": 7.0, "deadline": 30.0, "concurrency_per_endpoint": 2, "max_tokens": {"narrator": 77},
         "structured_output": "json_object", "system_prompt": "merge"}
AUDITOR = {"auditor_model": "openai/other-auditor", "audit_votes": 3, "auditor_context_tokens": 4096}
# Settings that reach an episode through what the host builds from them (narrator, player, endpoint,
# cassettes), or that say which episodes run, not how.
ELSEWHERE = {"narrator", "player", "player_model", "api_base", "record_mode", "cassettes", "repeats", "concurrency",
             "max_cost", "seed", "shard", "demo"}
CONFIG = RunConfig(narrator="tests.conftest:ListNarrator", **EPISODE, **CALLS, **AUDITOR)


def test_the_settings_checked_here_are_every_setting_of_the_option_table():
    fields = {o.field_name for o in CONFIG_OPTIONS}
    assert fields - set(EPISODE) - set(CALLS) - set(AUDITOR) - ELSEWHERE == set(), "a new setting: say where it goes"
    assert {o.field_name for o in CALL_OPTIONS} <= set(CALLS)
    assert all(getattr(RunConfig(), k) != v for k, v in {**EPISODE, **CALLS, **AUDITOR}.items()), "not the defaults"


def assert_episode(episode: Episode, config: RunConfig = CONFIG, *, max_turns: int | None = None) -> None:
    expected = {**EPISODE, "max_turns": EPISODE["max_turns"] if max_turns is None else max_turns}
    assert {k: getattr(episode, k) for k in EPISODE} == expected
    assert episode.config == config.to_dict()


def assert_client(client: ModelClient) -> None:
    assert {k: getattr(client, k) for k in CALLS} == CALLS


def assert_auditor(auditor: object) -> None:
    assert (getattr(auditor, "model"), getattr(auditor, "votes"), getattr(auditor, "context_tokens")) == (
        AUDITOR["auditor_model"], AUDITOR["audit_votes"], AUDITOR["auditor_context_tokens"])


def spy(monkeypatch) -> list[Episode]:
    """The episodes the code under test runs from now on (nothing is played: each ends as a setup error)."""
    from pytest_ncp.engine.runner import _setup_error

    episodes: list[Episode] = []

    async def run(self):  # noqa: ANN001, ANN202
        episodes.append(self)
        return _setup_error(self.spec, self.repeat, RuntimeError("not played"))

    monkeypatch.setattr(Episode, "run", run)
    return episodes


def test_spec_tests_and_ncp_run_build_through_the_runner(caligari):
    from pytest_ncp.engine.runner import Runner

    runner = Runner(CONFIG, narrator_factory=lambda: ListNarrator(["x"]))
    assert_client(runner.client)
    assert_auditor(runner.auditor)
    assert_episode(runner.episode(caligari))


def test_forks_play_with_the_runs_settings(play, caligari, monkeypatch):
    from pytest_ncp.engine.auditor import LLMAuditor
    from pytest_ncp.engine.fork import EpisodeState, fork

    recorded = play(caligari, ["The night passes quietly."], max_turns=3)
    built = spy(monkeypatch)
    client = ModelClient.from_config(CONFIG)
    asyncio.run(fork(EpisodeState.at(recorded.trace, 2), caligari, CONFIG, samples=2, client=client,
                     narrator_factory=lambda: ListNarrator(["x"]), auditor=LLMAuditor.from_config(CONFIG, client)))
    assert len(built) == 2
    for episode in built:
        assert_episode(episode, max_turns=2)  # a fork stops at its turn (plus --continue)


def test_reaudits_judge_with_the_runs_settings(play, caligari, monkeypatch, tmp_path):
    from pytest_ncp.engine.reaudit import read_recorded, reaudit

    recorded = play(caligari, ["The night passes quietly."], max_turns=3)
    built = spy(monkeypatch)
    config = replace(CONFIG, max_turns=4)
    asyncio.run(reaudit([read_recorded(recorded.trace)], {caligari.id: caligari}, config, out_dir=tmp_path / "re"))
    (episode,) = built
    assert_episode(episode, config, max_turns=3)  # a re-audit replays the turns that were recorded


@pytest.fixture
def clients(monkeypatch):
    """The model clients a command built; the command stops there (``Built``)."""
    made: list[ModelClient] = []
    real = ModelClient.__post_init__

    def post_init(self):  # noqa: ANN001, ANN202
        real(self)
        made.append(self)
        raise Built

    monkeypatch.setattr(ModelClient, "__post_init__", post_init)
    return made


class Built(Exception):
    pass


CALL_FLAGS = ["--timeout", "7", "--deadline", "30", "--concurrency-per-endpoint", "2", "--max-tokens", "narrator=77",
              "--structured-output", "json_object", "--system-prompt", "merge"]


@pytest.mark.parametrize("command", [
    ["lint", "--llm", "openai/m", str(FIXTURES / "caligari.yaml")],
    ["doctor", "--model", "openai/m", "--api-base", "http://127.0.0.1:9"],
    ["calibrate", "--auditor-model", "openai/m"],
])
def test_commands_that_call_a_model_shape_their_calls_as_a_run(command, clients):
    with pytest.raises(Built):
        main([*command, *CALL_FLAGS])
    (client,) = clients
    expected = {**CALLS, "structured_output": "auto"} if command[0] == "doctor" else CALLS  # it tries every mode
    assert {k: getattr(client, k) for k in CALLS} == expected


def test_run_episode_plays_with_the_sessions_settings(pytester):
    pytester.makeconftest("")
    pytester.makepyfile(test_it=f"""
        from pytest_ncp.engine.episode import Episode

        def test_it(run_episode, ncp_settings, ncp_client, monkeypatch):
            seen = []

            async def run(self):
                seen.append(self)

            monkeypatch.setattr(Episode, "run", run)
            run_episode({str(FIXTURES / 'caligari.yaml')!r}, narrator=lambda: None, player=["I look."])
            (episode,) = seen
            assert episode.max_response_chars == 123 and episode.player_retries == 5
            assert episode.pipeline is False and episode.max_turns == 3
            assert episode.narrator_model == "openai/other-narrator"
            assert episode.auditor.model == "openai/other-auditor" and episode.auditor.votes == 3
            assert ncp_client.max_tokens == {{"narrator": 77}} and ncp_client.deadline == 30.0
            assert ncp_client.structured_output == "json_object" and ncp_client.system_prompt == "merge"
            assert ncp_client.timeout == 7.0 and ncp_client.concurrency_per_endpoint == 2
    """)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--ncp-max-response-chars=123", "--ncp-player-retries=5", "--ncp-no-pipeline",
        "--ncp-max-turns=3", "--ncp-narrator-model=openai/other-narrator", "--ncp-auditor-model=openai/other-auditor",
        "--ncp-audit-votes=3", *(f"--ncp-{flag[2:]}" if flag.startswith("--") else flag for flag in CALL_FLAGS))
    result.assert_outcomes(passed=1)
