"""`ncp specs draft` against the scripted model server: write, regenerate with problems, give up."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from pytest_ncp.cli import main
from pytest_ncp.authoring import DRAFT_STEP
from pytest_ncp.core.spec import parse_spec
from tests.conftest import FIXTURES

CALIGARI = yaml.safe_load((FIXTURES / "caligari.yaml").read_text())
MODEL = "openai/spec-writer"


def answer(**changes) -> dict:
    """A draft answer as a strict-schema model gives it (every field present, nulls included)."""
    a = copy.deepcopy({k: CALIGARI[k] for k in ("player", "synopsis", "initial_facts", "commitments", "trajectory",
                                                 "scripted_inputs")})
    for c in a["commitments"]:
        c.setdefault("before", None)
        c.setdefault("after", None)
        c.setdefault("depends_on", [])
    a.update(changes)
    return a


@pytest.fixture
def candidates(tmp_path):
    path = tmp_path / "candidates.jsonl"
    rows = [
        {"movie_id": "7", "title": "Some Other Film", "year": 1950, "genres": ["War", "Drama"], "character": "Ann",
         "plot": "Ann goes to war.", "plot_words": 4},
        {"movie_id": "42", "title": "The Cabinet of Dr. Caligari", "year": 1920, "genres": ["Horror", "Mystery"],
         "character": "Francis", "plot": CALIGARI["synopsis"], "plot_words": len(CALIGARI["synopsis"].split())},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def draft(server, candidates, out, *extra: str) -> int:
    return main(["specs", "draft", "--candidate", str(candidates), "--id", "42", "--model", MODEL,
                 "--api-base", server.base_url, "--out", str(out), *extra])


def test_valid_answer_is_written_and_marked_draft(ncp_model_server, candidates, tmp_path, capsys):
    ncp_model_server.add(step=DRAFT_STEP, reply=answer())
    out = tmp_path / "specs" / "caligari-draft.yaml"
    assert draft(ncp_model_server, candidates, out) == 0
    assert "attempt 1/3: valid and lint-clean" in capsys.readouterr().out
    spec = parse_spec(out.read_text(), str(out))
    assert (spec.id, spec.title, spec.source.year, spec.genres) == (
        "caligari-draft", "The Cabinet of Dr. Caligari", 1920, ["Horror", "Mystery"])
    assert spec.review is not None and spec.review.status == "draft"
    assert out.read_text().endswith("\nreview: {status: draft}\n")
    assert "synopsis: >\n" in out.read_text()  # readable block scalar, like the bundled specs
    (request,) = ncp_model_server.requests
    fmt = request.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == DRAFT_STEP and fmt["json_schema"]["strict"]
    assert "genres" not in fmt["json_schema"]["schema"]["properties"]  # known from the candidate
    assert request.role == "author" and request.model == "spec-writer"
    assert "PLAYER CHARACTER: Francis" in request.text and "Holstenwall a travelling fair" in request.text
    assert "future-sight isolation" in request.text.lower()


@pytest.mark.parametrize("bad, problem", [
    # a validation problem (spec.py) ...
    (answer(commitments=[{**c, "before": "prophesy"} if c["id"] == "C3" else c for c in answer()["commitments"]]),
     "commitments[2].before: 'prophesy' names no trajectory node"),
    # ... a lint finding (lint.py) ...
    (answer(commitments=[{**c, "before": "alan-murdered", "after": "prophecy"} if c["id"] == "C3" else c
                         for c in answer()["commitments"]]), "ordering-out-of-order"),
    # ... the wrong player, and an answer that is not JSON at all.
    (answer(player={"name": "Cesare", "briefing": "You are Cesare, a sleepwalker."}), "the player must be 'Francis'"),
    ("Here is your spec: it is great.", "not valid JSON"),
])
def test_invalid_first_answer_is_regenerated_with_its_problems(ncp_model_server, candidates, tmp_path, capsys,
                                                              bad, problem):
    ncp_model_server.add(step=DRAFT_STEP, reply=answer())
    ncp_model_server.add(step=DRAFT_STEP, reply=bad, times=1)  # later rules win: the bad answer comes first
    out = tmp_path / "caligari-draft.yaml"
    assert draft(ncp_model_server, candidates, out) == 0
    first, retry = ncp_model_server.requests
    assert problem not in first.text
    assert problem in retry.text and "previous draft" in retry.text
    if not isinstance(bad, str):
        assert "   1  id: caligari-draft" in retry.text  # the rendered draft, with line numbers
        assert f"{out}:" not in retry.text  # problems point at those lines, not at a file path
    assert "attempt 1/3: " in capsys.readouterr().out
    assert parse_spec(out.read_text()).player.name == "Francis"


def test_no_valid_draft_exits_1_and_writes_nothing(ncp_model_server, candidates, tmp_path, capsys):
    ncp_model_server.add(step=DRAFT_STEP, reply=answer(trajectory=[]))
    out = tmp_path / "caligari-draft.yaml"
    assert draft(ncp_model_server, candidates, out, "--attempts", "2") == 1
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))
    assert len(ncp_model_server.requests) == 2
    err = capsys.readouterr().err
    assert "no valid draft after 2 attempt(s)" in err and f"{out}:" in err and "trajectory" in err


def test_existing_file_needs_force(ncp_model_server, candidates, tmp_path, capsys):
    out = tmp_path / "caligari-draft.yaml"
    out.write_text("keep me\n")
    assert draft(ncp_model_server, candidates, out) == 2
    assert "pass --force" in capsys.readouterr().err and out.read_text() == "keep me\n"
    assert ncp_model_server.requests == []
    ncp_model_server.add(step=DRAFT_STEP, reply=answer())
    assert draft(ncp_model_server, candidates, out, "--force") == 0 and out.read_text() != "keep me\n"


def test_synopsis_file_without_genres_lets_the_model_choose(ncp_model_server, tmp_path):
    synopsis = tmp_path / "story.txt"
    synopsis.write_text(CALIGARI["synopsis"])
    ncp_model_server.add(step=DRAFT_STEP, reply=answer(genres=["Horror", "Fantasy"]))
    out = tmp_path / "my-caligari.yaml"
    assert main(["specs", "draft", "--synopsis", str(synopsis), "--title", "Caligari", "--year", "1920",
                 "--character", "Francis", "--model", MODEL, "--api-base", ncp_model_server.base_url,
                 "--out", str(out)]) == 0
    spec = parse_spec(out.read_text())
    assert spec.genres == ["Horror", "Fantasy"] and spec.source.work == "Caligari"
    schema = ncp_model_server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["genres"]["items"]["enum"][0] == "Action"


@pytest.mark.parametrize("args, message", [
    (["--candidate", "C", "--id", "99"], "no candidate with movie_id '99'"),
    (["--candidate", "C"], "holds 2 candidates: choose one with --id"),
    (["--synopsis", "story.txt", "--title", "T"], "--synopsis needs --year, --character as well"),
    ([], "say what to draft"),
    (["--candidate", "C", "--id", "42", "--genres", "Horror"], "two different genres"),
    (["--candidate", "C", "--id", "42", "--out", "specs/9 lives.yaml"], "not a valid spec id"),
])
def test_draft_usage_errors(ncp_model_server, candidates, capsys, args, message):
    args = [str(candidates) if a == "C" else a for a in args]
    assert main(["specs", "draft", "--model", MODEL, "--api-base", ncp_model_server.base_url, *args]) == 2
    assert message in capsys.readouterr().err
    assert ncp_model_server.requests == []


def test_model_failure_is_reported_not_a_traceback(ncp_model_server, candidates, tmp_path, capsys):
    ncp_model_server.add(step=DRAFT_STEP, status=401)
    assert draft(ncp_model_server, candidates, tmp_path / "x.yaml") == 1
    assert "author call to openai/spec-writer failed" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()


def test_public_domain_comes_from_the_command_never_from_the_model(ncp_model_server, candidates, tmp_path, capsys):
    ncp_model_server.add(step=DRAFT_STEP, reply=answer())
    out = tmp_path / "no-pd.yaml"
    assert draft(ncp_model_server, candidates, out) == 0  # the model cannot know it: not a problem to redraft
    assert "missing-public-domain" not in ncp_model_server.requests[0].text
    assert parse_spec(out.read_text()).source.public_domain is None
    assert "has no source.public_domain" in capsys.readouterr().out
    out = tmp_path / "pd.yaml"
    assert draft(ncp_model_server, candidates, out, "--public-domain", "US public domain: released 1920") == 0
    assert parse_spec(out.read_text()).source.public_domain == "US public domain: released 1920"
    assert "public_domain" not in ncp_model_server.requests[-1].body["response_format"]["json_schema"]["schema"][
        "properties"].get("source", {}).get("properties", {})
