"""Reference playthroughs: the loader accepts a spec only when its playthrough proves it winnable."""

from __future__ import annotations

import pytest

from pytest_ncp.core.spec import SpecError, load_spec, parse_spec

from tests.conftest import FIXTURES, edit

TEXT = (FIXTURES / "playthrough_spec.yaml").read_text()
LONG = " ".join(["The gulls wheel over the rock."] * 50)


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "p.yaml")
    return [f"{p.field}: {p.message}" for p in info.value.problems]


def test_the_fixture_loads_with_its_labels():
    spec = load_spec(FIXTURES / "playthrough_spec.yaml")
    assert spec.playthrough is not None and len(spec.playthrough) == len(spec.scripted_inputs)
    assert [t.advances for t in spec.playthrough] == [None, "cellar-opened", None, "barrels-seized"]
    assert spec.playthrough[1].facts_negated[0].fact_id == "F3"
    assert not spec.complete  # no independent read yet


def test_a_spec_without_a_playthrough_loads_and_hashes_as_before():
    spec = parse_spec(TEXT.split("playthrough:\n")[0] + "review: {status: draft}\n", "p.yaml")
    assert spec.playthrough is None
    assert "playthrough" not in spec.section_fingerprints
    assert "playthrough" in load_spec(FIXTURES / "playthrough_spec.yaml").section_fingerprints


def test_complete_needs_sources_and_an_accepted_independent_read():
    read = ("  independent_read:\n    reader: another reader\n    date: 2026-12-05\n    verdict: {v}\n")
    accepted = parse_spec(TEXT + read.format(v="accepted"), "p.yaml")
    assert accepted.complete
    assert not parse_spec(TEXT + read.format(v="changes-requested"), "p.yaml").complete
    no_sources = edit(TEXT, '  sources: ["none found: an invented story for the tests"]\n', "")
    assert not parse_spec(no_sources + read.format(v="accepted"), "p.yaml").complete
    assert "verdict" in problems(TEXT + read.format(v="fine"))[0]


@pytest.mark.parametrize("old, new, message", [
    ('  - input: "I walk down to the cellar door and listen."\n',
     '  - input: "I walk down to the cellar door."\n', "turn 1 input differs from scripted_inputs[0]"),
    ('  - "I lead the officers down to the cellar and show them the barrels."\n',
     '  - "I lead the officers down to the cellar and show them the barrels."\n  - "I rest."\n',
     "has 4 turn(s) but scripted_inputs has 5"),
    ("    advances: cellar-opened\n", "    advances: barrels-seized\n",
     "turn 2 advances 'barrels-seized' but the next node in trajectory order is 'cellar-opened'"),
    ("    advances: cellar-opened\n", "    advances: cellar-open\n", "'cellar-open' names no trajectory node"),
    ("    advances: barrels-seized\n", "    advances: cellar-opened\n", "already advanced at turn 2"),
    ('    key_delta_quote: "The open cellar shows barrels of brandy"\n', "",
     "advances 'cellar-opened' without a key_delta_quote"),
    ('    key_delta_quote: "The open cellar shows barrels of brandy"\n',
     '    key_delta_quote: "The open cellar shows barrels of wine"\n', "does not occur in the narration"),
    ('    key_delta_quote: "The open cellar shows barrels of brandy"\n',
     '    key_delta_quote: "barrels"\n', "too short to verify anything"),
    ('    trigger_quote: "three slow knocks from behind the door"\n',
     '    trigger_quote: "three loud knocks from behind the door"\n', "turn 1 trigger_quote"),
    ('      - {fact_id: F3, quote: "until the last of the seal gives"}\n',
     '      - {fact_id: F9, quote: "until the last of the seal gives"}\n', "'F9' names no fact of the ledger"),
    ('      - {fact_id: F4, quote: "The cellar is empty but for the smell of brandy"}\n',
     '      - {fact_id: F3, quote: "The cellar is empty but for the smell of brandy"}\n', "already negated"),
    ('quote: "drops anchor in the bay below the rock"}', 'quote: "drops anchor in the harbour"}',
     "facts_added quote"),
    ("    satisfies: [C2]\n", "    satisfies: [C1]\n", "'C1' names no achievement or ordering"),
    ("    satisfies: [C2]\n", "", "achievement(s) never satisfied: C2"),
    ("    advances: barrels-seized\n    key_delta_quote: \"the last of them is stowed aboard the cutter\"\n", "",
     "node(s) never advanced: barrels-seized"),
    ("      French mark.\n", "      French mark. " + LONG + "\n", "turn 2 narration has 401 words"),
    ("    trigger_quote: \"drops anchor in the bay below the rock\"\n",
     "    key_delta_quote: \"drops anchor in the bay below the rock\"\n", "turn 3 has a key_delta_quote but advances"),
])
def test_each_broken_rule_is_reported_with_its_field(old, new, message):
    found = problems(edit(TEXT, old, new))
    assert any(message in p for p in found), found


def test_an_achievement_cannot_be_satisfied_before_its_node():
    text = edit(TEXT, "    satisfies: [C2]\n", "")
    text = edit(text, '      - {text: "A revenue cutter has anchored below the rock in answer to Ada\'s signal.", '
                      'quote: "drops anchor in the bay below the rock"}\n',
                '      - {text: "A revenue cutter has anchored below the rock in answer to Ada\'s signal.", '
                'quote: "drops anchor in the bay below the rock"}\n    satisfies: [C2]\n')
    assert any("before the node(s) it depends on advance: barrels-seized" in p for p in problems(text))


def test_errors_carry_the_line_of_the_field():
    text = edit(TEXT, "    advances: cellar-opened\n", "    advances: cellar-open\n")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "p.yaml")
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "advances: cellar-open" in l)
    assert f"p.yaml:{line}: playthrough[1].advances:" in str(info.value)
