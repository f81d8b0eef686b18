"""A studio's own world is a spec like any other: ``source.kind: original`` needs no published work, no
medium of film, book or play and no public-domain note, and the rules about retellings leave it alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ncp.core.spec import SpecError, parse_spec, spec_json_schema
from pytest_ncp.lint import lint_spec
from tests.conftest import ROOT

STARTER = ROOT / "pytest_ncp" / "cli" / "starter" / "glasswater-relay.yaml"
TEXT = STARTER.read_text(encoding="utf-8")


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "w.yaml")
    return [str(p) for p in info.value.problems]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_an_original_world_validates_and_lints_clean():
    spec = parse_spec(TEXT, "w.yaml")
    assert spec.source.kind == "original" and spec.source.medium == "game" and spec.source.year is None
    assert lint_spec(spec) == []


def test_the_public_domain_rule_skips_originals_but_not_retellings():
    retelling = TEXT.replace("  kind: original                ", "  year: 1999                    ") \
                    .replace("  studio: Your Studio ", "  # studio              ").replace("medium: game  ", "medium: book  ")
    assert "missing-public-domain" in {f.rule for f in lint_spec(parse_spec(retelling, "r.yaml"))}
    assert "missing-public-domain" not in {f.rule for f in lint_spec(parse_spec(TEXT, "w.yaml"))}


def test_an_original_has_no_public_domain_note_nor_film_book_or_play():
    with_note = TEXT.replace("  medium: game", "  public_domain: ours\n  medium: game")
    assert f"w.yaml:{line_of(with_note, 'public_domain: ours')}: source.public_domain: unknown field" in " ".join(
        problems(with_note))
    as_film = TEXT.replace("medium: game  ", "medium: film  ")
    assert any(p.startswith(f"w.yaml:{line_of(as_film, 'medium: film')}: source.medium: got 'film'; expected one of "
                            "'game' or 'story'") for p in problems(as_film)), problems(as_film)


def test_an_unknown_source_kind_and_a_missing_studio_name_the_field():
    assert any(p.startswith(f"w.yaml:{line_of(TEXT, 'kind: original')}: source.kind: got 'homebrew'; expected one of "
                            "'retelling', 'original'") for p in problems(TEXT.replace("kind: original", "kind: homebrew")))
    out = problems(TEXT.replace("  studio: Your Studio", "  # no studio"))
    assert any(p.startswith(f"w.yaml:{line_of(TEXT, 'source:')}: source.studio: required field is missing") for p in out), out


def test_genres_stay_validated_for_originals():
    out = problems(TEXT.replace("[Fantasy, Adventure]", "[Fantasy, Steampunk]"))
    assert any("genres[1]: got 'Steampunk'" in p for p in out), out


def test_the_schema_offers_both_kinds():
    source = spec_json_schema()["$defs"]["OriginalSource"]
    assert source["properties"]["kind"]["const"] == "original" and "studio" in source["required"]
    printed = json.loads(subprocess.run([sys.executable, "-m", "pytest_ncp.cli", "schema"], capture_output=True,
                                        text=True, check=True, timeout=120).stdout)
    assert {"$ref": "#/$defs/OriginalSource"} in printed["properties"]["source"]["oneOf"]


def test_the_benchmark_specs_stay_retellings(tmp_path: Path):
    out = subprocess.run([sys.executable, "-m", "pytest_ncp.cli", "lint", str(ROOT / "specs")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "0 finding(s)" in out.stdout, out.stdout + out.stderr


def test_a_retelling_keeps_the_fingerprint_it_had_before_source_kinds():
    """Recorded runs resume and gold cases stay stamped: the default kind is not part of the hash."""
    from pytest_ncp.core.spec import load_spec

    spec = load_spec(ROOT / "tests" / "fixtures" / "caligari.yaml")
    assert spec.source.kind == "retelling" and "kind" not in spec._hashed()["source"]
    explicit = (ROOT / "tests" / "fixtures" / "caligari.yaml").read_text(encoding="utf-8").replace(
        "source:\n", "source:\n  kind: retelling\n", 1)
    assert parse_spec(explicit, "c.yaml").fingerprint == spec.fingerprint
    original = parse_spec(TEXT, "w.yaml")
    assert original._hashed()["source"]["kind"] == "original"
