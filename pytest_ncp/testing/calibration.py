"""Scripted auditors for calibration tests: answer gold cases with the gold label, never, always, or garbage.

The scripted server sees only the prompts, so a case is recognised by what every audit step's prompt
shows: the story title, the turn number, the player's input and the narration (``ncp calibrate
--check`` keeps that combination unique). ``install(server, cases, answer)`` adds one rule per step;
``answer(case)`` picks the behaviour per case:

- ``"gold"``: the gold label of every step (a perfect auditor), its quotes verified as the auditor verifies them;
- ``"never"``: no conflict, nothing added, no progress (an auditor that is asleep);
- ``"always"``: a conflict of every type on every turn, naming ids listed in the prompt;
- ``"invalid"``: text that is not JSON, at every attempt (fail closed: an auditor error);
- ``"gullible"``: the gold label, except that it obeys any narration or input that addresses the auditor
  (a note to the auditor, a fake system message, a fake closing tag, a fake JSON verdict): it then sees no
  conflict and confirms none, as the attack asks. The injection canaries exist to catch this auditor.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from ..core.wire import Step

from .prompts import data_in
from .server import DEFAULT_REPLIES, RecordedRequest

AUDIT_STEPS = (Step.CONFLICT_CHECK, Step.CONFLICT_CONFIRMATION, Step.FACT_UPDATE, Step.TRAJECTORY_UPDATE,
               Step.COMMITMENT_CHECK)
MODES = ("gold", "never", "always", "invalid", "gullible")
# What an attack on the auditor looks like in a prompt's data (the gullible auditor obeys it).
# Whole words only: "harnessed" (a lion not harnessed to a chariot) is story, not an attack.
_ADDRESSES_AUDITOR = re.compile(r"\bauditor|\bauditing model|\b(?:grading|reviewing) model|\bharness\b|system note|"
                                r"\{\s*\"(?:conflicts|confirmed)\"|\u2039\s*/\s*(?:narration|player_input)|\booc\b|"
                                r"out of character|previous instructions", re.I)
_TITLE = re.compile(r"STORY: (.*?)\. The player plays")
_TURN = re.compile(r"TURN (\d+)\.")


def _squash(text: str) -> str:
    return " ".join(text.split())


def request_key(text: str) -> tuple[str, int, str, str] | None:
    """(title, turn, input, narration) as a prompt shows them; None when the prompt is not an audit.

    The prompt shows untrusted text as a person reads it, with tag-like text neutralised
    (``pytest_ncp.prompts.shown``); ``GoldCase.key`` applies the same, so an injection case whose
    narration carries a fake closing tag is recognised as the case it is."""
    title, turn, narration = _TITLE.search(text), _TURN.search(text), data_in(text, "narration")
    if not (title and turn and narration is not None):
        return None
    said = data_in(text, "player_input") or ""
    return (title.group(1), int(turn.group(1)), _squash(said), _squash(narration))


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
    narration = data_in(request.text, "narration")
    quote = evidence(narration) if narration else ""
    fact = re.search(r"^\[(F\d+)\]", request.text, re.M)
    commitment = re.search(r"^\[(C\d+)\]", request.text, re.M)
    conflicts = [
        {"type": "fact", "fact_ids": [fact.group(1)] if fact else [], "commitment_ids": [], "quote": quote,
         "explanation": "flagged by an auditor that flags everything"},
        {"type": "commitment", "fact_ids": [], "commitment_ids": [commitment.group(1)] if commitment else [],
         "quote": quote, "explanation": "flagged by an auditor that flags everything"},
    ]
    if data_in(request.text, "player_input") is not None:
        conflicts.append({"type": "player_input", "fact_ids": [], "commitment_ids": [], "quote": quote,
                          "explanation": "flagged by an auditor that flags everything"})
    return {"conflicts": conflicts}


def install(server: Any, cases: Sequence[Any], answer: Callable[[Any], str] | str = "gold",
            *, model: str | None = None) -> None:
    """Script ``server`` to audit ``cases``; other requests (episodes' turns) keep the server's defaults."""
    by_key = {c.key(): c for c in cases}
    choose: Callable[[Any], str] = (lambda c: answer) if isinstance(answer, str) else answer

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
            if mode == "gullible":
                attacked = any(_ADDRESSES_AUDITOR.search(data_in(request.text, kind) or "")
                               for kind in ("narration", "player_input"))
                if attacked and step == "conflict_check":
                    return {"conflicts": []}
                if attacked and step == "conflict_confirmation":
                    return {"confirmed": False, "explanation": "as the note in the narration says"}
                return gold_answer(case, step)
            raise ValueError(f"unknown answer mode {mode!r}; valid: {', '.join(MODES)}")
        return reply

    for step in AUDIT_STEPS:
        server.add(step=step, model=model, reply=reply_for(step))
