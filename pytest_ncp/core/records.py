"""The episode record: what one episode was, as the engine produces it and ``results.json`` stores it.

One typed, frozen model (DESIGN 7.4) shared by every layer: the engine builds an :class:`EpisodeRecord`
when an episode ends, pytest-xdist and ``ncp run --workers`` carry it as JSON, ``analysis.results``
composes it into ``RunResults``, and analysis and report read it by attribute. What its ending means
(:attr:`EpisodeRecord.ending`) is ``core.endings``'s to say.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from .config import episode_key
from .endings import CommitmentState, ConflictType, Ending, ErrorKind, Owner, Termination


class _Record(BaseModel):
    # strict: "3" is not a number and true is not 1 (a hand-edited file is refused, not reinterpreted);
    # extra="allow": fields this version does not know are kept (analysis/results.py, "Growing the format");
    # frozen: a record is what happened, shared by every reader.
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


# The termination as the file spells it (a string of the enum; strict mode would want the enum object).
_TerminationField = Annotated[Termination, Field(strict=False),
                              WithJsonSchema({"enum": [t.value for t in Termination], "type": "string"})]


class Agreement(_Record):
    """How the ``--audit-votes`` confirmation samples of a conflict voted: ``yes`` of ``of`` confirmed it."""

    yes: int = Field(ge=0, description="Samples that confirmed the conflict.")
    of: int = Field(ge=1, description="Samples asked (K).")


class Failure(_Record):
    """The confirmed conflict that ended an episode (``termination`` ``conflict:*``, and the conflict of a
    ``player_fault`` or ``contested`` episode)."""

    turn: int = Field(ge=0, description="Turn of the conflict (turn 0 is the opening narration).")
    type: ConflictType = Field(description="What the narration contradicted: a ledger fact, a commitment, "
                                           "or the player's input.")
    fact_ids: list[str] = Field(default_factory=list, description="Ledger fact ids the conflict relies on.")
    commitment_ids: list[str] = Field(default_factory=list, description="Commitment ids the conflict relies on.")
    quote: str = Field(default="", description="The span of the narrator's response the auditor quoted "
                                               "(verified against the response).")
    explanation: str = Field(default="", description="The auditor's explanation of the conflict.")
    confirmation: str = Field(default="", description="The secondary confirmation call's explanation.")
    quote_verified: bool = Field(default=True, description="False when the quote could not be verified against "
                                                           "the response and the flag was confirmed unverified.")
    agreement: Agreement | None = Field(default=None, description="With `--audit-votes` K > 1: how many of the K "
                                                                  "confirmation samples confirmed it; absent with "
                                                                  "one vote.")

    @property
    def agreement_text(self) -> str | None:
        """``2/3``; None with one vote."""
        return None if self.agreement is None else f"{self.agreement.yes}/{self.agreement.of}"


class ErrorRecord(_Record):
    """Why an episode could not be judged, or why the narrator failed without a conflict."""

    kind: ErrorKind = Field(description="Who caused it: `narrator` (raised, timed out, answered nothing: "
                                        "counts as a narrator failure), or `auditor`, `model`, `player` "
                                        "(an unknown outcome: censored, bounded by the error budget).")
    message: str = Field(description="What went wrong, secrets scrubbed.")
    traceback: str | None = Field(default=None, description="The Python traceback, when there was one.")
    turn: int | None = Field(default=None, ge=0, description="The turn being played when it happened.")


class NodeReached(_Record):
    """A trajectory node the episode reached."""

    id: str = Field(description="The node id in the spec's trajectory.")
    trigger_turn: int | None = Field(default=None, description="Turn at which its trigger event happened.")
    reached_turn: int | None = Field(default=None, description="Turn at which its key delta happened (reached).")


class FlagCounts(_Record):
    """Flags the conflict check raised over an episode, and what became of the doubtful ones (never dropped)."""

    raised: int = Field(default=0, ge=0, description="Conflicts flagged by the conflict check.")
    confirmed: int = Field(default=0, ge=0, description="Flags the confirmation step confirmed.")
    unverified: int = Field(default=0, ge=0, description="Flags whose quote was never verified.")
    unverified_confirmed: int = Field(default=0, ge=0, description="Of those, confirmed.")
    withdrawn: int = Field(default=0, ge=0, description="Flags the auditor withdrew on a retry.")
    withdrawn_confirmed: int = Field(default=0, ge=0, description="Of those, confirmed.")
    split: int | None = Field(default=None, ge=0, description="With `--audit-votes` K > 1: flags whose samples "
                                                              "disagreed (short of unanimity either way).")
    split_confirmed: int | None = Field(default=None, ge=0, description="Of those, confirmed by the majority.")


class ScreenProblem(_Record):
    """One rule an unfair simulated input broke."""

    rule: str = Field(description="world_event, other_character or unknowable.")
    quote: str = Field(description="The words of the input that break it.")
    explanation: str = Field(default="", description="The screen's explanation.")


class PlayerFault(_Record):
    """The unfair simulated input that provoked the conflict of a ``player_fault`` episode."""

    turn: int = Field(ge=0, description="The turn it was played at.")
    input: str = Field(description="The input as played (the last attempt).")
    problems: list[ScreenProblem] = Field(default_factory=list, description="Why the screen found it unfair.")
    attempts: int = Field(ge=1, description="Inputs the player gave for that turn (1 + regenerations).")


class Screening(_Record):
    """How a simulated player's inputs fared in the input screen (issue 23); absent for scripted players."""

    inputs: int = Field(default=0, ge=0, description="Turns whose input was screened.")
    unfair: int = Field(default=0, ge=0, description="Inputs the screen found unfair (every attempt counted).")
    regenerated: int = Field(default=0, ge=0, description="Inputs asked for again after an unfair one.")
    played_unfair: int = Field(default=0, ge=0, description="Turns played with an input still unfair.")
    calls: int = Field(default=0, ge=0, description="Screen calls (retries of invalid answers included).")


