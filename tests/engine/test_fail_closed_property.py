"""Fail closed, as a property: random mixes of garbage, wrong-type, short-quote and valid auditor answers.

Every answer goes through litellm to the scripted server. Whatever the mix, an episode ends as a
"survived" outcome (success, turn limit, script exhausted) only if every step of every turn was
finally answered validly; and no gate passes with more unknown outcomes than its error budget.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.engine.episode import Episode
from pytest_ncp.llm import ModelClient
from pytest_ncp.analysis.metrics import Gate
from pytest_ncp.core.endings import Termination
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.core.spec import load_spec
from pytest_ncp.testing import ScriptedModelServer
from tests.conftest import SPECS, ListNarrator

RESPONSE = "The fair is loud and the crowd cheers for the showman."
QUOTE = "the crowd cheers"
SURVIVED = {"success", "turn_limit", "script_exhausted"}

VALID = {
    "conflict_check": [{"conflicts": []},
                       {"conflicts": [{"type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": QUOTE,
                                       "explanation": "x"}]}],
    "conflict_confirmation": [{"confirmed": True, "explanation": "x"}, {"confirmed": False, "explanation": "x"}],
    "fact_update": [{"added": [], "negated": []},
                    {"added": [{"text": "The crowd cheers.", "quote": QUOTE}], "negated": []}],
    "trajectory_update": [{"trigger_event_occurred": False, "key_delta_occurred": False, "evidence": "none"},
                          {"trigger_event_occurred": True, "key_delta_occurred": True, "evidence": QUOTE}],
    "commitment_check": [{"satisfied": []},
                         {"satisfied": [{"commitment_id": "C5", "evidence": QUOTE},
                                        {"commitment_id": "C6", "evidence": "cheers for the showman"}]}],
}
WRONG_TYPE = {
    "conflict_check": {"conflicts": "none"},
    "conflict_confirmation": {"confirmed": "no", "explanation": "x"},
    "fact_update": {"added": [{"text": 1, "quote": QUOTE}], "negated": []},
    "trajectory_update": {"trigger_event_occurred": "yes", "key_delta_occurred": 1, "evidence": QUOTE},
    "commitment_check": {"satisfied": [{"commitment_id": "C5", "evidence": 0}]},
}
SHORT_QUOTE = {
    "conflict_check": {"conflicts": [{"type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": "the",
                                      "explanation": "x"}]},
    "conflict_confirmation": {"confirmed": 0, "explanation": "x"},
    "fact_update": {"added": [{"text": "Alan is dead.", "quote": "the ... the"}], "negated": []},
    "trajectory_update": {"trigger_event_occurred": True, "key_delta_occurred": True, "evidence": "."},
    "commitment_check": {"satisfied": [{"commitment_id": "C5", "evidence": ""}]},
}
KINDS = ("garbage", "wrong_type", "short_quote", "valid", "valid_alt")


def answer(step: str, kind: str):
    if kind == "garbage":
        return "{not json"
    if kind == "wrong_type":
        return WRONG_TYPE[step]
    if kind == "short_quote":
        return SHORT_QUOTE[step]
    return VALID[step][kind == "valid_alt"]


answers = st.lists(st.sampled_from(KINDS), min_size=1, max_size=12)
plans = st.fixed_dictionaries({step: answers for step in VALID})


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(plan=plans, max_turns=st.integers(1, 3), budget=st.sampled_from([0.0, 0.5]))
def test_no_episode_survives_on_answers_that_were_not_all_valid(plan, max_turns, budget):
    spec = load_spec(SPECS / "caligari.yaml")
    served: dict[tuple[int, str], list[str]] = defaultdict(list)  # (turn, step) -> kinds, in order

    def scripted(step):
        queue = list(plan[step])

        def reply(request):
            kind = queue.pop(0) if len(queue) > 1 else queue[0]
            turn = int(re.search(r"TURN (\d+)\.", request.text).group(1))
            served[(turn, step)].append(kind)
            return answer(step, kind)

        return reply

    with ScriptedModelServer() as server:
        for step in VALID:
            server.add(step=step, reply=scripted(step))
        client = ModelClient(api_base=server.base_url, backoff=0.0, max_backoff=0.0)
        episode = Episode(spec=spec, narrator=ListNarrator([RESPONSE]),
                          player=ScriptedPlayer(["I listen.", "I watch."]),
                          auditor=LLMAuditor(client, "openai/auditor"), max_turns=max_turns, client=client)
        result = asyncio.run(episode.run())

    record = result.record
    if record.termination.value in SURVIVED:
        # Every step of every turn ended on a valid answer (retries may have fixed earlier ones).
        assert served and all(kinds[-1] in ("valid", "valid_alt") for kinds in served.values()), (record, served)
    if any(kinds[-1] not in ("valid", "valid_alt") for kinds in served.values()):
        assert record.termination.value not in SURVIVED, (record, served)
    # The gate never passes with an error rate above its budget.
    others = [record.model_copy(update={"spec_id": f"x{i}", "termination": Termination.TURN_LIMIT, "error": None,
                                        "turns": max_turns}) for i in range(3)]
    episodes = [record, *others]
    unknown = sum(e.termination == "error" and (e.error is None or e.error.kind != "narrator") for e in episodes)
    if unknown / len(episodes) > budget:
        assert not Gate(0.0, 0).check(episodes, max_error_rate=budget).passed
