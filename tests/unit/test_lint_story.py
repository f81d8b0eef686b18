"""The playability lint rules: for each, a spec that trips it and one that does not.

The clean spec is tests/fixtures/lint_clean_spec.yaml; every test edits one thing and expects exactly
that rule, at the edited line. The last tests pin the defects the benchmark review named in the
bundled specs as they were when the rules were written (git show 48ad85b:specs/<id>.yaml).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ncp.lint import RULES, LintFinding
from pytest_ncp.lint.story import MIN_SCRIPTED_INPUTS, STORY_RULES
from tests.conftest import edit, line_of, lint

CLEAN = (Path(__file__).parents[1] / "fixtures" / "lint_clean_spec.yaml").read_text()


def only(text: str, rule: str) -> list[LintFinding]:
    findings = lint(text)
    assert findings and {f.rule for f in findings} == {rule}, [str(f) for f in findings]
    return findings


def test_the_clean_spec_is_clean():
    assert lint(CLEAN) == []


def test_story_rules_are_registered():
    assert set(STORY_RULES) <= set(RULES)
    assert set(STORY_RULES) == {
        "multi-event-node", "outside-player-view", "invariant-binds-player", "achievement-copies-key-delta",
        "adjacent-orderings-only", "input-narrates-world", "unreachable-final-achievement", "too-few-inputs",
        "missing-public-domain", "restates-world-rule"}


# --- multi-event-node ----------------------------------------------------------------------------------


@pytest.mark.parametrize("delta, why", [
    ("The ship has struck the reef, its crew have swum ashore, and the cargo is lost.", "3 clauses"),
    ("All three smugglers are in irons.", "a count of events ('All three')"),
    ("Penrose, Silas, Hobbs and Tregear are questioned in turn.", "a count of events ('in turn')"),
    ("Ada has watched two fights on the landing.", "a count of events ('two fights')"),
])
def test_multi_event_key_delta(delta, why):
    text = edit(CLEAN, "key_delta: The ship has passed the reef safely by the light of the lamp.", f"key_delta: {delta}")
    [finding] = only(text, "multi-event-node")
    assert finding.line == line_of(text, delta)
    assert f"node 3 'storm-night': the key delta packs several events ({why})" in finding.message


def test_a_list_of_four_names_in_a_trigger_is_several_events():
    text = edit(CLEAN, "trigger_event: Penrose rows out to the rock at dusk.",
                "trigger_event: Penrose, Hobbs, Tregear and Silas row out to the rock.")
    [finding] = only(text, "multi-event-node")
    assert "a list of characters ('Penrose, Hobbs, Tregear and Silas')" in finding.message


def test_two_clauses_and_three_named_people_are_one_event():
    # "X has seen Y and is shaken" and "Penrose and Hobbs row out" stay single events.
    text = edit(CLEAN, "key_delta: Pages about the cellar have been torn out of the logbook.",
                "key_delta: Ada has read the log and is uneasy.")
    text = edit(text, "trigger_event: Penrose rows out to the rock at dusk.",
                "trigger_event: Penrose, Hobbs and Tregear row out to the rock at dusk.")
    assert lint(text) == []


# --- outside-player-view -------------------------------------------------------------------------------


@pytest.mark.parametrize("description, quoted", [
    ("Penrose knocks Ada out and carries the brandy off.", "knocks Ada out"),
    ("While Ada is asleep, Penrose rows out for the brandy.", "While Ada is asleep"),
    ("Penrose moves the brandy without Ada knowing.", "without Ada knowing"),
    ("Ada lies unconscious while the smugglers search the tower.", "Ada lies unconscious"),
    ("While Ada lies stunned, Penrose rows away.", "Ada lies stunned"),
])
def test_a_node_the_player_cannot_witness(description, quoted):
    text = edit(CLEAN, "description: Ada breaks the tar seal of the cellar door.", f"description: {description}")
    [finding] = only(text, "outside-player-view")
    assert finding.line == line_of(text, "- id: cellar-opened")
    assert f"node 2 'cellar-opened': {quoted!r}" in finding.message


def test_nodes_after_the_player_vanishes_are_outside_the_view():
    text = edit(CLEAN, "key_delta: The ship has passed the reef safely by the light of the lamp.",
                "key_delta: Ada climbs to the gallery, sees the ship and vanishes in the storm.")
    [finding] = only(text, "outside-player-view")
    assert finding.line == line_of(text, "- id: penrose-arrested")
    assert "node 4 'penrose-arrested' comes after node 3 'storm-night'" in finding.message


def test_a_key_delta_that_goes_on_after_the_player_dies():
    text = edit(CLEAN, "key_delta: The revenue men have taken Penrose away in irons.",
                "key_delta: Ada is dead and the revenue men have taken Penrose away.")
    [finding] = only(text, "outside-player-view")
    assert finding.line == line_of(text, "Ada is dead and")
    assert "goes on after 'Ada is dead'" in finding.message


def test_the_player_may_die_last_and_namesakes_may_die():
    # The death is the last thing in the key delta; "Lady Ada" is someone else.
    text = edit(CLEAN, "key_delta: The revenue men have taken Penrose away in irons.",
                "key_delta: The revenue men have taken Penrose away, and Ada dies.")
    text = edit(text, "key_delta: Ada has found barrels of brandy hidden in the cellar.",
                "key_delta: Lady Ada is dead and Ada has found barrels of brandy in the cellar.")
    assert [f.rule for f in lint(text)] == []


# --- invariant-binds-player ----------------------------------------------------------------------------


@pytest.mark.parametrize("invariant, quoted", [
    ("Ada tells no one about the brandy.", "Ada tells"),
    ("Ada is never cruel to the fishermen.", "Ada is never cruel"),
    ("Until the storm, Ada does not suspect Penrose.", "Ada does not suspect"),
    ("Quill loves the sea throughout.", "Quill loves"),
])
def test_an_invariant_whose_subject_is_the_player(invariant, quoted):
    text = edit(CLEAN, "text: \"The lamp oil on the rock lasts only three nights unless the supply boat returns.\"",
                f"text: \"{invariant}\"")
    [finding] = only(text, "invariant-binds-player")
    assert finding.line == line_of(text, "- id: C1")
    assert f"invariant C1 makes the player character {quoted.split()[0]!r} its subject ({quoted!r}" in finding.message


@pytest.mark.parametrize("invariant", [
    "Only Ada can hear the knocking from the cellar.",
    "The ghost of Silas is seen only by Ada.",
    "Ada's lamp never fails while there is oil.",
    "No one on the mainland believes Ada about the knocking.",
    "Lady Ada never visits the rock.",
])
def test_invariants_about_the_world_around_the_player_are_fine(invariant):
    text = edit(CLEAN, "text: \"The lamp oil on the rock lasts only three nights unless the supply boat returns.\"",
                f"text: \"{invariant}\"")
    assert lint(text) == []


# --- achievement-copies-key-delta ----------------------------------------------------------------------


def test_an_achievement_that_copies_a_key_delta():
    text = edit(CLEAN, 'text: "Penrose, the smuggler behind the missing keeper, answers to the law."',
                'text: "The revenue men have taken Penrose away in irons."')
    [finding] = only(text, "achievement-copies-key-delta")
    assert finding.line == line_of(text, "- id: C3")
    assert "achievement C3 repeats the key delta of node 'penrose-arrested' (overlap 1.00)" in finding.message


# --- adjacent-orderings-only ---------------------------------------------------------------------------


def test_orderings_that_only_link_neighbours():
    text = edit(CLEAN, "    after: penrose-arrested\n    depends_on: [cellar-opened, penrose-arrested]",
                "    after: storm-night\n    depends_on: [cellar-opened, storm-night]")
    [finding] = only(text, "adjacent-orderings-only")
    assert finding.line == line_of(text, "- id: C2")
    assert "all 1 ordering(s) link neighbouring nodes" in finding.message


def test_a_spec_without_orderings_needs_one():
    start = CLEAN.index("  - id: C2")
    text = CLEAN[:start] + CLEAN[CLEAN.index("  - id: C3"):]
    [finding] = only(text, "adjacent-orderings-only")
    assert "there is no ordering" in finding.message


# --- input-narrates-world ------------------------------------------------------------------------------


@pytest.mark.parametrize("line, sentence", [
    ("Penrose's boat has sunk!", "Penrose's boat has sunk!"),
    ("The ship strikes the reef. I ring the bell.", "The ship strikes the reef."),
    ("I wait; the revenue cutter arrives in time.", "the revenue cutter arrives in time."),
    ("There's a light on the water.", "There's a light on the water."),
])
def test_an_input_that_narrates_the_world(line, sentence):
    text = edit(CLEAN, '"I rest for an hour, then polish the lens."', f'"{line}"')
    [finding] = only(text, "input-narrates-world")
    assert finding.line == line_of(text, line)
    assert f"scripted input 13 states what the world or another character does ({sentence!r})" in finding.message


@pytest.mark.parametrize("line", [
    "Penrose, is that your boat?",                    # a vocative and a question
    "Mr. Penrose, tell me the truth.",                # an abbreviation does not end a sentence
    'I shout "the ship is on the reef!" to the fisherman.',  # quoted speech is the player's words
    "Is the ship safe? I look out to sea.",
    "Let me see the logbook again.",
    "That brandy is not yours, Penrose.",            # the player's words to someone
    "This must be the smugglers' work.",            # a guess, not a fact about the world
])
def test_player_acts_words_and_questions_are_fine(line):
    text = edit(CLEAN, '"I rest for an hour, then polish the lens."', f"{line!r}" if '"' in line else f'"{line}"')
    assert lint(text) == []


# --- unreachable-final-achievement ---------------------------------------------------------------------


def test_no_input_leads_to_the_final_node():
    # Every input that uses a word new to the final node (dusk, revenue, brandy, Penrose) now polishes the lamp.
    text = CLEAN
    for old in ("I count the brandy barrels and note them in my own log.",
                "I write a letter to the revenue office about the barrels.",
                "At dusk I watch a rowing boat come out from the harbour.",
                "I wave the signal flags to the revenue cutter anchored in the bay.",
                "I greet Mr. Penrose at the landing and ask what brings him out so late.",
                "I tell him the revenue men already know about the brandy.",
                "I stand aside as the revenue officers step onto the landing.",
                "I ask the revenue captain whether the old keeper can still be found.",
                "I sit by the lamp and read the harbour master's letter once more.",
                "I ask the fisherman who brings the mail whether anyone knew the old keeper well."):
        text = edit(text, old, "I polish the brass of the lamp again.")
    [finding] = only(text, "unreachable-final-achievement")
    assert finding.line == line_of(text, "- id: C3")
    assert "achievement C3 needs node 4 'penrose-arrested', but no scripted input after input 4" in finding.message


# --- too-few-inputs, missing-public-domain -------------------------------------------------------------


def test_too_few_inputs():
    text = edit(CLEAN, '  - "I sit by the lamp and read the harbour master\'s letter once more."\n', "")
    [finding] = only(text, "too-few-inputs")
    assert finding.line == line_of(text, "scripted_inputs:")
    assert f"{MIN_SCRIPTED_INPUTS - 1} scripted input(s), fewer than {MIN_SCRIPTED_INPUTS}" in finding.message


def test_missing_public_domain():
    text = edit(CLEAN, '  public_domain: "Invented for the tests; no underlying work."\n', "")
    [finding] = only(text, "missing-public-domain")
    assert finding.line == line_of(text, "source:")


# --- restates-world-rule -------------------------------------------------------------------------------


def test_an_invariant_that_restates_a_default_world_rule():
    text = edit(CLEAN, "text: \"The lamp oil on the rock lasts only three nights unless the supply boat returns.\"",
                'text: "Dead characters stay dead: Silas never returns alive."')
    [finding] = only(text, "restates-world-rule")
    assert "invariant C1 restates default world rule W1 ('stay dead')" in finding.message


def test_a_spec_that_drops_the_world_rule_may_state_its_own():
    text = edit(CLEAN, "text: \"The lamp oil on the rock lasts only three nights unless the supply boat returns.\"",
                'text: "The drowned return to life at every full moon, never otherwise."')
    assert [f.rule for f in lint(text)] == ["restates-world-rule"]
    assert lint(text + "\nworld_rules: {drop: [W1]}\n") == []


# --- the review's cases in the bundled specs before the rewrite ----------------------------------------


@pytest.mark.parametrize("old, new, rule", [
    # macbeth duncan-murdered, charade partners-killed, kennel-murder suspects-questioned (verbatim wording)
    ("key_delta: The ship has passed the reef safely by the light of the lamp.",
     "key_delta: Duncan is dead, his sons have fled, and Macbeth is king of Scotland.", "multi-event-node"),
    ("key_delta: The ship has passed the reef safely by the light of the lamp.",
     "key_delta: All three of Charles's old partners are dead.", "multi-event-node"),
    ("trigger_event: Penrose rows out to the rock at dusk.",
     "trigger_event: Hilda Lake, Wrede, Liang, Gamble and Grassi are questioned in turn.", "multi-event-node"),
    # greed and rio-rita inputs
    ('"I rest for an hour, then polish the lens."', '"Trina\'s ticket has won! I pick her up and swing her round."',
     "input-narrates-world"),
    ('"I rest for an hour, then polish the lens."',
     '"Rita\'s warning reaches me in time; I leave the trail before the men in the rocks can fire."',
     "input-narrates-world"),
])
def test_the_review_cases(old, new, rule):
    assert {f.rule for f in lint(edit(CLEAN, old, new))} == {rule}


def test_a_condition_on_the_player_s_act_does_not_make_the_player_the_subject():
    # the-ring C2: the rule binds the world (who is the better-known champion) until the player acts.
    text = edit(CLEAN, "text: \"The lamp oil on the rock lasts only three nights unless the supply boat returns.\"",
                "text: \"Penrose remains the harbour's master smuggler until Ada exposes him.\"")
    assert lint(text) == []
