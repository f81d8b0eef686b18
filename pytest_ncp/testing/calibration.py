"""Scripted auditors for calibration tests: answer gold cases with the gold label, never, always, or garbage.

The scripted server sees only the prompts, so a case is recognised by what every audit step's prompt
shows: the story title, the turn number, the player's input and the narration (``ncp calibrate
--check`` keeps that combination unique). ``install(server, cases, answer)`` adds one rule per step;
``answer(case)`` picks the behaviour per case:

- ``"gold"``: the gold label of every step (a perfect auditor), its quotes verified as the auditor verifies them;
- ``"never"``: no conflict, nothing added, no progress (an auditor that is asleep);
- ``"always"``: a conflict of every type on every turn, naming ids listed in the prompt;
- ``"invalid"``: text that is not JSON, at every attempt (fail closed: an auditor error).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from .server import DEFAULT_REPLIES, RecordedRequest

AUDIT_STEPS = ("conflict_check", "conflict_confirmation", "fact_update", "trajectory_update", "commitment_check")
MODES = ("gold", "never", "always", "invalid")
_TITLE = re.compile(r"STORY: (.*?)\. The player plays")
_TURN = re.compile(r"TURN (\d+)\.")
_INPUT = re.compile(r"<player_input>\n(.*?)\n</player_input>", re.S)
_NARRATION = re.compile(r"<narration>\n(.*?)\n</narration>", re.S)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _unescape(text: str, tag: str) -> str:
    """Undo what the prompts' ``untrusted`` filter did to a data block (``</tag`` -> ``<\\/tag``), so a
    narration that carries a fake closing tag (an injection case) is recognised as the case it is."""
    return text.replace(f"<\\/{tag}", f"</{tag}").replace(f"<\\{tag}", f"<{tag}")


def request_key(text: str) -> tuple[str, int, str, str] | None:
    """(title, turn, input, narration) as a prompt shows them; None when the prompt is not an audit."""
    title, turn, narration = _TITLE.search(text), _TURN.search(text), _NARRATION.search(text)
    if not (title and turn and narration):
        return None
    player = _INPUT.search(text)
    said = _unescape(player.group(1), "player_input") if player else ""
    return (title.group(1), int(turn.group(1)), _squash(said), _squash(_unescape(narration.group(1), "narration")))


def evidence(response: str, words: int = 8) -> str:
    """A quote the auditor's fail-closed rules accept (``quotes.check_quote``): the first run of
    ``words`` words that verifies, else the whole response."""
    from ..core.quotes import check_quote

    tokens = response.split()
    for start in range(max(len(tokens) - words, 0) + 1):
        quote = " ".join(tokens[start:start + words])
        if check_quote(quote, response) is None:
            return quote
    return response


def gold_answer(case: Any, step: str) -> Any:
    """The answer a perfect auditor gives at ``step`` for a gold case, with verified evidence quotes."""
    quote = evidence(case.response)
    if step == "conflict_check":
        return {"conflicts": [{"type": c.type, "fact_ids": list(c.ids) if c.type == "fact" else [],
                               "commitment_ids": list(c.ids) if c.type == "commitment" else [], "quote": quote,
                               "explanation": f"gold label of {case.id}"} for c in case.conflicts]}
    if step == "conflict_confirmation":
        return {"confirmed": True, "explanation": "gold label"}
    if step == "fact_update":
        return {"added": [{"text": q, "quote": q} for q in case.added],
                "negated": [{"fact_id": f, "quote": quote} for f in case.negated]}
    if step == "trajectory_update":
        # Trigger memory: when the trigger happened at an earlier turn the prompt says so and asks for true.
        return {"trigger_event_occurred": case.trigger or case.trigger_turn is not None,
                "key_delta_occurred": case.delta, "evidence": quote}
    if step == "commitment_check":
        return {"satisfied": [{"commitment_id": c, "evidence": quote} for c in case.satisfied]}
    raise ValueError(step)


def flag_everything(request: RecordedRequest) -> dict[str, Any]:
    """A conflict of every type, with ids taken from the prompt's ledger and commitment lists."""
    narration = _NARRATION.search(request.text)
    quote = evidence(narration.group(1)) if narration else ""
    fact = re.search(r"^\[(F\d+)\]", request.text, re.M)
    commitment = re.search(r"^\[(C\d+)\]", request.text, re.M)
    conflicts = [
        {"type": "fact", "fact_ids": [fact.group(1)] if fact else [], "commitment_ids": [], "quote": quote,
         "explanation": "flagged by an auditor that flags everything"},
        {"type": "commitment", "fact_ids": [], "commitment_ids": [commitment.group(1)] if commitment else [],
         "quote": quote, "explanation": "flagged by an auditor that flags everything"},
    ]
    if _INPUT.search(request.text):
        conflicts.append({"type": "player_input", "fact_ids": [], "commitment_ids": [], "quote": quote,
                          "explanation": "flagged by an auditor that flags everything"})
    return {"conflicts": conflicts}


def install(server: Any, cases: Sequence[Any], answer: Callable[[Any], str] | str = "gold",
            *, model: str | None = None) -> None:
    """Script ``server`` to audit ``cases``; other requests (episodes' turns) keep the server's defaults."""
    by_key = {c.key(): c for c in cases}
    choose = (lambda c: answer) if isinstance(answer, str) else answer

    def reply_for(step: str) -> Callable[[RecordedRequest], Any]:
        def reply(request: RecordedRequest) -> Any:
            key = request_key(request.text)
            case = by_key.get(key) if key else None
            if case is None:
                return None  # not a gold case (an episode's turn): the server's default answer
            mode = choose(case)
            if mode == "gold":
                return gold_answer(case, step)
            if mode == "never":
                return DEFAULT_REPLIES[step]
            if mode == "always":
                return flag_everything(request) if step == "conflict_check" else DEFAULT_REPLIES[step]
            if mode == "invalid":
                return "I think this turn is probably fine."
            raise ValueError(f"unknown answer mode {mode!r}; valid: {', '.join(MODES)}")
        return reply

    for step in AUDIT_STEPS:
        server.add(step=step, model=model, reply=reply_for(step))
