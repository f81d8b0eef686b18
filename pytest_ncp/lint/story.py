"""Playability rules: is every node one observable event, does every commitment bind the narrator,
does the scripted player only act, and can the script reach the end (what a review of the benchmark found unplayable).

Like the rest of the linter these are deterministic text heuristics, tuned on the bundled specs so
that they catch the defects the review named without flooding good specs. Each rule's exact test is
in its docstring and in docs/specs.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .core import (
    ABBREVIATIONS, CONTENT_STOPWORDS, TITLES, Context, LintFinding, content_words, jaccard, sentence_words,
)

if TYPE_CHECKING:
    from ..core.spec import TrajectoryNode

MIN_SCRIPTED_INPUTS = 24
MAX_CLAUSES = 2  # events a trigger or key delta may hold ("X has seen Y and is shaken" is fine; three is not)
COPY_THRESHOLD = 0.75  # content-word Jaccard overlap of an achievement with a key delta that counts as a copy

STORY_RULES: dict[str, str] = {
    "multi-event-node": "a trigger or key delta packs several events: three or more clauses, a list of four or "
                        "more names, or a count of events ('three murders', 'all three', 'in turn')",
    "outside-player-view": "a node the player character cannot witness: they are unconscious, asleep, absent, "
                           "dead or gone ('while X is away', 'without X knowing'), or an earlier node removed them",
    "invariant-binds-player": "an invariant whose subject is the player character ('Victor tells no one', "
                              "'Harold is never cruel'): it constrains the player's choices, not the narrator",
    "achievement-copies-key-delta": "an achievement that repeats a node's key delta (content-word overlap >= "
                                    f"{COPY_THRESHOLD}): state the goal, not the node",
    "adjacent-orderings-only": "no ordering links two nodes that are not neighbours in the trajectory, so the "
                               "orderings only restate the node order",
    "input-narrates-world": "a scripted input states a world event or another character's action ('Trina's "
                            "ticket has won!', 'The guard falls asleep.') instead of the player's own act or words",
    "unreachable-final-achievement": "no scripted input (after the first one about the node before it) uses a "
                                     "word new to the last node an achievement depends on",
    "too-few-inputs": f"fewer than {MIN_SCRIPTED_INPUTS} scripted inputs: a scripted run never reaches turn 20",
    "missing-public-domain": "`source.public_domain` is missing: say why the work (and any work it adapts) is "
                             "free to use",
    "restates-world-rule": "an invariant restates a shared default world rule ('the dead stay dead'): drop it, "
                           "the auditor applies the default to every spec",
}

# --- shared small helpers ----------------------------------------------------------------------------

# A clause is a stretch between ";", ":" or a comma/"and"/"but" boundary that holds a finite verb.
_CLAUSE_BREAK = re.compile(r"[;:]|,\s*(?:and|but|then|while|so)\s+|\s+and\s+then\s+|,\s+|\s+and\s+|\s+but\s+")
_AUXILIARIES = frozenset("is are was were has have had will can cannot could must does do did".split())
_PRONOUNS = frozenset("he she they it who i we".split())
_VERBISH = re.compile(r"[a-z]+(?:[^s]s|ed)")  # "flees", "killed"; not "glass"
_COUNT_WORDS = "two|three|four|five|six|seven|eight|nine|ten|several|many|\\d+"
_EVENT_NOUNS = ("murders|killings|deaths|interrogations|questionings|fights|bouts|rounds|battles|attacks|duels|"
                "robberies|trials|games|races|raids|tests|tasks|challenges|visits|escapes|rescues")
_MULTI_EVENT = re.compile(
    rf"\b(?:all|each of the) (?:{_COUNT_WORDS})\b|\b(?:{_COUNT_WORDS}) (?:\w+ )?(?:{_EVENT_NOUNS})\b"
    r"|\bin turn\b|\bone by one\b|\bone after (?:another|the other)\b",
    re.I)
# Four or more capitalised names in one comma list: "Hilda Lake, Wrede, Liang, Gamble and Grassi".
_NAME = r"[A-Z][\w'’-]+(?: [A-Z][\w'’-]+)*"
_NAME_LIST = re.compile(rf"\b{_NAME}(?:, {_NAME}){{2,}},? and {_NAME}")


def _clauses(text: str, cx: Context) -> int:
    count = 0
    for part in _CLAUSE_BREAK.split(text):
        words = [w for w, _ in sentence_words(part)]
        verb = any(w.lower() in _AUXILIARIES for w in words)
        if not verb:  # a name or pronoun followed by a present or past verb: "Mary falls", "he fled"
            verb = any((a in cx.lexicon or a.lower() in _PRONOUNS) and _VERBISH.fullmatch(b)
                       for a, b in zip(words, words[1:]))
        count += verb
    return count


_NOT_NAMES = frozenset("mr mrs ms dr miss captain sir lady lord the".split())  # in player names, not the name


def _player_pattern(cx: Context) -> re.Pattern[str] | None:
    tokens = sorted(t for t in cx.player_tokens if t[:1].isupper() and t.lower() not in CONTENT_STOPWORDS
                    and len(t) > 1 and t.lower() not in _NOT_NAMES)
    # Case-sensitive even inside re.I patterns: "the Black Pirate" is not "the pirate captain".
    return re.compile(r"(?-i:\b(?:" + "|".join(map(re.escape, tokens)) + r")\b)(?!['’]s)") if tokens else None


def _mask_namesakes(text: str, cx: Context) -> str:
    """Glue a title or another name to a following player name word, so "Lady Macbeth" is not Macbeth."""
    def glue(m: re.Match[str]) -> str:
        word = m.group(1)
        other = word not in cx.player_tokens and (word.lower().rstrip(".") in TITLES or word in cx.lexicon)
        return f"{word}_" if other else m.group(0)

    tokens = [t for t in cx.player_tokens if t[:1].isupper()]
    if not tokens:
        return text
    return re.sub(r"\b([A-Z][\w'’-]*\.?) (?=(?:" + "|".join(map(re.escape, tokens)) + r")\b)", glue, text)


_ABBREVIATION_DOT = re.compile(r"\b(" + "|".join(sorted(ABBREVIATIONS)) + r")\.", re.I)


def _node_text(node: TrajectoryNode) -> str:
    return f"{node.description}\n{node.trigger_event}\n{node.key_delta}"


# --- the rules ---------------------------------------------------------------------------------------


def _multi_event_nodes(cx: Context) -> list[LintFinding]:
    """A trigger or key delta with three or more clauses, a list of four or more names, or a count of events.

    The auditor advances a node when its trigger and key delta both happen, one node per turn: a node
    that packs several events asks one narrator response to tell them all.
    """
    out = []
    for i, node in enumerate(cx.spec.trajectory):
        for field in ("trigger_event", "key_delta"):
            text = getattr(node, field)
            clauses = _clauses(text, cx)
            count = _MULTI_EVENT.search(text)
            names = _NAME_LIST.search(text)
            why = (f"{clauses} clauses" if clauses > MAX_CLAUSES else
                   f"a count of events ({count.group(0)!r})" if count else
                   f"a list of characters ({names.group(0)!r})" if names else None)
            if why:
                out.append(cx.finding("multi-event-node", ("trajectory", i, field), (
                    f"{cx.node_label(i)}: the {field.replace('_', ' ')} packs several events ({why}): "
                    f"make it one event a single response can narrate, and split the rest into nodes of their own")))
    return out


_OUT_OF_VIEW = (
    r"\b(?:while|when) {p}\b[^.;]*?\b(?:is|was) (?:away|absent|gone|asleep|unconscious|out)\b",
    r"\bwithout {p}(?:['’]s)? (?:knowing|knowledge|seeing|noticing)\b",
    r"\bunknown to {p}\b", r"\bunseen by {p}\b", r"\bbehind {p}['’]s? back\b", r"\bin {p}['’]s? absence\b",
    r"\bknocks? {p} (?:out|unconscious|senseless)\b", r"\b{p}\b(?!['’]s)[^.;,]*?\b(?:is|falls|lies|has been|was) "
    r"(?:knocked )?(?:unconscious|senseless|stunned|knocked out)\b",
)
# The player dies or vanishes: "Paul is dead", "Mary ..., sees the dead dancing and vanishes on the beach".
_GONE_VERB = r"(?:is dead|is killed|dies|has died|vanishes|has vanished|disappears|has disappeared)\b"
_GONE = rf"{{p}}\s+(?:\w+ly\s+)?{_GONE_VERB}|^\s*{{p}}\b[^.;]*?(?:,|\band)\s+(?:then\s+)?{_GONE_VERB}"


def _outside_player_view(cx: Context) -> list[LintFinding]:
    """A node the player character cannot witness.

    Flags a node whose text has the player unconscious or absent ("Meinike knocks Wilson out",
    "while Jim is away", "without Roy knowing"), a key delta that goes on after the player dies or
    vanishes ("Victor is dead and the creature leaves"), and every node after one in which the player
    dies or vanishes (the carnival-of-souls car is raised after Mary has gone).
    """
    player = _player_pattern(cx)
    if player is None:
        return []
    p = player.pattern
    out_of_view = [re.compile(r.format(p=p), re.I) for r in _OUT_OF_VIEW]
    gone = re.compile(_GONE.format(p=p), re.I)
    out = []
    gone_at: int | None = None
    for i, node in enumerate(cx.spec.trajectory):
        if gone_at is not None:
            out.append(cx.finding("outside-player-view", ("trajectory", i), (
                f"{cx.node_label(i)} comes after {cx.node_label(gone_at)}, where the player character dies or "
                f"vanishes: the player cannot witness it; end the trajectory there or tell it from a point of view "
                f"the player still has")))
            continue
        text = _mask_namesakes(_node_text(node), cx)
        hit = next((m for r in out_of_view if (m := r.search(text))), None)
        if hit:
            out.append(cx.finding("outside-player-view", ("trajectory", i), (
                f"{cx.node_label(i)}: {hit.group(0)!r}: the player character cannot witness this node's events; make "
                f"its trigger and key delta things they see or are told")))
        key_delta = _mask_namesakes(node.key_delta, cx)
        death = gone.search(key_delta)
        if death:
            rest = key_delta[death.end():]
            if any(w.lower() in _AUXILIARIES or _VERBISH.fullmatch(w) for w, _ in sentence_words(rest)):
                out.append(cx.finding("outside-player-view", ("trajectory", i, "key_delta"), (
                    f"{cx.node_label(i)}: the key delta goes on after {death.group(0)!r}: the player cannot "
                    f"witness what happens after that")))
            gone_at = i
    return out


_SUBJECT_VERB = re.compile(
    r"\s+(?:(?:never|always|only|still|also|not|ever|no longer|does not|doesn't|do not|will not|won't|cannot|can't|"
    r"can|could|must|may|would|should|will|is|was|has|does|did|stays|remains)\b\s*)*([a-z]+)?")


def _invariants_binding_the_player(cx: Context) -> list[LintFinding]:
    """An invariant whose grammatical subject is the player character.

    The player character's name (without title), not possessive and not after "only"/"by"/"to"/"than",
    followed by a verb: "Victor tells no one", "Jack loves Mabel", "Harold is never cruel", "Until the
    Frolic, Harold does not realise". An adversarial player can make such a rule fail whatever the
    narrator does; "only Macbeth can see the ghost" (a world rule) is not flagged.
    """
    player = _player_pattern(cx)
    if player is None:
        return []
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.kind != "invariant":
            continue
        text = _mask_namesakes(c.text, cx)
        for m in player.finditer(text):
            before = text[:m.start()].rstrip().lower()
            # "only Macbeth can see", "seen by Mary": the player is not the actor; "until Jack beats him":
            # a condition on the player's act, while the rule itself binds the world.
            if re.search(r"\b(?:only|by|to|than|with|for|of|from|at|on|nor|and|or|see|hear|harm|harms|kill|kills|"
                         r"until|unless|before|after|when|once|while|if|whenever)$", before):
                continue
            after = _SUBJECT_VERB.match(text, m.end())
            consumed = after.group(0).strip() if after else ""
            verb = after.group(1) if after else None
            modal = consumed and consumed.split()[0] != verb
            if after is not None and (modal or (verb and (verb in _AUXILIARIES or _VERBISH.fullmatch(verb)))):
                out.append(cx.finding("invariant-binds-player", ("commitments", i), (
                    f"invariant {c.id} makes the player character {m.group(0)!r} its subject "
                    f"({(m.group(0) + after.group(0)).strip()!r}...): the player decides what they do, feel and "
                    f"say, so an adversarial player can break it whatever the narrator does; bind the narrator's "
                    f"world instead (what other characters, places and rules do)")))
                break
    return out


def _achievements_copying_key_deltas(cx: Context) -> list[LintFinding]:
    """An achievement whose content words overlap a node's key delta by COPY_THRESHOLD or more."""
    out = []
    deltas = [(n, content_words(n.key_delta)) for n in cx.spec.trajectory]
    for i, c in enumerate(cx.spec.commitments):
        if c.kind != "achievement":
            continue
        words = content_words(c.text)
        best = max(deltas, key=lambda d: jaccard(words, d[1]), default=None)
        if best and jaccard(words, best[1]) >= COPY_THRESHOLD:
            out.append(cx.finding("achievement-copies-key-delta", ("commitments", i), (
                f"achievement {c.id} repeats the key delta of node {best[0].id!r} (overlap "
                f"{jaccard(words, best[1]):.2f}): an achievement is a goal of the story (what the player "
                f"character wants to bring about), not a restated plot node")))
    return out


