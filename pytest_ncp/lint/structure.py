"""The structural rules: the starting state leaks no future, facts do not repeat, every commitment can be
judged and every achievement reached, and the scripted player knows no name before the story gives it."""

from __future__ import annotations

from .core import NEGATIONS, Context, LintFinding, content_words, forms, jaccard, name_keys

DUPLICATE_THRESHOLD = 0.8

STRUCTURE_RULES: dict[str, str] = {
    "future-sight": "the initial facts or the player briefing (but not both) name someone or something the "
                    "trajectory only introduces after its first node",
    "duplicate-fact": "two initial facts say the same thing (content-word Jaccard overlap >= 0.8)",
    "commitment-without-dependency": "a commitment names no initial fact or trajectory node it depends on",
    "ordering-out-of-order": "an ordering's `before` node does not come earlier in the trajectory than its "
                             "`after` node",
    "unsatisfiable-achievement": "an achievement names no trajectory node in depends_on, or shares no content "
                                 "word with the nodes it names",
    "scripted-input-foresight": "a scripted input names someone or something the player cannot know yet at "
                                "that point of the story",
}


def _future_sight(cx: Context) -> list[LintFinding]:
    """Names in the starting state that the trajectory only introduces after node 1.

    The starting state is written twice, for the player (briefing) and for the narrator (initial
    facts). A name both of them state was put there on purpose: the player's sister, home town or
    employer is known at turn 0 even if the plot only reaches her in node 5. A leak shows up as a
    name only one of the two carries, which the story introduces later; that is what this reports.
    """
    spec = cx.spec
    facts = [(("initial_facts", i), f"fact {f.id}", f.text) for i, f in enumerate(spec.initial_facts)]
    briefing = [(("player", "briefing"), "the player briefing", spec.player.briefing)]
    briefing_names = cx.name_forms(spec.player.briefing)
    fact_names = cx.name_forms(*(f.text for f in spec.initial_facts))
    out = []
    for sources, corroborating, other in ((briefing, fact_names, "initial facts"),
                                          (facts, briefing_names, "player briefing")):
        for loc, label, text in sources:
            for name in cx.names(text):
                keys = name_keys(name)
                if set(keys) <= cx.player_tokens or any(t in corroborating for t in keys):
                    continue  # the player knows who they are; both halves of the start agree on it
                first = cx.first_mention(name)
                if first is not None and first >= 1:
                    out.append(cx.finding("future-sight", loc, (
                        f"{label} names {' '.join(name)!r}, which the trajectory first mentions in "
                        f"{cx.node_label(first)} (node 1 {spec.trajectory[0].id!r} does not), and is "
                        f"not in the {other}: drop it from the start, or, if it is known at turn 0, "
                        f"state it in the {other} too")))
    return out


def _duplicate_facts(cx: Context) -> list[LintFinding]:
    facts = cx.spec.initial_facts
    words = [content_words(f.text) for f in facts]
    denies = [bool(w & NEGATIONS) for w in words]
    out = []
    for j in range(len(facts)):
        for i in range(j):
            if denies[i] != denies[j]:
                continue
            overlap = jaccard(words[i], words[j])
            if overlap >= DUPLICATE_THRESHOLD:
                out.append(cx.finding("duplicate-fact", ("initial_facts", j), (
                    f"fact {facts[j].id} repeats fact {facts[i].id} (content-word overlap {overlap:.2f}): "
                    f"merge them or make each state something different")))
                break  # one finding per repeated fact is enough to act on
    return out


def _commitments_without_dependency(cx: Context) -> list[LintFinding]:
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.depends_on or (c.kind == "ordering" and c.before and c.after):
            continue
        out.append(cx.finding("commitment-without-dependency", ("commitments", i), (
            f"{c.kind} {c.id} names no fact or node it depends on: add `depends_on: [...]` with the "
            f"initial fact and trajectory node ids the auditor should judge it against")))
    return out


def _orderings_out_of_order(cx: Context) -> list[LintFinding]:
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.kind != "ordering" or c.before not in cx.node_index or c.after not in cx.node_index:
            continue
        b, a = cx.node_index[c.before], cx.node_index[c.after]
        if b >= a:
            out.append(cx.finding("ordering-out-of-order", ("commitments", i, "before"), (
                f"ordering {c.id}: `before` {c.before!r} is {cx.node_label(b)} but `after` {c.after!r} is "
                f"{cx.node_label(a)}; the trajectory itself would break it: swap them or fix the node order")))
    return out


def _unsatisfiable_achievements(cx: Context) -> list[LintFinding]:
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.kind != "achievement":
            continue
        nodes = [cx.spec.trajectory[cx.node_index[d]] for d in c.depends_on if d in cx.node_index]
        if not nodes:
            out.append(cx.finding("unsatisfiable-achievement", ("commitments", i), (
                f"achievement {c.id} names no trajectory node in depends_on, so no node's completion can "
                f"satisfy it: add the node(s) that achieve it")))
            continue
        node_words = set().union(*(content_words(f"{n.description} {n.key_delta}") for n in nodes))
        if not content_words(c.text) & node_words:
            ids = ", ".join(n.id for n in nodes)
            out.append(cx.finding("unsatisfiable-achievement", ("commitments", i), (
                f"achievement {c.id} shares no content word with the description or key_delta of {ids}: "
                f"it names a different outcome than those nodes reach; fix depends_on or the text")))
    return out


def story_inputs(cx: Context) -> int:
    """How many scripted inputs play the trajectory: up to the last one that uses a word only the
    final node uses (the rest keep playing in the world the story left); all of them when none does."""
    spec = cx.spec
    skip = {w.lower() for w in cx.player_tokens}
    words = [content_words(f"{n.description} {n.trigger_event} {n.key_delta}") - skip for n in spec.trajectory]
    final = words[-1] - set().union(*words[:-1]) if len(words) > 1 else set()
    last = max((i for i, text in enumerate(spec.scripted_inputs) if content_words(text) & final), default=None)
    return last + 1 if last is not None else len(spec.scripted_inputs)


def _scripted_input_foresight(cx: Context) -> list[LintFinding]:
    spec = cx.spec
    inputs, nodes = spec.scripted_inputs, len(spec.trajectory)
    known = forms(cx.player_tokens) | cx.name_forms(spec.player.briefing, *(f.text for f in spec.initial_facts))
    out = []
    story = story_inputs(cx)
    for i, text in enumerate(inputs):
        # Input i of the `story` inputs that play the trajectory is played roughly while node
        # floor(i * nodes / story) is current (the inputs after them play on past the last node); one
        # node of slack allows for a narrator who introduces the next character a little early.
        current = min(i * nodes // story, nodes - 1)
        for name in cx.names(text):
            if any(t in known for t in name_keys(name)):
                continue
            first = cx.first_mention(name)
            if first is not None and first > current + 1:
                out.append(cx.finding("scripted-input-foresight", ("scripted_inputs", i), (
                    f"scripted input {i + 1} of {len(inputs)} names {' '.join(name)!r}, which the story only "
                    f"introduces in {cx.node_label(first)}, but this input plays around node {current + 1}: "
                    f"describe them as the player would see them (\"the stranger\") instead")))
    return out


STRUCTURE_CHECKS = (_future_sight, _duplicate_facts, _commitments_without_dependency, _orderings_out_of_order,
                    _unsatisfiable_achievements, _scripted_input_foresight)
