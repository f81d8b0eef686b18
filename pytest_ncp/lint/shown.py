"""What the narrator can show: rules for inputs that presuppose what it has not shown yet, and key
deltas that only the player's own mind can bring about (classes the source re-review of the specs found).

The narrator shows events; the player character decides, feels, believes and concludes. A scripted
input that refers to "the card" before the story has brought the flowers plays a scene the narrator may
not have written; a key delta "Hank knows Eddie loves Queenie" or "Judah has agreed to race" waits for
a thought or a choice the narrator cannot make for the player. Both are deterministic text rules, like
the rest of the linter; the tests and docs/specs.md give their exact reach and their measured precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .core import CONTENT_STOPWORDS, TITLES, Context, LintFinding, content_words, sentence_words
from .structure import story_inputs

SHOWN_RULES: dict[str, str] = {
    "input-presupposes-unshown": "a scripted input refers to something as already there ('the card', 'the man "
                                 "at my table') that only a later node's trigger or key delta brings into the "
                                 "story: make it conditional ('If flowers come, I read the card') or neutral",
    "delta-is-player-choice": "a key delta whose subject is the player character's own decision, promise, "
                              "feeling, belief or knowledge ('X has sworn to ...', 'X knows ...'): the narrator "
                              "cannot make the player choose or conclude; write the event that the narrator shows",
}


# --- input-presupposes-unshown -----------------------------------------------------------------------

# A definite reference ("the card", "that bracelet", "this baronet", "the sheik's horses"); "my ..." is the
# player's own. A new thing in a node's text: "a note", "an unsigned note", "some roses", "two strangers".
_DEFINITE = frozenset("the that this these those".split())
_INDEFINITE = frozenset("a an another some two three four five six several".split())
_SINGULAR = frozenset("a an another".split())
_OWNED = _DEFINITE | frozenset("his their its my our your".split()) | frozenset({"'s", "’s"})
_IRREGULAR_PLURALS = frozenset("men women children people gentlemen feet teeth geese mice".split())
_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")
# Words that end a noun phrase although they are not stopwords.
_NOT_NOUNS = frozenset("beside outside inside ashore aboard apart alone together again tonight here there".split())
# What an input never presupposes: the parts of any scene, of the body and of time ("the door", "the
# night"), words whose thing depends on the sentence ("the line", "the end"), and the staff and officers
# that a place implies ("the clerk" of a bank, "the jailer" of a cell, "the witness" of a trial).
_SCENE = frozenset(content_words("""
door doors room floor wall windows window stairs staircase steps roof ceiling corner table chair bed hall house
home street road way path yard garden town village city square field ground hill tree wood woods forest water
sky air wind rain snow fog dark darkness light sun moon star night day morning evening afternoon dawn dusk noon
midnight tonight today tomorrow time moment while hour end rest side front back top bottom edge middle centre
center outside inside place spot distance crowd people world truth story matter thing lot line part kind sort
piece number group pair hand arm head face eye foot feet shoulder body corpse heart voice
clerk jailer gaoler guard porter landlord landlady innkeeper barman waiter waitress servant maid butler valet
footman coachman driver conductor stagehand usher sentry doorman attendant orderly nurse shopkeeper cashier
teller keeper warder turnkey boatman ferryman cabman steward judge jury witness prosecutor counsel bailiff
"""))
# A description that picks out no particular thing: "the first peasant girls who come along", "the
# nearest shell holes", "the best place".
_NON_SPECIFIC = frozenset("first next last nearest best only same other whole".split())
# People named by a bare noun ("the man", "the boy") are usually someone already in the scene; with a
# description ("the man at my table", "the young woman", "the boy by the ear") the input brings them in.
_PERSONS = frozenset(content_words("man men woman women boy boys girl girls child children person fellow "
                                   "lady gentleman one"))
_MODIFIER_AFTER = frozenset("at in on with from by behind beside near who whom whose which sitting standing "
                            "under across outside inside".split())
_PUT_ON = frozenset("try tries tried put puts pull pulls pulled slip slips slipped turn turns turned".split())
_LOCATIVE = frozenset("at in into onto on to towards toward near by behind beside inside through across along over "
                      "under above below from past round around beneath beyond among upon within".split())
# A sentence the player plays only if something happens ("If flowers come for Queenie, I read the card"),
# or that hedges what it refers to ("the man behind the ring, whoever he is").
_CONDITIONAL = re.compile(r"^\W*(?:if|when|whenever|once|should|unless|in case|as soon as)\b", re.I)
_CONDITION_INSIDE = re.compile(r"\b(?:if|unless|in case|whenever)\b", re.I)
_HEDGE = re.compile(r"\b(?:whoever|whatever|wherever|whichever)\b", re.I)
_INPUT_SENTENCES = re.compile(r"[^.!?;]+[.!?;]*")
# The player as the subject of a node's clause brings its new things in by their own act ("Orlac opens a
# drawer", "Faust draws a circle at a crossroads"), unless the verb meets what the world sends.
_MEETS = re.compile(r"(?:\w+ly\s+)?(?:(?:(?:has|have)\s+)?(?:finds?|found|sees?|seen|saw|hears?|heard|meets?|met|"
                    r"notices?|noticed|spots?|spotted|discovers?|discovered|comes? upon|came upon|receives?|received|"
                    r"wakes?|woken|watches|watched|looks?|looked)|(?:is|are|was|were|has been|have been)\s+"
                    r"(?:\w+ly\s+)?\w+(?:ed|en|wn|ght|ung|ld))\b", re.I)  # passive: the world acts on the player
_CLAUSE_BREAK = re.compile(r"[;:]|,\s*(?:and|but|while|as|when|then)\s|\s(?:while|as|when|where)\s")


@dataclass(frozen=True)
class _Phrase:
    start: int
    text: str  # "the young woman"
    head: str  # its content word, stemmed ("woman")
    plural: bool
    place: bool  # after a preposition of place ("into the cave", "at a billet")
    specific: bool  # not "the first ... who", and a person is described, not a bare "the man"


def _is_plural(word: str) -> bool:
    w = re.sub(r"['’]s?$", "", word.lower())
    return w in _IRREGULAR_PLURALS or next(iter(content_words(w)), w) != w


def _noun_phrases(text: str, determiners: frozenset[str], owner_names: frozenset[str] | None = None) -> list[_Phrase]:
    """The noun phrases after one of ``determiners`` (or after a possessive such as "sheik's" in a definite
    phrase): up to three words that are not stopwords or names; the head is the last of them that is not
    an -ing, -ly or (after another word) -ed word ("the laughing girls", "the ship locked in the ice").
    After "a"/"an" a word ending in -s is a verb ("a canoe carries"). With ``owner_names`` (the player's
    name words), a possessive of anyone else also starts a new thing ("Jock Warriner's card")."""
    out = []
    tokens = list(_WORD.finditer(text))
    for t, m in enumerate(tokens):
        det = m.group(0).lower()
        possessor = determiners is _DEFINITE and re.fullmatch(r"[a-z][\w-]*['’]s", m.group(0))
        # A thing of another character's is new too: "a delivery boy brings roses with Jock Warriner's card".
        owned = determiners is _INDEFINITE and owner_names is not None and re.fullmatch(
            r"[A-Z][\w-]*['’]s", m.group(0)) and re.sub(r"['’]s$", "", m.group(0)) not in owner_names
        if det not in determiners and not possessor and not owned:
            continue
        if determiners is _INDEFINITE and t and tokens[t - 1].group(0).lower() in _OWNED:
            continue  # "the two gentlemen", "his two sons": not new
        words: list[str] = []
        end = m.end()
        for w in tokens[t + 1:t + 4]:
            word = w.group(0)
            if re.search(r"\S", text[end:w.start()].replace("-", "")) or word.lower() in CONTENT_STOPWORDS \
                    or word[0].isupper() or word.lower() in _NOT_NOUNS:
                break
            owner = bool(words) and re.search(r"['’]s?$", words[-1]) is not None  # "a creditor's men"
            if words and det in _SINGULAR and not owner and re.fullmatch(r"[a-z]+[^su]s", word):
                break
            words.append(word)
            end = w.end()
            if determiners is _INDEFINITE and (det not in _SINGULAR or owner) and _is_plural(word):
                break  # "two portly gentlemen enter": the verb follows the plural noun
            if re.search(r"['’]s?$", word) and determiners is _DEFINITE:
                break  # "the sheik's horses": the possessor is the head of its own phrase ("a lawyer's clerk" is a clerk)
        heads = [w for j, w in enumerate(words) if not re.search(r"(?:ing|ly)$", w) and not (j and w.endswith("ed"))]
        stem = next(iter(content_words(heads[-1])), None) if heads else None
        if stem is None:
            continue
        lead = t - 1 if possessor and t and tokens[t - 1].group(0).lower() in _DEFINITE else t  # "on [the] prince's castle"
        before = [x.group(0).lower() for x in tokens[max(0, lead - 2):lead]]
        after = text[end:].split()
        place = bool(before) and before[-1] in _LOCATIVE and not (before[-1] == "on" and before[:-1] and
                                                                 before[-2] in _PUT_ON)  # "try on the dress"
        described = len(words) > 1 or bool(after) and after[0].strip(",.;!?").lower() in _MODIFIER_AFTER
        specific = words[0].lower() not in _NON_SPECIFIC and (stem not in _PERSONS or described)
        plural = _is_plural(heads[-1])
        out.append(_Phrase(m.start(), f"{m.group(0)} {' '.join(words)}", stem, plural, place, specific))
        if determiners is _INDEFINITE and after[:1] == ["of"]:  # "a knot of businessmen", "a cup of poison"
            of = [w for w in after[1:3] if w.lower() not in CONTENT_STOPWORDS | _INDEFINITE and w[0].islower()][:1]
            if of and (stem_of := next(iter(content_words(of[0])), None)):
                out.append(_Phrase(m.start(), f"{m.group(0)} {' '.join(words)} of {of[0]}", stem_of,
                                   re.sub(r"\W+$", "", of[0].lower()) != stem_of, False, True))
    return out


def _introductions(cx: Context, subject: re.Pattern[str]) -> list[dict[str, _Phrase]]:
    """For each node, the things its trigger or key delta brings in as new ("a note is left", "a young
    woman is brought aboard"), by head word; what the player brings in by their own act is left out."""
    out = []
    for node in cx.spec.trajectory:
        new: dict[str, _Phrase] = {}
        for text in (node.trigger_event, node.key_delta):
            for phrase in _noun_phrases(text, _INDEFINITE, frozenset(cx.player_tokens)):
                clause = _CLAUSE_BREAK.split(text[:phrase.start])[-1].strip(" ,")
                m = subject.match(clause)
                if m and not _MEETS.match(clause[m.end():].strip()):
                    continue  # "Victor rents a bare hut on a remote island": the player's own act
                new.setdefault(phrase.head, phrase)
        out.append(new)
    return out


def _inputs_presupposing_the_unshown(cx: Context) -> list[LintFinding]:
    """A definite reference in a scripted input to something that a node not yet played brings in.

    Input i plays around node c = floor(i * nodes / s), as for `scripted-input-foresight` (s: the inputs
    that play the trajectory); by then the narrator has shown the briefing, the initial facts and the
    nodes before c. A noun phrase after "the", "that", "this", "these" or "those" is flagged when its head
    word is in none of those nor in an earlier input, and node c, c + 1 or c + 2 brings it in as new in
    its trigger or key delta ("A delivery boy brings roses ... with a card", "An unsigned note is left"),
    not by the player's own act. Not flagged: conditional or hedged sentences ("If flowers come for
    Queenie, I read the card", "whoever he is"), names (`scripted-input-foresight` has them), the parts
    of any scene, body or day and the staff a place implies ("the door", "the night", "the clerk"),
    descriptions of no particular thing ("the first girls who come along"), a bare "the man", the kind
    of a single new thing ("the posters" for "a poster"), and a place the input goes to that the node
    names as a place ("to the pool", "at a forest pool").
    """
    spec = cx.spec
    nodes = len(spec.trajectory)
    story = story_inputs(cx)
    introduced = _introductions(cx, re.compile(_player_subject(cx), re.I))
    node_words = [content_words(f"{n.description}\n{n.trigger_event}\n{n.key_delta}") for n in spec.trajectory]
    first: dict[str, int] = {}
    for k, words in enumerate(node_words):
        for w in words:
            first.setdefault(w, k)
    known = content_words("\n".join([spec.player.name, spec.player.briefing, *(f.text for f in spec.initial_facts)]))
    out = []
    for i, text in enumerate(spec.scripted_inputs):
        current = i * nodes // story  # past the last node once the trajectory is played
        shown = known.union(*node_words[:current])  # and what the player has brought up in earlier inputs
        hit: tuple[_Phrase, int] | None = None
        for m in _INPUT_SENTENCES.finditer(text):
            sentence = m.group(0)
            if hit or _CONDITIONAL.match(sentence) or _HEDGE.search(sentence):
                continue
            if inside := _CONDITION_INSIDE.search(sentence):
                sentence = sentence[:inside.start()]
            for phrase in _noun_phrases(sentence, _DEFINITE):
                k = first.get(phrase.head, nodes)
                if (phrase.specific and phrase.head not in _SCENE and phrase.head not in shown
                        and current <= k <= min(current + 2, nodes - 1) and phrase.head in introduced[k]
                        and not _same_thing_is_not_new(phrase, introduced[k][phrase.head])
                        and phrase.head not in content_words(text[:m.start() + phrase.start])):
                    hit = (phrase, k)  # (the last test: "I buy a rose and give her the rose")
                    break
        known |= content_words(text)
        if hit:
            phrase, k = hit
            node = spec.trajectory[k]
            where = "this input plays it" if k == current else f"this input plays around node {current + 1}"
            out.append(cx.finding("input-presupposes-unshown", ("scripted_inputs", i), (
                f"scripted input {i + 1} refers to {phrase.text!r} as already there, but {cx.node_label(k)} brings "
                f"it into the story ({node.trigger_event!r} / {node.key_delta!r}) and {where}: the narrator may "
                f"not have shown it yet; make the input conditional (\"If ..., I ...\") or neutral")))
    return out


def _same_thing_is_not_new(phrase: _Phrase, new: _Phrase) -> bool:
    """The input's phrase is not the node's new thing: its kind ("the posters" for "a poster"), or a place
    the input goes to that the node names as a place ("to the pool" for "at a forest pool")."""
    return (phrase.plural and not new.plural) or (phrase.place and new.place)


# --- delta-is-player-choice ---------------------------------------------------------------------------

# What goes on in the player's mind, by kind: a verb right after the player as subject ("has" or "have"
# optional, so that "and sworn" continues "X has buried his father"). Physical acts are not here: the
# script drives those ("has torn up the writ") and the narrator can show them done. Nor are perception
# verbs ("has seen", "has recognised"): the narrator shows what the player sees.
_MIND: dict[str, str] = {
    "knowledge": r"knows?|(?:now )?(?:learned|learnt|found out|understood|realised|realized|guessed|worked out|"
                 r"deduced|discovered that)|understands?|reali[sz]es|(?:is|are) (?:now )?(?:sure|certain|aware)\b"
                 r"|suspects?",
    "belief": r"believes?|(?:is|are) convinced|thinks?|takes\b[^.;]* for|expects?|taken it as",
    "feeling": r"loves?|(?:is|are) (?:\w+ )?in love|fallen in love|falls in love|(?:is|are) smitten|feels?|felt|"
               r"(?:is|are) (?:plainly )?drawn to|(?:is|are) jealous|hates?|forgiven|"
               r"(?:is|are) (?:fast |firm |close |the closest of |the best of )friends|(?:\w+ )?remembered",
    "decision": r"agreed|refused|decided|chosen|accepted|resolved|consented|declined|renounced|given up|said yes|"
                r"said no|made up (?:his|her|their) minds?|signed on|volunteered|agrees?|refuses?|decides?|chooses?|"
                r"accepts?|renounces?|(?:is|are) (?:now )?(?:ready|determined|resolved) to|"
                r"told [^.;]*?\b(?:he|she|they) (?:will|would|won't|shall|must|is going to|means to|is giving up)\b",
    "oath": r"sworn|vowed|promised|pledged|(?:signed|taken) an oath|swears?|vows?|promises?",
}
# After a comma, the player's state goes on without a verb: "..., knowing Jesson cut the rope",
# "..., in love with her", "..., resolved never to return", "..., and certain Moriarty holds Tobel".
_PARTICIPLES = {"knowledge": r"knowing|(?:and )?(?:certain|sure|aware)", "belief": r"believing|expecting|convinced",
                "feeling": r"in love with", "decision": r"resolved|determined"}
_ADVERBS = r"(?:(?:now|already|finally|at last|also|still|suddenly|secretly|clearly|plainly|even|truly|then)\s+)*"
_HAS = r"(?:(?:has|have)\s+)?"
_MIND_VERB = "|".join(f"(?:{alts})" for alts in _MIND.values())
_KINDS = [(kind, re.compile(rf"(?:{alts})\b", re.I)) for kind, alts in (*_MIND.items(), *_PARTICIPLES.items())]
# A clause starts at the beginning, after ; or :, or after a comma or "and"/"but" (a new subject follows).
_CLAUSE_START = r"(?:^|[;:]\s*|,\s*(?:and\s+|but\s+)?|\s(?:and|but|while)\s+)"
_NAME_WORD = r"(?-i:[A-Z])[\w'’.-]*"
_ORAL = r"vow|swear|promise|agree|refuse|accept|decide|choose|confess his love|confess her love"


def _player_subject(cx: Context) -> str:
    """A regex for the player character as the subject of a clause: a word of their name ("Judah",
    "326", "d'Artagnan"; "the rabbi", "the doorman" in lower case after "the"), alone or coordinated with
    others ("Tom and Huck", "Jim, Slim and Bull"); "he"/"she" when the player has no name ("the young
    woman")."""
    words = [w for w, _ in sentence_words(cx.spec.player.name)] + re.findall(r"\b\d+\b", cx.spec.player.name)
    names = [w for w in words if (w[:1].isupper() or w.isdigit() or re.match(r"[a-z]['’][A-Z]", w))
             and w.lower() not in CONTENT_STOPWORDS and w.lower() not in TITLES and len(w) > 1]
    alts = [rf"(?-i:{re.escape(w[0].upper())}|{re.escape(w[0])}){re.escape(w[1:])}" for w in names]
    alts += [rf"the {re.escape(w.lower())}" for w in names if not w.isdigit()]  # "Rabbi Loew": "the rabbi"
    if words and words[0].lower() == "the" and len(words) > 1:  # "the Tramp", "the hotel doorman"
        alts.append(rf"the (?:\w+ )?{re.escape(words[-1])}")
    if not names:
        alts.append(r"(?-i:She|He)")  # a player with no name ("the young woman"): the deltas say "she"
    player = rf"(?:{'|'.join(alts)})(?!['’]s?\b|\w)(?:\s+{_NAME_WORD})*"
    other = rf"(?:{_NAME_WORD}(?:\s+{_NAME_WORD})*|the \w+(?: \w+)?)"
    return rf"(?:(?:{other})(?:,\s*{other})*,?\s+and\s+{player}|{player}(?:(?:,\s*{other})*,?\s+and\s+{other})?)"


def _kind(verb: str) -> str:
    return next((kind for kind, r in _KINDS if r.fullmatch(verb.strip())), "decision")


def _deltas_of_the_players_mind(cx: Context) -> list[LintFinding]:
    """A key delta whose subject is the player character and whose verb is a decision, oath, feeling,
    belief or piece of knowledge: "Judah has agreed to race", "Hank knows that ...", "Jim and David are
    the closest of friends"; or that goes on with the player's mind after an act: "Scrooge has read his
    own name and vowed to change", "Davy has fallen into the ravine, knowing Jesson cut the rope", "...,
    and he knows Mabel is out" (once the player is named)."""
    subject = _player_subject(cx)
    mind = rf"{_ADVERBS}{_HAS}{_ADVERBS}({_MIND_VERB})\b"
    clause = re.compile(rf"{_CLAUSE_START}({subject})\s+{mind}", re.I)
    head = re.compile(rf"{_CLAUSE_START}({subject})\s", re.I)
    same_subject = re.compile(rf"(?:,\s*|\s)(?:and|but)\s+{mind}", re.I)
    participle = re.compile(rf",\s*({'|'.join(_PARTICIPLES.values())})\b", re.I)
    heard = re.compile(rf"\b(?:heard|seen|watched)\s+({subject})\s+({_ORAL})\b", re.I)
    pronoun = re.compile(rf"(?:,\s*|\s)(?:and|but|for)\s+(?:he|she|they)\s+{mind}", re.I)
    out = []
    for i, node in enumerate(cx.spec.trajectory):
        text = node.key_delta.strip()
        hit = verb = None
        if m := clause.search(text):
            hit, verb = m.group(0).strip(" ,;:"), m.group(2)
        elif m := heard.search(text):  # "The Pirate King has heard Frederic vow to ...": the player's oath
            hit, verb = m.group(0).strip(" ,;:"), m.group(2)
        elif h := head.search(text):
            rest = text[h.end():].split(";")[0]
            m = same_subject.search(rest) or participle.search(rest)
            if m is None and (p := pronoun.search(rest)) and not re.search(rf"\s{_NAME_WORD}", rest[:p.start()]):
                m = p  # "and he knows": no other name in between ("..., and she has sworn" after Milady is hers)
            if m:
                hit, verb = f"{h.group(1)} ... {m.group(0).strip(' ,')}", m.group(1)
        if hit is None or verb is None:
            continue
        out.append(cx.finding("delta-is-player-choice", ("trajectory", i, "key_delta"), (
            f"{cx.node_label(i)}: the key delta is the player character's own {_kind(verb)} ({hit!r}): the player "
            f"decides what they choose, feel and conclude, so a player who does not stalls the node; write the "
            f"event the narrator shows (who tells them, what they see or find) or another character's act")))
    return out


SHOWN_CHECKS = (_inputs_presupposing_the_unshown, _deltas_of_the_players_mind)