def _adjacent_orderings_only(cx: Context) -> list[LintFinding]:
    """No ordering whose `before` and `after` nodes are two or more positions apart."""
    orderings = [(i, c) for i, c in enumerate(cx.spec.commitments) if c.kind == "ordering"
                 and c.before in cx.node_index and c.after in cx.node_index]
    if any(abs(cx.node_index[c.after or ""] - cx.node_index[c.before or ""]) >= 2 for _, c in orderings):
        return []
    where = ("commitments", orderings[0][0]) if orderings else ("commitments",)
    what = (f"all {len(orderings)} ordering(s) link neighbouring nodes" if orderings else "there is no ordering")
    return [cx.finding("adjacent-orderings-only", where, (
        f"{what}, which only restates the trajectory: add at least one cause-and-effect ordering between "
        f"nodes that are not neighbours (an early cause, a later effect)"))]


# Sentence openings that make the player's own act or words: first person, or a question / command.
_FIRST_PERSON = frozenset("i i'm i've i'll i'd we we're we've we'll my me our let".split())
_THIRD_PERSON_OPENERS = frozenset("the a an another his her their its he she they it there someone everyone "
                                  "everybody nobody somebody that this these those one".split())
_SENTENCES = re.compile(r"[^.!?;]+[.!?;]*")
_SPECULATION = re.compile(r"\b(?:must|might|may|could|perhaps|maybe|seems?|looks? like)\b", re.I)
_QUOTED = re.compile(r"[\"“][^\"”]*[\"”]")


