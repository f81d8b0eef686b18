"""Benchmark specs proven by a reference playthrough (docs/specs.md, "Writing a playthrough"), and played to
their last node.

The loader checks a playthrough when a spec has one; this rule asks for one. A benchmark spec is one with a
``review`` record (the bundled specs under ``specs/`` all carry one); a studio's own spec or a test fixture
without a review record is not asked. The finding is a notice: it is printed and counted but does not fail
``ncp lint`` while the bundled specs are still being given their playthroughs. Once all of them have one,
``PLAYTHROUGH_SEVERITY`` becomes ``"error"``.
"""

from __future__ import annotations

from .core import Context, LintFinding

PLAYTHROUGH_SEVERITY = "notice"

PLAYTHROUGH_RULES: dict[str, str] = {
    "missing-playthrough": "a benchmark spec (one with a review record) has no reference playthrough proving it "
                           "winnable (a notice: printed and counted, exit 0, until every bundled spec has one)",
    "unplayed-final-nodes": "every achievement is met before the last trajectory node(s), so an episode ends in "
                            "success there and never plays them, and even a perfect narrator's progress stays "
                            "below 100% (a notice until the bundled specs are fixed)",
}


def _missing_playthrough(cx: Context) -> list[LintFinding]:
    spec = cx.spec
    if spec.review is None or spec.playthrough is not None:
        return []
    return [cx.finding("missing-playthrough", ("scripted_inputs",), (
        f"no `playthrough:` for the {len(spec.scripted_inputs)} scripted inputs: write what an ideal narrator "
        "answers to each, with the node it advances and a key-delta quote (docs/specs.md, Writing a playthrough)"),
        PLAYTHROUGH_SEVERITY)]


def _unplayed_final_nodes(cx: Context) -> list[LintFinding]:
    """An episode succeeds once every achievement is met, and an achievement that names nodes is met when the
    last of them is reached: nodes after the latest such node are never played."""
    spec = cx.spec
    needs = [max((cx.node_index[d] for d in c.depends_on if d in cx.node_index), default=-1)
             for c in spec.achievements]
    if not needs or min(needs) < 0:
        return []  # an achievement the commitment check alone can satisfy may come at any time
    last = max(needs)
    unplayed = [n.id for n in spec.trajectory[last + 1:]]
    if not unplayed:
        return []
    return [cx.finding("unplayed-final-nodes", ("trajectory", last + 1), (
        f"every achievement is met by {cx.node_label(last)}, so an episode ends in success there and never plays "
        f"{', '.join(unplayed)}: name the last node in an achievement's depends_on (a goal the player has there), "
        "or end the trajectory where the story's last goal is met"), PLAYTHROUGH_SEVERITY)]


PLAYTHROUGH_CHECKS = (_missing_playthrough, _unplayed_final_nodes)
