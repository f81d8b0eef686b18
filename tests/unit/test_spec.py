"""Spec loading: every problem reported as path:line: field: message, all at once."""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_ncp.core.spec import GENRES, SpecError, load_spec, load_specs, parse_spec, spec_json_schema
from tests.conftest import FIXTURES, SPECS

GOOD = (FIXTURES / "caligari.yaml").read_text()


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "s.yaml")
    return [str(p) for p in info.value.problems]


def test_bundled_spec_loads_with_locations():
    spec = load_spec(FIXTURES / "caligari.yaml")
    assert spec.id == "caligari" and len(spec.genres) == 2 and spec.achievements
    assert spec.location("commitments", 2, "before") == f"{FIXTURES / 'caligari.yaml'}:{GOOD.splitlines().index('    before: prophecy') + 1}"


def test_yaml_syntax_error_names_the_line():
    out = problems("id: x\ntitle: [unclosed\nsynopsis: y\n")
    assert len(out) == 1 and out[0].startswith("s.yaml:3: <yaml>: invalid YAML")


def test_missing_required_field():
    text = GOOD.replace("title: The Cabinet of Dr. Caligari\n", "")
    first = next(i for i, line in enumerate(text.splitlines(), 1) if not line.startswith("#"))
    assert f"s.yaml:{first}: title: required field is missing" in problems(text)


def test_unknown_commitment_kind_names_line_and_choices():
    text = GOOD.replace("kind: achievement", "kind: wish", 1)
    line = text.splitlines().index("    kind: wish") + 1
    out = problems(text)
    assert any(p.startswith(f"s.yaml:{line}: commitments[4].kind: got 'wish'; expected one of") for p in out)


def test_duplicate_ids_in_facts_commitments_and_nodes():
    text = (GOOD.replace('{id: F2,', '{id: F1,')
            .replace("  - id: C2\n", "  - id: C1\n")
            .replace("  - id: prophecy\n", "  - id: fair-visit\n"))
    out = problems(text)
    assert any("initial_facts[1].id: duplicate id 'F1'" in p for p in out)
    assert any("commitments[1].id: duplicate id 'C1'" in p for p in out)
    assert any("trajectory[1].id: duplicate id 'fair-visit'" in p for p in out)


def test_before_after_must_name_trajectory_nodes():
    text = GOOD.replace("    after: alan-murdered", "    after: alan-dead")
    line = text.splitlines().index("    after: alan-dead") + 1
    assert any(p.startswith(f"s.yaml:{line}: commitments[2].after: 'alan-dead' names no trajectory node")
               for p in problems(text))


def test_a_spec_needs_an_achievement():
    text = GOOD.replace("kind: achievement", "kind: invariant")
    assert any("at least one `achievement`" in p for p in problems(text))


def test_genres_outside_the_list_and_duplicates():
    assert any("genres[1]: got 'Noir'" in p for p in problems(GOOD.replace("[Horror, Mystery]", "[Horror, Noir]")))
    assert any("genres: " in p and "must differ" in p for p in problems(GOOD.replace("[Horror, Mystery]", "[Horror, Horror]")))
    assert len(GENRES) == 18


def test_unknown_field_is_reported_not_ignored():
    text = GOOD.replace("synopsis: >", "synopsys: x\nsynopsis: >")
    assert any("synopsys: unknown field" in p for p in problems(text))


def test_all_problems_at_once_sorted_by_line():
    text = GOOD.replace("kind: achievement", "kind: wish", 1).replace('{id: F2,', '{id: F1,')
    out = problems(text)
    assert len(out) >= 2
    lines = [int(p.split(":")[1]) for p in out]
    assert lines == sorted(lines)


def test_load_specs_keeps_good_files_when_one_is_bad(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text("id: [\n")
    (tmp_path / "c.yaml").write_text(GOOD)  # same id as a.yaml
    specs, errors = load_specs([tmp_path])
    assert [s.id for s in specs] == ["caligari"]
    assert len(errors) == 2
    assert "duplicate spec id 'caligari'" in str(errors[1])


def test_json_schema_describes_the_format():
    schema = spec_json_schema()
    assert set(schema["required"]) >= {"id", "title", "source", "genres", "player", "synopsis",
                                       "initial_facts", "commitments", "trajectory"}
    assert "Western" in json.dumps(schema)