def _inputs_narrating_the_world(cx: Context) -> list[LintFinding]:
    """A declarative sentence of a scripted input whose subject is not the player.

    A sentence (quoted speech removed; split at . ! ? ;) that is not a question, does not start with a
    first-person word or a vocative ("Peter, ..."), starts with a name or a third-person word ("The",
    "Another", "There", "Trina's") and holds a verb: "Trina's ticket has won!", "The railing gives way!",
    "Rita's warning reaches me in time". The narrator decides what the world does; the player only acts.
    """
    out = []
    for i, text in enumerate(cx.spec.scripted_inputs):
        for m in _SENTENCES.finditer(_ABBREVIATION_DOT.sub(r"\1", _QUOTED.sub(" ", text))):
            sentence = m.group(0).strip()
            if not sentence or sentence.endswith("?"):
                continue
            words = [w for w, _ in sentence_words(sentence)]
            if len(words) < 2:
                continue
            first = words[0].lower().replace("’", "'")
            if any(w.replace("’", "'") in ("I", "I'm", "I've", "I'll", "I'd") or w.lower() == "we" for w in words):
                continue  # "That night I hide ...": the player is the subject
            if first in _FIRST_PERSON or re.match(r"\s*[\w'’.-]+(?: [A-Z][\w'’-]+)?,", sentence):
                continue  # the player's own act, or a vocative ("Jacob, ...")
            if re.search(r",\s*[A-Z][\w'’-]*[.!]*$", sentence) or _SPECULATION.search(sentence):
                continue  # words to someone ("That case is mine, Algy."), or a guess ("This must be ...")
            possessive = re.match(r"\s*[A-Z][\w-]*['’]s\b", sentence)  # "Trina's ticket ..."
            subject = first in _THIRD_PERSON_OPENERS or possessive or (
                words[0] in cx.lexicon and words[0] not in cx.player_tokens)
            if not subject:
                continue
            verb = any(w.lower() in _AUXILIARIES or w.lower().replace("’", "'").endswith(("'s", "'re"))
                       or _VERBISH.fullmatch(w) for w in m.group(0).split()[1:6]) \
                or re.search(r"\b(?:is|are|was|were|has|have|had)\b|['’](?:s|re)\b", sentence)
            if verb:
                out.append(cx.finding("input-narrates-world", ("scripted_inputs", i), (
                    f"scripted input {i + 1} states what the world or another character does ({sentence!r}): "
                    f"the narrator decides that; write what the player character does or says "
                    f"(\"I buy a ticket and check the draw\", \"I ask Rita whether ...\")")))
                break
    return out


