"""A syrupy extension for narrative results: stable, readable JSON snapshot files.

``assert result == ncp_snapshot`` stores the spec id, termination, failure, transcript, every
auditor verdict, commitment states and the ledger diff; volatile fields (tokens, cost, latencies,
trace paths, timings) are dropped so a snapshot changes only when a judgment changes.
``assert result.verdicts == ncp_snapshot`` and plain data work too. ``--snapshot-update`` as usual.
"""

from __future__ import annotations

from typing import Any

from syrupy.extensions.json import JSONSnapshotExtension

VOLATILE = frozenset({"tokens", "cost_usd", "latency_s", "trace", "prompt_tokens", "completion_tokens", "speculative",
                      "attempts", "received_at", "created", "id"})


def normalise(data: Any) -> Any:
    """Episode results become their stable record; volatile keys are dropped at every depth."""
    from ..engine.episode import EpisodeResult

    if isinstance(data, EpisodeResult):
        data = {
            "spec_id": data.spec.id, "repeat": data.repeat, "termination": data.termination.value,
            "turns": data.turns, "nodes_reached": data.node_index,
            "failure": data.failure.model_dump(mode="json", exclude_unset=True) if data.failure else None,
            "error": {"kind": data.error.kind, "message": data.error.message} if data.error else None,
            "commitments": dict(data.commitment_states),
            "transcript": [{"turn": t.turn, "player": t.player_input, "narrator": t.response} for t in data.transcript],
            "verdicts": data.verdicts,
            "ledger_diff": data.ledger_diff().splitlines(),
        }
    if isinstance(data, dict):
        return {k: normalise(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, (list, tuple)):
        return [normalise(v) for v in data]
    if hasattr(data, "model_dump"):
        return normalise(data.model_dump())
    if hasattr(data, "value") and isinstance(getattr(data, "value"), str):  # enums such as Termination
        return data.value
    return data


class NcpSnapshotExtension(JSONSnapshotExtension):
    def serialize(self, data: Any, **kwargs: Any) -> Any:
        return super().serialize(normalise(data), **kwargs)
