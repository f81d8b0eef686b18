"""The two rules on what the narrator can show: inputs that presuppose what it has not shown yet,
and key deltas that are the player character's own decision, feeling or knowledge.

Like test_lint_story.py, every test edits the clean spec (tests/fixtures/lint_clean_spec.yaml, the
lighthouse) and expects exactly the rule under test. Input 13 ("I rest for an hour, then polish the
lens.") plays node 3 'storm-night' (24 inputs, 23 of them play the 4 nodes); input 12 plays node 2.
The wordings marked "verbatim" come from the issue or from the re-review's lists of the bundled specs
as they were before the hand fixes (git show 8bf7b3e:specs/<id>.yaml).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ncp.lint import RULES, LintFinding
from pytest_ncp.lint.shown import SHOWN_RULES
from tests.conftest import edit, line_of, lint

CLEAN = (Path(__file__).parents[1] / "fixtures" / "lint_clean_spec.yaml").read_text()
TRIGGER = "trigger_event: A ship's lantern appears close to the reef."  # node 3 'storm-night'
DELTA = "key_delta: Pages about the cellar have been torn out of the logbook."  # node 1 'logbook-found'
INPUT_13 = '"I rest for an hour, then polish the lens."'
INPUT_12 = '"At dawn I look for wreckage along the rocks."'


def only(text: str, rule: str) -> list[LintFinding]:
    findings = lint(text)
    assert findings and {f.rule for f in findings} == {rule}, [str(f) for f in findings]
    return findings


def scene(trigger: str, line: str, where: str = INPUT_13) -> str:
    """The clean spec with node 3's trigger and one input replaced (input 7 no longer "notes" the barrels
    in the log, so that "the note" is new)."""
    text = edit(CLEAN, "note them in my own log", "write them in my own log")
    return edit(edit(text, TRIGGER, f"trigger_event: {trigger}"), where, f'"{line}"')


def test_the_rules_are_registered():
    assert set(SHOWN_RULES) == {"input-presupposes-unshown", "delta-is-player-choice"}
    assert set(SHOWN_RULES) <= set(RULES)


def test_the_bundled_specs_are_clean_under_both_rules(bundled_lint):
    findings, _ = bundled_lint
    assert [str(f) for f in findings if f.rule in SHOWN_RULES] == []


# --- input-presupposes-unshown -------------------------------------------------------------------------


@pytest.mark.parametrize("trigger, line, phrase", [
    # verbatim: broadway-melody jock-flowers and input 7 (the "I read the card on the roses")
    ("A delivery boy brings roses to the dressing room with Jock Warriner's card.",
     "I read the card on the roses. Who is this Jock Warriner?", "the card"),
    # verbatim: hands-of-orlac vasseur-note and input 4 ("the note")
    ("An unsigned note is left on Orlac's bedside table.", "I read the note on the table. Whose hands did you say?",
     "the note"),
    # verbatim: hands-of-orlac blackmail and input 16 (the "the man at my table")
    ("A sinister man sits down at Orlac's tavern table and shows him two scarred wrists.",
     "I ask the man at my table who he really is.", "the man"),
    # verbatim: the-ring bracelet and input 6; black-pirate plank and input 16; blackmail studio and input 5
    ("Jack notices a snake-shaped bracelet on Mabel's arm.", "Where did you get that bracelet, Mabel?", "that bracelet"),
    ("The pirates run out a plank over the side.", "I walk to the end of the plank and jump.", "the plank"),
    ("Alice has seen a painting of a laughing jester and tried on a dancer's dress.",
     "I look at the paintings and laugh at the jester.", "the jester"),
    # the player meets what the world sends: "finds", "is handed"
    ("Ada finds a brass compass wedged in the rocks.", "I open the compass and look at the needle.", "the compass"),
])
def test_an_input_that_presupposes_what_the_node_it_plays_brings_in(trigger, line, phrase):
    text = scene(trigger, line)
    [finding] = only(text, "input-presupposes-unshown")
    assert finding.line == line_of(text, line)
    assert finding.message.startswith(f"scripted input 13 refers to {phrase!r} as already there, but node 3 "
                                      f"'storm-night' brings it into the story (")
    assert "and this input plays it: the narrator may not have shown it yet" in finding.message


def test_an_input_that_presupposes_a_later_node():
    text = scene("An unsigned note is left on the watch-room desk.", "I read the note on the desk.", INPUT_12)
    [finding] = only(text, "input-presupposes-unshown")
    assert "node 3 'storm-night' brings it into the story" in finding.message
    assert "this input plays around node 2" in finding.message


@pytest.mark.parametrize("line", [
    "If flowers come for me, I read the card.",              # conditional (the re-review's fix)
    "When the roses come, I read the card.",
    "I read whatever card comes with the roses.",            # hedged
    "I look around the watch room for anything new.",        # neutral
    "I find a card in the roses and read the card.",         # the input itself brings it in
])
def test_conditional_hedged_and_neutral_inputs_are_fine(line):
    assert lint(scene("A delivery boy brings roses to the lighthouse with a card.", line)) == []


def test_once_the_node_is_played_the_thing_has_been_shown():
    # Input 19 plays node 4: node 3's card has been shown by then.
    text = edit(CLEAN, TRIGGER, "trigger_event: A delivery boy brings roses to the lighthouse with a card.")
    assert lint(edit(text, '"I tell him the revenue men already know about the brandy."', '"I read the card again."')) == []


def test_an_earlier_input_that_brought_it_up_counts():
    text = scene("An unsigned note is left on the watch-room desk.", "I read the note on the desk.")
    assert lint(edit(text, INPUT_12, '"At dawn I find a note on the desk."')) == []


@pytest.mark.parametrize("trigger, line", [
    ("Ada opens a drawer of the chart table.", "I look through the papers in the drawer."),  # the player's own act
    ("A door bangs open below the lamp room.", "I run down and shut the door."),             # part of any scene
    ("A man in oilskins sits down at Ada's table.", "I nod to the man and go on polishing."),  # a bare "the man"
    ("A poster of a wrecked ship is nailed up by the door.", "I read the posters on the wall."),  # the kind, not the one
    ("A seal barks from a rock pool below the tower.", "I climb down to the pool."),         # a place the player goes to
    ("Three fishing boats put out from the harbour.", "I wave at the first boats that pass."),  # no particular one
    ("A clerk from the harbour office rows out with the mail.", "I sign for the mail and thank the clerk."),  # staff
    ("A stranger in oilskins knocks at the door.", "I ask Penrose who the stranger is, whoever he is."),  # hedged
])
def test_what_an_input_may_refer_to(trigger, line):
    assert lint(scene(trigger, line)) == []


def test_names_are_left_to_scripted_input_foresight():
    text = edit(CLEAN, "trigger_event: Penrose rows out to the rock at dusk.",
                "trigger_event: Penrose and a boatman, Tregear, row out to the rock at dusk.")
    text = edit(text, INPUT_12, '"I ask Tregear for news of the wreck."')
    assert {f.rule for f in lint(text)} == {"scripted-input-foresight"}


# --- delta-is-player-choice ----------------------------------------------------------------------------


@pytest.mark.parametrize("delta, kind, quoted", [
    # verbatim but for the name: broadway-melody hank-sees, black-pirate father-buried (the examples)
    ("Ada knows that Eddie and Queenie love each other.", "knowledge", "Ada knows"),
    ("Ada has buried her father and sworn to avenge him.", "oath", "Ada ... and sworn"),
    ("Ada has agreed to keep the light for Penrose.", "decision", "Ada has agreed"),
    ("Ada has refused Penrose's bribe.", "decision", "Ada has refused"),
    ("Ada believes the old keeper drowned.", "belief", "Ada believes"),
    ("Ada is in love with the fisherman.", "feeling", "Ada is in love"),
    ("Ada and the fisherman are the closest of friends.", "feeling", "Ada and the fisherman are the closest of friends"),
    ("Ada has promised Penrose to say nothing.", "oath", "Ada has promised"),
    ("Ada has climbed back to the lamp, knowing Penrose lied.", "knowledge", "Ada ... knowing"),
    ("The revenue captain has heard Ada swear to testify.", "oath", "heard Ada swear"),
    ("Ada has told Penrose that she will not keep his secret.", "decision",
     "Ada has told Penrose that she will"),
])
def test_a_key_delta_that_is_the_player_s_own_mind(delta, kind, quoted):
    text = edit(CLEAN, DELTA, f"key_delta: {delta}")
    [finding] = only(text, "delta-is-player-choice")
    assert finding.line == line_of(text, delta)
    assert finding.message.startswith(
        f"node 1 'logbook-found': the key delta is the player character's own {kind} ({quoted!r})")


@pytest.mark.parametrize("delta", [
    "Ada has torn up the harbour master's letter.",          # a physical act the script drives ("has torn up the writ")
    "Ada has lit the lamp and barred the cellar door.",
    "Ada has seen Penrose row out to the rock.",             # what she sees: the narrator shows it
    "The logbook has told Ada that pages about the cellar were torn out.",  # the telling, not her knowledge
    "Penrose knows Ada has read the logbook.",               # another character's knowledge
    "Ada's father has sworn never to come back.",            # a possessive is not the player
    "Only Ada knows where the cellar key is hidden.",
])
def test_acts_perceptions_and_other_characters_minds_are_fine(delta):
    assert lint(edit(CLEAN, DELTA, f"key_delta: {delta}")) == []