def _unreachable_final_achievement(cx: Context) -> list[LintFinding]:
    """No scripted input leads to the last node an achievement depends on.

    The final node's own words are the content words of its text (description, trigger, key delta)
    that the node before it does not use (the player's name aside); that node's own words likewise.
    Some input after the first input that mentions the node before must use one of the final node's
    own words: caligari's last input, "At the asylum I ask the porters who their director is", only
    repeats words its second-to-last node uses, and nothing leads to Caligari's restraint.
    """
    spec = cx.spec
    needed = [cx.node_index[d] for c in spec.achievements for d in c.depends_on if d in cx.node_index]
    if not spec.scripted_inputs or not needed:
        return []
    final = max(needed)
    skip = {w.lower() for w in cx.player_tokens}
    words = [content_words(_node_text(n)) - skip for n in spec.trajectory]
    previous = words[final - 1] if final else set()
    own, before = words[final] - previous, previous - words[final]
    inputs = [content_words(t) - skip for t in spec.scripted_inputs]
    start = next((j for j, w in enumerate(inputs) if w & before), -1)
    if any(inputs[j] & own for j in range(start + 1, len(inputs))):
        return []
    achievement = next(c for c in spec.achievements if spec.trajectory[final].id in c.depends_on)
    after = f"after input {start + 1} (the first about the node before it) " if start >= 0 else ""
    return [cx.finding("unreachable-final-achievement", ("commitments", spec.commitments.index(achievement)), (
        f"achievement {achievement.id} needs {cx.node_label(final)}, but no scripted input {after}mentions what "
        f"is new in that node: add inputs that lead the player character there"))]


