"""The spec linter: deterministic content checks that schema validation cannot make.

``ncp validate`` checks that a spec is well formed; the linter checks that it is *sound*: that the
starting ledger does not leak the future, that facts do not repeat, that every commitment can be
judged and every achievement reached, and that the scripted player does not know names before the
story has introduced them. Each finding is ``path:line: rule: message`` (``ncp lint``,
``ncp validate --strict``). Everything here is pure text analysis: no pytest, no models (yaml only to
read the shared world rules). The playability rules of the benchmark review are in ``story.py``.

Proper names are found without a language model, so the rules stay deterministic:

- a *name token* is a capitalised word that is not in ``NAME_STOPWORDS`` (function words, honorifics
  and ranks, days, months);
- a capitalised word in the middle of a sentence is a name token; one at a sentence start is only
  when the same word appears capitalised mid-sentence somewhere else in the spec (the spec's own
  lexicon), which tells "Alan is killed" (a name) from "Pirate ships ram..." (not one);
- adjacent name tokens form one name ("Jane Olsen", "Quintus Arrius"); a name is mentioned by a text
  that contains any of its tokens, so "Dr. Olsen" and "Jane Olsen" share "Olsen". Erring towards
  "mentioned" keeps false positives rare: a finding should always be worth reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:  # the spec module imports pydantic; the linter only reads its objects
    from ..spec import NarrativeSpec, SpecError

RULES: dict[str, str] = {
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

# Content words decide duplicate facts and achievement/node overlap. Negations are deliberately
# *not* stopwords: "X is not Y" and "X is Y" are different facts (see NEGATIONS).
CONTENT_STOPWORDS: frozenset[str] = frozenset("""
a about above across after again against all along already also although am among an and another any
anyone anything are as at away back be became because become becomes been before behind being below
between both but by can could did do does doing done down during each either else even ever every for
from further had has have having he her here hers herself him himself his how i if in into is it its
itself just least less let like made make makes many may me might more most much must my myself near
now of off on once one only onto or other others our ours ourselves out over own per rather same
she should since so some such than that the their theirs them themselves then there these they this
those though through thus to too toward towards under until up upon us very was we were what when where
whether which while who whom whose why will with within without would yet you your yours yourself
""".split())

# Honorifics, ranks and kinship words: before a name they are not part of it ("Dr. Olsen" is the
# name "Olsen"); after one they finish it ("the Pirate King"), but only the other words identify it.
_TITLES: frozenset[str] = frozenset("""
mr mrs ms miss mister master dr doctor sir madam madame mme mlle monsieur herr frau don dona senor
senora lady lord st saint rev reverend prof professor
captain capt colonel col major general lieutenant lt sergeant sgt corporal private admiral commander
commodore marshal inspector detective constable judge sheriff mayor governor president
senator king queen prince princess duke duchess count countess baron baroness emperor empress
father mother brother sister uncle aunt
""".split())

# Capitalised words that are never names: function words (sentence starts, "I"), titles, days, months.
NAME_STOPWORDS: frozenset[str] = frozenset(
    (CONTENT_STOPWORDS - {"will"})  # "Will" is a first name far more often than a capitalised modal
    | _TITLES
    | set("""
