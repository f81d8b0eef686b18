"""What every lint rule shares: findings, words and proper names, and the per-spec ``Context``.

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
from typing import TYPE_CHECKING, Any, Iterable

from ..core.findings import Finding

if TYPE_CHECKING:  # the spec module imports pydantic; the linter only reads its objects
    from ..core.spec import NarrativeSpec

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
TITLES: frozenset[str] = frozenset("""
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
    | TITLES
    | set("""
i i'm i'll i've i'd oh yes no not ah alas o
monday tuesday wednesday thursday friday saturday sunday
january february march april june july august september october november december
""".split())
)

# Abbreviations whose full stop does not end a sentence ("Dr. Olsen" keeps "Olsen" mid-sentence).
ABBREVIATIONS: frozenset[str] = frozenset(
    "mr mrs ms dr st mt jr sr rev prof capt col lt sgt gen gov mme mlle messrs vs etc no".split()
)

_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*['’]?")
# What may sit between a sentence end and the next word: spaces, quotes, brackets, dashes.
_OPENERS = " \t\r\n\"'“”‘’()[]«»—–-"
_QUOTES = "\"“‘«"

# A fact and its denial share nearly every word; they contradict rather than repeat each other.
NEGATIONS: frozenset[str] = frozenset("not no never nobody nothing none neither nor cannot".split())


SEVERITIES = ("error", "notice")


@dataclass(frozen=True)
class LintFinding(Finding):
    """One finding. An ``error`` fails ``ncp lint``; a ``notice`` is printed and counted but does not (work a
    benchmark is still catching up on, such as the playthroughs not yet written)."""

    path: str
    line: int | None
    rule: str
    message: str
    severity: str = "error"

    @property
    def fails(self) -> bool:
        return self.severity == "error"

    @property
    def what(self) -> str:
        return self.rule if self.fails else f"{self.rule} ({self.severity})"


# --- words and names -------------------------------------------------------------------------------


def _strip_possessive(word: str) -> str:
    for suffix in ("'s", "’s", "'", "’"):
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word


def sentence_words(text: str) -> list[tuple[str, bool]]:
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
            abbreviation = punct == "." and (prev_word.lower() in ABBREVIATIONS
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


def is_capitalised(word: str) -> bool:
    return word[0].isupper() and word.lower() not in NAME_STOPWORDS


def spec_lexicon(texts: Iterable[str]) -> frozenset[str]:
    """Words the spec itself capitalises mid-sentence: its proper names, wherever they occur."""
    return frozenset(w for text in texts for w, starts in sentence_words(text) if not starts and is_capitalised(w))


def proper_names(text: str, lexicon: frozenset[str] = frozenset()) -> list[tuple[str, ...]]:
    """Proper names in ``text`` as tuples of words, in order of first appearance, without repeats.

    A capitalised word counts when it is mid-sentence, or at a sentence start and in ``lexicon``.
    Adjacent name words join into one name; a title before a name is dropped, one after it is kept
    ("Dr. Jane Olsen" -> Jane Olsen, "the Pirate King" -> Pirate King). See ``name_keys``.
    """
    names: list[tuple[str, ...]] = []
    current: list[str] = []
    for word, starts in sentence_words(text):
        if is_capitalised(word) and (not starts or word in lexicon):
            if starts and current:  # a new sentence starts a new name
                names.append(tuple(current))
                current = []
            current.append(word)
        elif current and not starts and word[0].isupper() and word.lower() in TITLES:
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


def forms(tokens: Iterable[str]) -> set[str]:
    """A name token and its plural/singular twin, so "the Olsens' house" mentions "Olsen"."""
    out: set[str] = set()
    for t in tokens:
        out.add(t)
        out.add(t[:-1] if t.endswith("s") and len(t) > 3 else t + "s")
    return out


def content_words(text: str) -> set[str]:
    """Lower-cased words minus stopwords, lightly stemmed (plural s), for overlap measures."""
    out: set[str] = set()
    for word, _ in sentence_words(text):
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


class Context:
    """What every rule needs from one spec, computed once."""

    def __init__(self, spec: NarrativeSpec):
        self.spec = spec
        self.path = spec.path or f"<spec {spec.id}>"
        texts = [spec.player.name, spec.player.briefing, spec.synopsis]
        texts += [f.text for f in spec.initial_facts] + [c.text for c in spec.commitments]
        texts += [t for n in spec.trajectory for t in (n.description, n.trigger_event, n.key_delta)]
        texts += list(spec.scripted_inputs)
        # The player's name is a name by definition, even where it starts a sentence.
        self.lexicon = spec_lexicon(texts) | {w for w, _ in sentence_words(spec.player.name) if is_capitalised(w)}
        self.node_index = {n.id: i for i, n in enumerate(spec.trajectory)}
        self.node_names: list[set[str]] = [
            self.name_forms(f"{n.description}\n{n.trigger_event}\n{n.key_delta}") for n in spec.trajectory
        ]
        self.player_tokens = {w for w, _ in sentence_words(spec.player.name)}

    def names(self, text: str) -> list[tuple[str, ...]]:
        # Each field is its own text: a newline between fields acts as a sentence end.
        return proper_names(text.replace("\n", ".\n"), self.lexicon)

    def name_forms(self, *texts: str) -> set[str]:
        """Every identifying name word in ``texts``, with its plural/singular twin."""
        return forms(t for text in texts for name in self.names(text) for t in name_keys(name))

    def first_mention(self, name: tuple[str, ...]) -> int | None:
        for i, mentioned in enumerate(self.node_names):
            if any(t in mentioned for t in name_keys(name)):
                return i
        return None

    def node_label(self, i: int) -> str:
        return f"node {i + 1} {self.spec.trajectory[i].id!r}"

    def finding(self, rule: str, loc: tuple[str | int, ...], message: str, severity: str = "error") -> LintFinding:
        return LintFinding(self.path, self.spec.line_of(*loc), rule, message, severity)