def _too_few_inputs(cx: Context) -> list[LintFinding]:
    n = len(cx.spec.scripted_inputs)
    if n >= MIN_SCRIPTED_INPUTS:
        return []
    where = ("scripted_inputs",) if n else ("id",)
    return [cx.finding("too-few-inputs", where, (
        f"{n} scripted input(s), fewer than {MIN_SCRIPTED_INPUTS}: a scripted run ends before turn 20, where "
        f"survival is measured; add inputs (after the last node, keep playing in the world the story left)"))]


def _missing_public_domain(cx: Context) -> list[LintFinding]:
    if cx.spec.source.public_domain and cx.spec.source.public_domain.strip():
        return []
    return [cx.finding("missing-public-domain", ("source",), (
        "source.public_domain is missing: say why the work, and any work it adapts, is free to use (e.g. "
        "\"US public domain: published 1843\", \"film copyright not renewed; based on the 1897 novel, PD\")"))]


def _restates_world_rule(cx: Context) -> list[LintFinding]:
    """An invariant that contains a signal phrase of a default world rule in force (world_rules.yaml)."""
    from ..core.world_rules import default_rules

    in_force = {c.id for c in cx.spec.world_rule_commitments}
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.kind != "invariant":
            continue
        text = " ".join(c.text.lower().replace("’", "'").split())
        for rule in default_rules():
            hit = next((s for s in rule.signals if re.search(rf"\b{re.escape(s)}\b", text)), None)
            if rule.id in in_force and hit:
                out.append(cx.finding("restates-world-rule", ("commitments", i), (
                    f"invariant {c.id} restates default world rule {rule.id} ({hit!r}): the auditor applies "
                    f"{rule.id} to every spec; drop it here, or keep only what is specific to this story")))
                break
    return out


STORY_CHECKS = (_multi_event_nodes, _outside_player_view, _invariants_binding_the_player,
                _achievements_copying_key_deltas, _adjacent_orderings_only, _inputs_narrating_the_world,
                _unreachable_final_achievement, _too_few_inputs, _missing_public_domain, _restates_world_rule)