i i'm i'll i've i'd oh yes no not ah alas o
monday tuesday wednesday thursday friday saturday sunday
january february march april june july august september october november december
""".split())
)

# Abbreviations whose full stop does not end a sentence ("Dr. Olsen" keeps "Olsen" mid-sentence).
_ABBREVIATIONS: frozenset[str] = frozenset(
    "mr mrs ms dr st mt jr sr rev prof capt col lt sgt gen gov mme mlle messrs vs etc no".split()
)

_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*['’]?")
# What may sit between a sentence end and the next word: spaces, quotes, brackets, dashes.
_OPENERS = " \t\r\n\"'“”‘’()[]«»—–-"
_QUOTES = "\"“‘«"

DUPLICATE_THRESHOLD = 0.8
# A fact and its denial share nearly every word; they contradict rather than repeat each other.
NEGATIONS: frozenset[str] = frozenset("not no never nobody nothing none neither nor cannot".split())


@dataclass(frozen=True)
class LintFinding:
    path: str
    line: int | None
    rule: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.rule}: {self.message}"


# --- words and names -------------------------------------------------------------------------------


def _strip_possessive(word: str) -> str:
    for suffix in ("'s", "’s", "'", "’"):
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> list[tuple[str, bool]]:
    """Words of ``text`` (possessives stripped), each with whether it starts a sentence.

    A sentence starts at the beginning of the text, after ``. ! ? : ;`` (but not after the full stop
    of an abbreviation or an initial: "Dr. Olsen", "J. Smith") and after an opening quote.
    """
    out: list[tuple[str, bool]] = []
    prev_end, prev_word = 0, ""
    for m in _WORD.finditer(text):
        gap = text[prev_end:m.start()]
        punct = gap.strip(_OPENERS)
        if not out:
            starts = not punct
        elif punct and punct[-1] in ".!?:;":
            abbreviation = punct == "." and (prev_word.lower() in _ABBREVIATIONS
                                             or (len(prev_word) == 1 and prev_word.isupper()))
            starts = not abbreviation
        else:
            # An opening quote (after a space or at a clause edge, unlike a closing one that hugs the
            # previous word) starts quoted speech, whose first word is capitalised like a sentence's.
            g = gap.rstrip()
            starts = bool(g) and g[-1] in _QUOTES and (len(g) == 1 or not g[-2].isalnum()) and g[0] not in _QUOTES
        out.append((_strip_possessive(m.group()), starts))
        prev_end, prev_word = m.end(), m.group()
    return out


def _is_capitalised(word: str) -> bool:
    return word[0].isupper() and word.lower() not in NAME_STOPWORDS


def spec_lexicon(texts: Iterable[str]) -> frozenset[str]:
    """Words the spec itself capitalises mid-sentence: its proper names, wherever they occur."""
    return frozenset(w for text in texts for w, starts in _words(text) if not starts and _is_capitalised(w))


def proper_names(text: str, lexicon: frozenset[str] = frozenset()) -> list[tuple[str, ...]]:
    """Proper names in ``text`` as tuples of words, in order of first appearance, without repeats.

    A capitalised word counts when it is mid-sentence, or at a sentence start and in ``lexicon``.
    Adjacent name words join into one name; a title before a name is dropped, one after it is kept
    ("Dr. Jane Olsen" -> Jane Olsen, "the Pirate King" -> Pirate King). See ``name_keys``.
    """
    names: list[tuple[str, ...]] = []
    current: list[str] = []
    for word, starts in _words(text):
        if _is_capitalised(word) and (not starts or word in lexicon):
            if starts and current:  # a new sentence starts a new name
                names.append(tuple(current))
                current = []
            current.append(word)
        elif current and not starts and word[0].isupper() and word.lower() in _TITLES:
            current.append(word)
        elif current:
            names.append(tuple(current))
            current = []
    if current:
        names.append(tuple(current))
    return list(dict.fromkeys(names))


def name_keys(name: tuple[str, ...]) -> tuple[str, ...]:
    """The words that identify a name (titles removed); a text mentions a name when it has any of them."""
    return tuple(t for t in name if t.lower() not in NAME_STOPWORDS)


def _forms(tokens: Iterable[str]) -> set[str]:
    """A name token and its plural/singular twin, so "the Olsens' house" mentions "Olsen"."""
    out: set[str] = set()
    for t in tokens:
        out.add(t)
        out.add(t[:-1] if t.endswith("s") and len(t) > 3 else t + "s")
    return out


def content_words(text: str) -> set[str]:
    """Lower-cased words minus stopwords, lightly stemmed (plural s), for overlap measures."""
    out: set[str] = set()
    for word, _ in _words(text):
        w = word.lower().replace("’", "'")
        if w.endswith("n't"):
            w = "not"  # "isn't", "doesn't", "can't": the negation is the content
        if w in CONTENT_STOPWORDS or len(w) < 2:
            continue
        if w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
            w = w[:-1]
        out.add(w)
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


# --- the rules -------------------------------------------------------------------------------------


class _Context:
    """What every rule needs from one spec, computed once."""

    def __init__(self, spec: NarrativeSpec):
        self.spec = spec
        self.path = spec.path or f"<spec {spec.id}>"
        texts = [spec.player.name, spec.player.briefing, spec.synopsis]
        texts += [f.text for f in spec.initial_facts] + [c.text for c in spec.commitments]
        texts += [t for n in spec.trajectory for t in (n.description, n.trigger_event, n.key_delta)]
        texts += list(spec.scripted_inputs)
        # The player's name is a name by definition, even where it starts a sentence.
        self.lexicon = spec_lexicon(texts) | {w for w, _ in _words(spec.player.name) if _is_capitalised(w)}
        self.node_index = {n.id: i for i, n in enumerate(spec.trajectory)}
        self.node_names: list[set[str]] = [
            self.name_forms(f"{n.description}\n{n.trigger_event}\n{n.key_delta}") for n in spec.trajectory
        ]
        self.player_tokens = {w for w, _ in _words(spec.player.name)}

    def names(self, text: str) -> list[tuple[str, ...]]:
        # Each field is its own text: a newline between fields acts as a sentence end.
        return proper_names(text.replace("\n", ".\n"), self.lexicon)

    def name_forms(self, *texts: str) -> set[str]:
        """Every identifying name word in ``texts``, with its plural/singular twin."""
        return _forms(t for text in texts for name in self.names(text) for t in name_keys(name))

    def first_mention(self, name: tuple[str, ...]) -> int | None:
        for i, mentioned in enumerate(self.node_names):
            if any(t in mentioned for t in name_keys(name)):
                return i
        return None

    def node_label(self, i: int) -> str:
        return f"node {i + 1} {self.spec.trajectory[i].id!r}"

    def finding(self, rule: str, loc: tuple, message: str) -> LintFinding:
        return LintFinding(self.path, self.spec.line_of(*loc), rule, message)


def _future_sight(cx: _Context) -> list[LintFinding]:
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


def _duplicate_facts(cx: _Context) -> list[LintFinding]:
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


def _commitments_without_dependency(cx: _Context) -> list[LintFinding]:
    out = []
    for i, c in enumerate(cx.spec.commitments):
        if c.depends_on or (c.kind == "ordering" and c.before and c.after):
            continue
        out.append(cx.finding("commitment-without-dependency", ("commitments", i), (
            f"{c.kind} {c.id} names no fact or node it depends on: add `depends_on: [...]` with the "
            f"initial fact and trajectory node ids the auditor should judge it against")))
    return out


def _orderings_out_of_order(cx: _Context) -> list[LintFinding]:
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


def _unsatisfiable_achievements(cx: _Context) -> list[LintFinding]:
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


def _story_inputs(cx: _Context) -> int:
    """How many scripted inputs play the trajectory: up to the last one that uses a word only the
    final node uses (the rest keep playing in the world the story left); all of them when none does."""
    spec = cx.spec
    skip = {w.lower() for w in cx.player_tokens}
    words = [content_words(f"{n.description} {n.trigger_event} {n.key_delta}") - skip for n in spec.trajectory]
    final = words[-1] - set().union(*words[:-1]) if len(words) > 1 else set()
    last = max((i for i, text in enumerate(spec.scripted_inputs) if content_words(text) & final), default=None)
    return last + 1 if last is not None else len(spec.scripted_inputs)


def _scripted_input_foresight(cx: _Context) -> list[LintFinding]:
    spec = cx.spec
    inputs, nodes = spec.scripted_inputs, len(spec.trajectory)
    known = _forms(cx.player_tokens) | cx.name_forms(spec.player.briefing, *(f.text for f in spec.initial_facts))
    out = []
    story = _story_inputs(cx)
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


# The playability rules of the benchmark review (issue 11) live in their own module; it reads the
# helpers above, so it is imported once they exist.
from .story import STORY_CHECKS, STORY_RULES  # noqa: E402

RULES.update(STORY_RULES)
_CHECKS = (_future_sight, _duplicate_facts, _commitments_without_dependency, _orderings_out_of_order,
           _unsatisfiable_achievements, _scripted_input_foresight, *STORY_CHECKS)


def lint_spec(spec: NarrativeSpec) -> list[LintFinding]:
    """Every finding for one (valid) spec, ordered by line then rule."""
    cx = _Context(spec)
    findings = [f for check in _CHECKS for f in check(cx)]
    return sorted(findings, key=lambda f: (f.line or 0, f.rule, f.message))


def lint_paths(paths: Sequence[str | Path]) -> tuple[list[LintFinding], list[SpecError]]:
    """Lint every valid spec under ``paths``; specs that fail validation come back as errors."""
    from ..spec import load_specs

    specs, errors = load_specs(paths)
    return [f for spec in specs for f in lint_spec(spec)], errors
