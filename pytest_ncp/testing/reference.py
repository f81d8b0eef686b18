"""A scripted auditor that judges by the labels of reference playthroughs.

Beside ``pytest_ncp.narrators:ReferenceNarrator`` it shows the benchmark is winnable as written: each audit
step answers what the playthrough's labels say of that turn, recognised by the story title and the turn
number the prompt shows (the reference narrator answers turn t with playthrough turn t). No conflict on
any turn; the trigger when the turn quotes it (or the node advances there); the key delta on the turn that
advances the node; the facts added and negated with their quotes; the commitments the turn satisfies.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .server import DEFAULT_REPLIES, RecordedRequest

if TYPE_CHECKING:
    from ..core.spec import NarrativeSpec, PlaythroughTurn

_TITLE = re.compile(r"STORY: (.*?)\. The player plays")
_TURN = re.compile(r"TURN (\d+)\.")


def labelled_answer(turn: PlaythroughTurn, step: str) -> Any:
    """What a perfect auditor answers at ``step`` for a reference turn, from its labels alone."""
    from .calibration import evidence

    quote = turn.key_delta_quote or turn.trigger_quote or evidence(turn.narration)
    if step == "conflict_check":
        return {"conflicts": []}
    if step == "fact_update":
        return {"added": [{"text": f.text, "quote": f.quote} for f in turn.facts_added],
                "negated": [{"fact_id": n.fact_id, "quote": n.quote} for n in turn.facts_negated]}
    if step == "trajectory_update":
        advances = turn.advances is not None
        return {"trigger_event_occurred": advances or turn.trigger_quote is not None, "key_delta_occurred": advances,
                "evidence": quote}
    if step == "commitment_check":
        return {"satisfied": [{"commitment_id": c, "evidence": evidence(turn.narration)} for c in turn.satisfies]}
    return DEFAULT_REPLIES.get(step, {})


def install_reference_auditor(server: Any, specs: Iterable[NarrativeSpec], *, model: str | None = None) -> None:
    """Script ``server``'s audit steps to answer every reference turn of ``specs`` by its labels; requests of
    other stories or turns keep the server's defaults."""
    turns = {s.title: list(s.playthrough or []) for s in specs}

    def reply_for(step: str) -> Callable[[RecordedRequest], Any]:
        def reply(request: RecordedRequest) -> Any:
            title, number = _TITLE.search(request.text), _TURN.search(request.text)
            if not (title and number) or title.group(1) not in turns:
                return None
            played, t = turns[title.group(1)], int(number.group(1))
            return labelled_answer(played[t - 1], step) if 1 <= t <= len(played) else None
        return reply

    for step in ("conflict_check", "fact_update", "trajectory_update", "commitment_check"):
        server.add(step=step, model=model, reply=reply_for(step))
