"""A scripted "model" for the offline demo (``ncp demo``) and the example tests.

It plays every role from the request text alone, deterministically: the narrator acknowledges the
player's action; the auditor advances the plot every other turn, records the action as a fact, and
flags a conflict on a few (story, turn) pairs chosen by a stable hash, some of which confirmation
rejects. The numbers it produces show the tool working end to end; they judge no real narrator.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .prompts import data_in
from .server import RecordedRequest, ScriptedModelServer

_TURN = re.compile(r"TURN (\d+)\.")
_STORY = re.compile(r"STORY: (.+?)\.")
_FACT = re.compile(r"^\[(F\d+)\]", re.M)
_COMMITMENT = re.compile(r"^\[(C\d+)\] \((invariant|ordering|achievement)", re.M)


def _tag(text: str, tag: str) -> str | None:
    found = data_in(text, tag)
    return found.strip() if found is not None else None


def _roll(*parts: Any) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def narrate(request: RecordedRequest) -> str:
    action = (_tag(request.text, "player_input") or "I wait").rstrip(".!?")
    said = f"You {action[2:]}" if action.startswith("I ") else f"You act: {action}"
    return f"{said}. The world answers in kind: the people around you react, and the story moves a step further."


def play(request: RecordedRequest) -> str:
    return "I press on and ask what happens next."


def conflict_check(request: RecordedRequest) -> dict[str, Any]:
    text = request.text
    turn_match, story_match = _TURN.search(text), _STORY.search(text)
    turn = int(turn_match.group(1)) if turn_match else 0
    story = story_match.group(1) if story_match else ""
    narration = _tag(text, "narration") or ""
    facts = _FACT.findall(text)
    roll = _roll(story, turn)
    if turn < 2 or roll % 7 or not facts or not narration:
        return {"conflicts": []}
    quote = " ".join(narration.split()[:4])
    kind = ("fact", "commitment", "player_input")[roll % 3]
    commitments = [cid for cid, k in _COMMITMENT.findall(text) if k != "achievement"]
    if kind == "commitment" and not commitments:
        kind = "fact"
    return {"conflicts": [{
        "type": kind,
        "fact_ids": [facts[roll % len(facts)]] if kind == "fact" else [],
        "commitment_ids": [commitments[roll % len(commitments)]] if kind == "commitment" else [],
        "quote": quote,
        "explanation": f"Scripted demo finding at turn {turn}.",
    }]}


def confirm(request: RecordedRequest) -> dict[str, Any]:
    turn = _TURN.search(request.text)
    story = _STORY.search(request.text)
    keep = _roll("confirm", story.group(1) if story else "", turn.group(1) if turn else 0) % 3 != 0
    return {"confirmed": keep, "explanation": "Scripted demo confirmation." if keep else "Scripted demo: rejected."}


def fact_update(request: RecordedRequest) -> dict[str, Any]:
    narration = _tag(request.text, "narration") or ""
    if not narration:
        return {"added": [], "negated": []}
    first = narration.split(".")[0].strip()
    return {"added": [{"text": first + ".", "quote": first}], "negated": []}


def trajectory_update(request: RecordedRequest) -> dict[str, Any]:
    turn = _TURN.search(request.text)
    done = turn is not None and int(turn.group(1)) % 2 == 0
    narration = _tag(request.text, "narration") or ""
    # Progress rests on evidence quoted from the response, as the auditor requires.
    evidence = " ".join(narration.split()[-6:]) if done else "Scripted demo: no progress."
    return {"trigger_event_occurred": done, "key_delta_occurred": done, "evidence": evidence}


def install_demo_script(server: ScriptedModelServer) -> None:
    server.add(role="narrator", reply=narrate)
    server.add(role="player", reply=play)
    server.add(step="conflict_check", reply=conflict_check)
    server.add(step="conflict_confirmation", reply=confirm)
    server.add(step="fact_update", reply=fact_update)
    server.add(step="trajectory_update", reply=trajectory_update)
