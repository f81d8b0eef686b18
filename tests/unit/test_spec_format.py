"""Spec format fields for provenance and review: source.public_domain, the review record, and per-spec world rule overrides."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.core.spec import SpecError, parse_spec, spec_json_schema
from pytest_ncp.core.world_rules import default_rules
from tests.conftest import ROOT

CLEAN = (ROOT / "tests" / "fixtures" / "lint_clean_spec.yaml").read_text()

REVIEW = """
review:
  status: reviewed
  reviewer: "a fresh reader (not an author)"
  date: 2026-11-30
  checklist: [multi-event-node, facts-true-at-turn-0]
  findings: ["node storm-night packed two events"]
  fixes: ["split storm-night in two"]
"""


def test_public_domain_is_read_and_optional():
    assert parse_spec(CLEAN).source.public_domain == "Invented for the tests; no underlying work."
    assert parse_spec(CLEAN.replace('  public_domain: "Invented for the tests; no underlying work."\n', "")
                      ).source.public_domain is None


def test_the_review_record_keeps_reviewer_checklist_findings_and_fixes():
    review = parse_spec(CLEAN + REVIEW).review
    assert review is not None and review.status == "reviewed"
    assert review.reviewer == "a fresh reader (not an author)" and str(review.date) == "2026-11-30"
    assert review.checklist == ["multi-event-node", "facts-true-at-turn-0"]
    assert review.findings == ["node storm-night packed two events"]
    assert review.fixes == ["split storm-night in two"]


def test_a_misspelt_review_field_is_reported_with_its_line():
    text = CLEAN + REVIEW.replace("fixes:", "fixed:")
    with pytest.raises(SpecError) as err:
        parse_spec(text, "s.yaml")
    line = text.splitlines().index('  fixed: ["split storm-night in two"]') + 1
    assert f"s.yaml:{line}: review.fixed: unknown field" in str(err.value)


def test_every_spec_gets_the_default_world_rules_before_its_own_commitments():
    spec = parse_spec(CLEAN)
    defaults = default_rules()
    assert [r.id for r in defaults] == ["W1", "W2", "W3"]
    assert [c.id for c in spec.all_commitments] == ["W1", "W2", "W3", "C1", "C2", "C3"]
    assert spec.commitment("W1").kind == "invariant" and spec.commitment("W1").text == defaults[0].text
    assert [c.id for c in spec.commitments] == ["C1", "C2", "C3"]  # the YAML's own list is unchanged


def test_a_spec_drops_or_rewords_world_rules():
    spec = parse_spec(CLEAN + "\nworld_rules:\n  drop: [W2]\n  replace: {W1: \"Drowned sailors walk at full moon.\"}\n")
    assert [c.id for c in spec.world_rule_commitments] == ["W1", "W3"]
    assert spec.commitment("W1").text == "Drowned sailors walk at full moon."


def test_unknown_world_rule_ids_and_taken_ids_are_errors():
    text = CLEAN.replace("  - id: C1\n", "  - id: W1\n") + "\nworld_rules: {drop: [W9], replace: {X1: \"x\"}}\n"
    with pytest.raises(SpecError) as err:
        parse_spec(text, "s.yaml")
    message = str(err.value)
    assert "world_rules.drop[0]: 'W9' names no default world rule (known: W1, W2, W3)" in message
    assert "world_rules.replace.X1: 'X1' names no default world rule" in message
    assert "commitments[0].id: id 'W1' is taken by a default world rule" in message


def test_the_schema_has_the_new_fields():
    schema = json.dumps(spec_json_schema())
    for field in ("public_domain", "world_rules", "checklist", "findings", "fixes"):
        assert f'"{field}"' in schema
