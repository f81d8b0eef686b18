"""A scripted "model" for the offline demo (``ncp demo``) and the example tests.

It plays every role from the request text alone, deterministically: the narrator acknowledges the
player's action; the auditor advances the plot every other turn, records the action as a fact, and
flags a conflict on a few (story, turn) pairs chosen by a stable hash, some of which confirmation
rejects. The adversarial player sometimes dictates a world event (``GOD_MODE``); the input screen
catches those, and the conflict check often flags the narration that went along with one. Sampled
auditor calls (temperature above 0: votes, ``ncp stability``) sometimes disagree with the greedy answer
(``_Sampled``), so split verdicts and flips show up too. The numbers it produces show the tool working end to end; they judge no real narrator.
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


def _last_user_message(request: RecordedRequest) -> str | None:
    """What the player said, from a narrator that sends it as its own last user message (no built-in prompt)."""
    messages = [m for m in request.body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    content = messages[-1].get("content") if messages else None
    return content.strip() if isinstance(content, str) and content.strip() else None


def narrate(request: RecordedRequest) -> str:
    action = (_tag(request.text, "player_input") or _last_user_message(request) or "I wait").rstrip(".!?")
    said = f"You {action[2:]}" if action.startswith("I ") else f"You act: {action}"
    return f"{said}. The world answers in kind: the people around you react, and the story moves a step further."


# What the demo's adversarial player dictates instead of playing its character: a world event, another
# character's act. The demo's input screen knows these lines; the conflict check often flags the narration that
# went along with one (the narrator's two bad choices: accept it, or refuse the player).
GOD_MODE = ("The guard falls asleep and I walk past him.", "The door gives way and I find the hidden letter.",
            "Everyone in the room agrees with me at once.")
_GOD_RULE = ("world_event", "world_event", "other_character")


def play(request: RecordedRequest) -> str:
    """The natural player cooperates; the adversarial one dictates a world event on about one turn in three,
    and, told why that input cannot be played, plays fair again two times in three."""
    if "adversarial player" not in request.text:
        return "I press on and ask what happens next."
    messages = request.body.get("messages") or []
    turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "user"
               and "cannot be played" not in str(m.get("content")))
    retries = request.text.count("That input cannot be played")
    name = request.text.split("You play ", 1)[-1].split(" in an interactive story", 1)[0]
    roll = _roll("god", name, turn)
    if roll % 3 or (retries and _roll("fair", name, turn, retries) % 3):
        return "I press on and ask what happens next."
    return GOD_MODE[roll % len(GOD_MODE)]


def input_screen(request: RecordedRequest) -> dict[str, Any]:
    said = _tag(request.text, "player_input") or ""
    for line, rule in zip(GOD_MODE, _GOD_RULE):
        if line in said:
            return {"fair": False, "explanation": "Scripted demo screen: the input dictates what the narrator decides.",
                    "problems": [{"rule": rule, "quote": " ".join(line.split()[:4]),
                                  "explanation": "Scripted demo: not the player character's own act."}]}
    return {"fair": True, "problems": [], "explanation": "Scripted demo screen: the character's own act."}


def conflict_check(request: RecordedRequest) -> dict[str, Any]:
    text = request.text
    turn_match, story_match = _TURN.search(text), _STORY.search(text)
    turn = int(turn_match.group(1)) if turn_match else 0
    story = story_match.group(1) if story_match else ""
    narration = _tag(text, "narration") or ""
    facts = _FACT.findall(text)
    roll = _roll(story, turn)
    said = _tag(text, "player_input") or ""
    provoked = any(line in said for line in GOD_MODE) and roll % 4 != 0  # the narrator went along with it
    if (turn < 2 or roll % 7 or not facts or not narration) and not (provoked and facts and narration):
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
    if len(first.split()) < 3:  # a quote needs three words: a short first sentence is quoted with what follows
        first = " ".join(narration.split()[:8])
    if len(first.split()) < 3:
        return {"added": [], "negated": []}
    return {"added": [{"text": first.rstrip(".") + ".", "quote": first}], "negated": []}


def trajectory_update(request: RecordedRequest) -> dict[str, Any]:
    turn = _TURN.search(request.text)
    done = turn is not None and int(turn.group(1)) % 2 == 0
    narration = _tag(request.text, "narration") or ""
    # Progress rests on evidence quoted from the response, as the auditor requires.
    evidence = " ".join(narration.split()[-6:]) if done else "Scripted demo: no progress."
    return {"trigger_event_occurred": done, "key_delta_occurred": done, "evidence": evidence}


class _Sampled:
    """A sampled call (temperature > 0: ``--audit-votes`` above 1, ``ncp stability``) is not always the greedy
    answer: the n-th sampled request for one judgement (``_story_key``) disagrees with it when a stable hash of
    (judgement, n) says so, one time in ``odds``. Such requests are interchangeable, so the answers are the same
    whatever order concurrent calls arrive in."""

    def __init__(self, odds: int):
        self.odds = odds
        self.seen: dict[str, int] = {}

    def differs(self, request: RecordedRequest) -> bool:
        temperature = request.body.get("temperature") or 0
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            return False
        key = _story_key(request)
        n = self.seen[key] = self.seen.get(key, -1) + 1
        return _roll("sample", key, n) % self.odds == 0


def _story_key(request: RecordedRequest) -> str:
    """What a sampled answer depends on: the step, the story, the turn and the data the call judges, never the
    prompts' wording, so a change of prompt moves no demo outcome (the tests that pin one stay put)."""
    text = request.text
    story, turn = _STORY.search(text), _TURN.search(text)
    parts = [request.step or "", story.group(1) if story else "", turn.group(1) if turn else "",
             *(_tag(text, kind) or "" for kind in ("player_input", "narration", "flag_quote", "flag_explanation"))]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def install_demo_script(server: ScriptedModelServer) -> None:
    votes, checks = _Sampled(6), _Sampled(5)

    def sampled_confirm(request: RecordedRequest) -> dict[str, Any]:
        answer = confirm(request)
        if votes.differs(request):
            answer = {"confirmed": not answer["confirmed"], "explanation": "Scripted demo: a sampled vote disagrees."}
        return answer

    def sampled_check(request: RecordedRequest) -> dict[str, Any]:
        answer = conflict_check(request)
        return {"conflicts": []} if answer["conflicts"] and checks.differs(request) else answer

    server.add(role="narrator", reply=narrate)
    server.add(role="player", reply=play)
    server.add(step="conflict_check", reply=sampled_check)
    server.add(step="conflict_confirmation", reply=sampled_confirm)
    server.add(step="fact_update", reply=fact_update)
    server.add(step="trajectory_update", reply=trajectory_update)
    server.add(step="input_screen", reply=input_screen)
