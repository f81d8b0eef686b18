"""``ncp fork``: sample one recorded turn again, from the exact state before it.

    ncp fork runs/nightly/traces/caligari--r0.jsonl --turn 15 --samples 5
    ncp fork TRACE --turn 15 --narrator my_agent:FixedNarrator --continue 5 --out forks/caligari-t15

The work is in :mod:`pytest_ncp.engine.fork`; imports stay inside the command function.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from .common import (
    EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_options, client_settings, usage, whole_number,
)



def register(sub: Any) -> None:
    from ..core.config import PLAYER_KINDS, RECORD_MODES
    from ..core.options import CALL_OPTIONS

    p = sub.add_parser(
        "fork", help="sample one recorded turn K times from the state before it (conflict rate at that turn)",
        description="Rebuild the episode state just before --turn from a trace (ledger, trajectory node, "
                    "commitment states, transcript), give the narrator the recorded history, play that turn "
                    "--samples times concurrently with its recorded player input, audit each with the full "
                    "auditor, and print the conflict rate at that turn with a 95%% Wilson interval. Earlier "
                    "turns are never generated again. Exit 1 when a sample has a confirmed conflict.")
    p.add_argument("trace", metavar="TRACE", help="an episode trace (DIR/traces/<spec>--r<k>.jsonl)")
    p.add_argument("--turn", required=True, type=whole_number(1), help="the turn to sample again (>= 1)")
    p.add_argument("--samples", type=whole_number(1), default=3, help="responses sampled at the turn")
    p.add_argument("--continue", dest="continue_turns", type=whole_number(0), default=0, metavar="N",
                   help="play each sample N more turns (recorded inputs, then the spec's script; or --player)")
    p.add_argument("--narrator", metavar="MODULE:ATTR", help="narrator to fork with (default: the recorded one)")
    p.add_argument("--spec", metavar="PATH", help="the spec file (default: the recorded spec path); it must have "
                                                 "the recorded fingerprint")
    p.add_argument("--player", choices=PLAYER_KINDS, default=None,
                   help="who plays the --continue turns (default scripted: recorded inputs, then the spec's script)")
    p.add_argument("--narrator-model", help="litellm model for built-in narrators (default: the recorded one)")
    p.add_argument("--player-model", help="litellm model for simulated players")
    p.add_argument("--auditor-model", help="litellm model of the auditor (default: the recorded one)")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint for every role")
    add_options(p, CALL_OPTIONS, "fork")
    p.add_argument("--record-mode", choices=RECORD_MODES,
                   help="record/replay every model call to cassettes (none = replay only)")
    p.add_argument("--cassettes", metavar="DIR", help="cassette directory for --record-mode")
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/results.json and DIR/traces/ (default: forks/<spec>-t<turn>)")
    p.set_defaults(func=cmd_fork)


def cmd_fork(args: argparse.Namespace) -> int:
    from ..engine.auditor import LLMAuditor
    from ..core.config import DEFAULT_AUDITOR_MODEL, RunConfig
    from ..core.options import default
    from ..engine.fork import ForkError, EpisodeState, fork, fork_results
    from ..llm import ModelClient
    from ..engine.narrators import NarratorLoadError, load_narrator
    from ..engine.players import make_player
    from ..core.spec import SpecError
    from ..core.traces import RunFileError

    try:
        state = EpisodeState.at(args.trace, args.turn)
        spec = state.load_spec(args.spec)
    except (ForkError, RunFileError, SpecError) as exc:
        print(f"ncp fork: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    recorded = state.config
    try:
        call_settings = client_settings(args)
    except ValueError as exc:
        return usage(str(exc))
    config = RunConfig(
        narrator=args.narrator or recorded.get("narrator"),
        narrator_model=args.narrator_model or recorded.get("narrator_model"),
        player=args.player or "scripted", player_model=args.player_model or recorded.get("player_model"),
        auditor_model=args.auditor_model or recorded.get("auditor_model") or DEFAULT_AUDITOR_MODEL,
        api_base=args.api_base, max_turns=state.turn + args.continue_turns, concurrency=max(args.samples, 1),
        survival_turn=state.turn + args.continue_turns, record_mode=args.record_mode, cassettes=args.cassettes,
        audit_votes=int(recorded.get("audit_votes") or 1),
        # The recorded episode's own limits: the fork replays it as it was judged.
        max_response_chars=int(recorded.get("max_response_chars") or default("max-response-chars")),
        player_retries=int(recorded.get("player_retries", default("player-retries"))), **call_settings)
    problems = config.validate()
    if not config.narrator:
        problems.append("the trace records no narrator: give --narrator module:Attr")
    if problems:
        return usage("; ".join(problems))
    try:
        narrator_factory = load_narrator(config.narrator or "")  # checked above: a narrator is named
    except NarratorLoadError as exc:
        return usage(str(exc))
    client = ModelClient.from_config(config)
    cassettes = None
    if config.record_mode is not None:
        from ..llm.cassette import CassetteTransport

        assert config.cassettes is not None, "validate() requires a cassette directory with a record mode"
        cassettes = CassetteTransport(config.record_mode, config.cassettes, client.transport or client.model_call)
        client.transport = cassettes
    player_factory = None
    if config.player != "scripted":
        player_factory = lambda s: make_player(config.player, s, client=client, model=config.player_model)  # noqa: E731
    out = Path(args.out) if args.out else Path("forks") / f"{spec.id}-t{state.turn}"
    try:
        outcome = asyncio.run(fork(
            state, spec, config, narrator_factory=narrator_factory, auditor=LLMAuditor.from_config(config, client),
            samples=args.samples, continue_turns=args.continue_turns, client=client, player_factory=player_factory,
            out_dir=out))
    except ForkError as exc:
        print(f"ncp fork: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if cassettes is not None:
            cassettes.flush()
    for line in outcome.lines():
        print(line)
    if args.continue_turns:
        survived = sum(r.survived for r in outcome.judged)
        print(f"after {args.continue_turns} more turn(s): {survived}/{len(outcome.judged)} sample(s) without a conflict")
    path = fork_results(outcome, out, config.to_dict())
    print(f"results: {path} (a fork: kept apart from run metrics; ncp report / ncp compare read it)")
    if not outcome.judged:
        return EXIT_ERROR_BUDGET
    return EXIT_FAILED if any(r.termination.is_conflict for r in outcome.judged) else EXIT_OK