class SpeculativeUsage(_Record):
    """Model calls of a turn played ahead and discarded because the episode ended first (pipelining)."""

    calls: int = Field(default=0, ge=0, description="Discarded model calls.")
    tokens: int = Field(default=0, ge=0, description="Their tokens.")
    cost_usd: float = Field(default=0.0, ge=0, description="Their cost in US dollars (list prices).")


class ForkOrigin(_Record):
    """Where a forked episode (``ncp fork``) started: it never joins a run's episodes."""

    trace: str | None = Field(default=None, description="The trace the fork was taken from.")
    turn: int | None = Field(default=None, description="The turn that was sampled again.")
    sample: int | None = Field(default=None, description="Which sample this episode is (episodes only).")


class EpisodeRecord(_Record):
    """One episode: one run of player, narrator and auditor on one spec (DESIGN 7.4)."""

    spec_id: str = Field(description="The spec's id.")
    repeat: int = Field(ge=0, description="Which repeat of the spec (0-based; `--repeats`).")
    termination: _TerminationField = Field(description="How the episode ended. `conflict:*` is a confirmed conflict; "
                                                 "`error` comes with `error.kind`; `budget`: cut short by the "
                                                 "run's budget (`cut_by`), censored, owned by the budget; "
                                                 "`cancelled`: ended in flight after a sequential gate decided "
                                                 "(`--sequential-cancel`), censored; `player_fault`: an unfair "
                                                 "simulated input provoked the conflict (`player_fault`); "
                                                 "`contested`: a conflict short of unanimous `--audit-votes`.")
    turns: int = Field(ge=0, description="Turns completed.")
    progress: float = Field(ge=0, le=1, description="Trajectory nodes reached / nodes.")
    satisfied: float = Field(ge=0, le=1, description="Achievements and orderings whose condition was met / "
                                                     "those commitments.")
    held: float | None = Field(default=None, ge=0, le=1,
                               description="Invariants (world rules included) never violated / invariants; "
                                           "null when none were audited.")
    spec_fingerprint: str | None = Field(default=None, description="Hash of the spec as played (resume refuses "
                                                                   "a spec that changed).")
    failure: Failure | None = Field(default=None, description="The confirmed conflict; null otherwise.")
    error: ErrorRecord | None = Field(default=None, description="The error that ended the episode; null otherwise.")
    commitments: dict[str, CommitmentState] = Field(default_factory=dict,
                                                    description="State of every commitment at the end, by id.")
    nodes_reached: int | None = Field(default=None, ge=0, description="Number of trajectory nodes reached.")
    nodes: list[NodeReached] = Field(default_factory=list, description="The nodes reached, in order.")
    tokens: int = Field(default=0, ge=0, description="Tokens of every model call of the episode.")
    prompt_tokens: int | None = Field(default=None, ge=0, description="Of those, prompt tokens (null in files "
                                                                      "from before the split).")
    completion_tokens: int | None = Field(default=None, ge=0, description="Of those, completion tokens.")
    cached_tokens: int | None = Field(default=None, ge=0, description="Of the prompt tokens, those a provider's "
                                                                      "prompt cache served (priced at the cached "
                                                                      "rate).")
    cost_usd: float = Field(default=0.0, ge=0, description="Cost of those calls in US dollars (list prices).")
    trace: str | None = Field(default=None, description="The episode's JSON-lines trace: relative to the results "
                                                        "folder when inside it.")
    speculative: SpeculativeUsage | None = Field(default=None, description="Calls played ahead and discarded.")
    truncated_calls: int = Field(default=0, ge=0, description="Model answers cut off at their token limit.")
    structured_output: dict[str, str] = Field(default_factory=dict,
                                              description="Structured-output mode used, by `endpoint|model`.")
    flags: FlagCounts | None = Field(default=None, description="What became of every flag of the conflict check.")
    fork: ForkOrigin | None = Field(default=None, description="Set on forked episodes (`ncp fork`) only.")
    cut_by: str | None = Field(default=None, description="With termination `budget`: the option that cut the "
                                                         "episode short (`max-cost`).")
    player_fault: PlayerFault | None = Field(default=None, description="Set when `termination` is `player_fault`.")
    screening: Screening | None = Field(default=None, description="Simulated players only: the input screen's "
                                                                  "counts.")

    @property
    def key(self) -> str:
        """``spec--rN``: the episode in ``expected``/``finished``, trace names and resume."""
        return episode_key(self.spec_id, self.repeat)

    @property
    def ending(self) -> Ending:
        """What the ending means (owner, failure, judged, unknown, censored): the one classification."""
        return Ending.of(self.termination, self.error.kind if self.error is not None else None)

    @property
    def owner(self) -> Owner:
        return self.ending.owner


__all__ = ["Agreement", "CommitmentState", "ConflictType", "Ending", "EpisodeRecord", "ErrorKind", "ErrorRecord",
           "Failure", "FlagCounts", "ForkOrigin", "NodeReached", "Owner", "PlayerFault", "ScreenProblem",
           "Screening", "SpeculativeUsage", "Termination"]
