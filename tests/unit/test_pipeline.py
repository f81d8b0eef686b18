"""`ncp specs import-cmu` and `ncp specs review`, and the pure authoring functions behind them."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from pytest_ncp import authoring as P
from pytest_ncp.authoring import draft as D
from pytest_ncp.cli import main
from pytest_ncp.core.spec import GENRES, NarrativeSpec, parse_spec
from tests.conftest import FIXTURES

CMU = FIXTURES / "cmu"


def import_args(out, *extra: str) -> list[str]:
    return ["specs", "import-cmu", "--plots", str(CMU / "plot_summaries.txt"),
            "--movies", str(CMU / "movie.metadata.tsv"), "--characters", str(CMU / "character.metadata.tsv"),
            "--min-words", "40", "--out", str(out), *extra]


# --- import-cmu end to end -----------------------------------------------------------------------


def test_import_cmu_cleans_maps_and_selects(tmp_path, capsys):
    out = tmp_path / "candidates.jsonl"
    assert main(import_args(out, "--count", "6")) == 0
    summary = capsys.readouterr().out
    # Every defect planted in the fixture corpus is dropped under its own reason.
    for reason, n in [("no_metadata", 1), ("no_plot", 1), ("not_fiction", 1), ("no_year", 2), ("few_genres", 2),
                      ("short_plot", 1), ("no_character", 1), ("character_not_in_plot", 1), ("duplicate", 2)]:
        assert f"{n:>6}  {reason}:" in summary, reason
    assert "read: 18 plot(s), 18 movie(s), 23 character row(s)" in summary
    assert "cleaned: 7 candidate(s); selected: 6" in summary
    assert "genre coverage: 11/18 genres, 6 distinct genre pair(s)" in summary
    assert "character.metadata.tsv:12: expected 13 tab-separated columns, got 3 (line skipped)" in summary
    assert "movie.metadata.tsv:13: genres are not a JSON object" in summary
    assert "3 named character(s) not mentioned" in summary

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [list(r) for r in rows] == [["movie_id", "title", "year", "genres", "character", "plot", "plot_words"]] * 6
    by_id = {r["movie_id"]: r for r in rows}
    # The Widow of Ashgrove repeats The Hollow Bell's genre pair with a shorter plot: the one left out.
    assert set(by_id) == {"31001", "31002", "31007", "31008", "31009", "31010"}
    # Duplicates keep the fuller entry: "Hollow Bell, The" (1934-10) and the re-titled Corsair plot go.
    assert by_id["31002"]["title"] == "The Hollow Bell" and by_id["31009"]["year"] == 1926
    # Genres mapped from free-form corpus names, Drama demoted on ties.
    assert by_id["31007"]["genres"] == ["Sci-Fi", "Western"]  # "Space western" + "B-movie"
    assert by_id["31008"]["genres"] == ["Comedy", "Romance"]  # screwball + romantic comedy
    assert by_id["31009"]["genres"] == ["Adventure", "Action"]  # "Swashbuckler films" + "Silent film"
    assert by_id["31010"]["genres"] == ["Crime", "Thriller"]  # "Film noir" outvotes nothing, comes first
    assert by_id["31001"]["genres"] == ["Romance", "Drama"]
    # The most-mentioned named character of each plot becomes the player.
    assert by_id["31001"]["character"] == "Maren Holt" and by_id["31009"]["character"] == "Jack Morrow"
    assert by_id["31007"]["character"] == "Marshal Dell Tanager"
    assert all(r["plot_words"] == len(r["plot"].split()) for r in rows)


def test_import_cmu_is_deterministic_and_keeps_diverse_prefix(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(import_args(a, "--count", "50")) == 0
    assert main(import_args(b, "--count", "50")) == 0
    assert a.read_bytes() == b.read_bytes()
    ids = [json.loads(line)["movie_id"] for line in a.read_text().splitlines()]
    assert len(ids) == 7 and ids[-1] == "31011"  # the repeated pair only after every new pair
    assert "only 7 candidate(s) survived cleaning" in capsys.readouterr().out


def test_import_cmu_default_min_words_drops_the_short_fixture_plots(tmp_path, capsys):
    args = [a for a in import_args(tmp_path / "c.jsonl") if a not in ("--min-words", "40")]
    assert main(args) == 0
    assert "cleaned: 0 candidate(s)" in capsys.readouterr().out
    assert (tmp_path / "c.jsonl").read_text() == ""


def test_import_cmu_names_the_wrong_file(tmp_path, capsys):
    args = import_args(tmp_path / "c.jsonl")
    swapped = [str(CMU / "character.metadata.tsv") if a.endswith("movie.metadata.tsv") else a for a in args]
    assert main(swapped) == 2
    err = capsys.readouterr().err
    assert "character.metadata.tsv:1: expected 9 tab-separated columns, got 13" in err and "--movies" in err
    assert not (tmp_path / "c.jsonl").exists()
    assert main([a if not a.endswith("plot_summaries.txt") else str(tmp_path / "nope.txt") for a in args]) == 2
    assert "nope.txt: cannot read" in capsys.readouterr().err


# --- pieces ---------------------------------------------------------------------------------------


def test_one_genre_list_one_id_pattern():
    from pytest_ncp.core import spec
    from pytest_ncp.core import terms

    assert P.GENRES is spec.GENRES is terms.GENRES == GENRES
    assert spec.Id.metadata and any(getattr(m, "pattern", None) == terms.ID_PATTERN for m in spec.Id.metadata)


def test_the_authoring_tools_import_without_pydantic_or_yaml():
    import subprocess
    import sys

    code = ("import sys, pytest_ncp.authoring; "
            "print(sorted(m for m in ('pydantic', 'yaml', 'jinja2', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("cmu, ncp", [
    ("Romantic comedy", ("Comedy", "Romance")),
    ("Crime Thriller", ("Thriller", "Crime")),
    ("Space western", ("Sci-Fi", "Western")),
    ("Film noir", ("Crime", "Thriller")),
    ("Political satire", ("Satire",)),
    ("War film", ("War",)),
    ("Software", ()),  # "war" only as a whole word
    ("World cinema", ()),
    ("Black-and-white", ()),
    ("Kitchen sink realism", ()),
    ("  SCIENCE   Fiction ", ("Sci-Fi",)),
])
def test_map_genre(cmu, ncp):
    assert P.map_genre(cmu) == ncp


def test_genre_table_only_names_real_genres():
    assert {g for targets in P.GENRE_TABLE.values() for g in targets} <= set(GENRES)
    assert {g for _, g in P.GENRE_KEYWORDS} == set(GENRES)  # every genre reachable by a keyword


def test_primary_secondary_votes_and_demotes_drama():
    assert P.primary_secondary(["Drama", "Romance Film"]) == ("Romance", "Drama")
    assert P.primary_secondary(["Drama", "Family Drama", "Romance Film"]) == ("Drama", "Family")
    assert P.primary_secondary(["Gothic Film", "Mystery", "Horror"]) == ("Horror", "Mystery")
    assert P.primary_secondary(["Drama", "World cinema"]) == ("Drama",)


@pytest.mark.parametrize("release, year", [
    ("1931", 1931), ("1931-04", 1931), ("1931-04-02", 1931), (" 1931-04-02 ", 1931),
    ("", None), ("1010-12-02", None), ("1952-13-01", None), ("1952-02-30", None), ("19xx", None), ("1931/04/02", None),
])
def test_parse_year(release, year):
    assert P.parse_year(release) == year


def test_title_key_matches_near_duplicates_only():
    key = P.title_key("The Hollow Bell")
    assert key == P.title_key("Hollow Bell, The") == P.title_key("The Hollow Bell (1934 film)") == "hollow bell"
    assert P.title_key("Amélie") == P.title_key("Amelie")
    assert P.title_key("七人の侍") != P.title_key("生きる")  # non-Latin titles are not reduced to ""
    assert P.title_key("The Hollow Bells") != key


def test_mentions_finds_name_parts_case_sensitively():
    plot = "Caligari shows Cesare. Later Dr. Caligari flees; the caligari cabinet is empty."
    assert P.mentions("Dr. Caligari", plot) == (2, 0)
    assert P.mentions("Jane Olsen", plot) == (0, -1)
    assert P.mentions("The Squire", "the squire confesses") == (0, -1)


def cand(movie_id: str, genres: tuple[str, str], words: int) -> P.Candidate:
    return P.Candidate(movie_id, f"Film {movie_id}", 1950, genres, "Ann", "x " * words, words)


def test_select_diverse_covers_genres_then_pairs_then_breaks_ties_by_length_then_id():
    pool = [
        cand("1", ("Horror", "Mystery"), 500), cand("2", ("Horror", "Mystery"), 900),
        cand("3", ("Mystery", "Horror"), 900),  # same unordered pair, same length as 2, higher id
        cand("4", ("Comedy", "Romance"), 100), cand("5", ("Horror", "Comedy"), 2000),
        cand("6", ("War", "Drama"), 50),
    ]
    picked = [c.movie_id for c in P.select_diverse(pool, 6)]
    # 5: every pair brings two new genres, so the longest plot wins; 6: the only pair still bringing
    # two; 2 before 4: one new genre each, equal use, longer plot; then the Horror/Mystery repeats,
    # 3 and 2 tie on length and the lower id (2) went first, so 3 now precedes the shorter 1.
    assert picked == ["5", "6", "2", "4", "3", "1"]
    assert [c.movie_id for c in P.select_diverse(pool, 2)] == ["5", "6"]
    assert P.select_diverse([], 5) == []


def test_select_diverse_takes_every_pair_once_before_repeating_one():
    pool = [cand("1", ("Action", "Comedy"), 500), cand("2", ("Action", "Comedy"), 900),
            cand("3", ("Drama", "War"), 100), cand("4", ("Action", "Drama"), 50), cand("5", ("Comedy", "War"), 60)]
    # After 2 and 3 every genre is used once; the long second Action/Comedy plot (1) still waits until
    # the unseen pairs 5 and 4 are in.
    assert [c.movie_id for c in P.select_diverse(pool, 5)] == ["2", "3", "5", "4", "1"]


# --- drafting pieces ------------------------------------------------------------------------------


def _walk(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


@pytest.mark.parametrize("with_genres", [False, True])
def test_draft_schema_is_strict_compatible_and_covers_the_spec(with_genres):
    schema = P.draft_schema(with_genres=with_genres)
    for path, node in _walk(schema):
        assert "$ref" not in node and "$defs" not in node, path
        assert not set(node) & D._UNSTRICT_KEYWORDS - {"title"} or path[-1:] == ("properties",), path
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
    fields = set(NarrativeSpec.model_fields)
    assert set(schema["properties"]) == fields - set(P.OWN_FIELDS) | ({"genres"} if with_genres else set())
    if with_genres:
        assert schema["properties"]["genres"]["items"]["enum"] == list(GENRES)


def test_render_spec_yaml_reads_back_exactly_even_for_awkward_text():
    data = yaml.safe_load((FIXTURES / "caligari.yaml").read_text())
    awkward = ["yes", "null", "1920", "- starts with a dash", "key: value", "has # hash", "ends with colon:",
               "quote \" and 'apostrophe'", "tab\there", "bell\x07", "naïve café — “quoted”", "[brackets], {braces}",
               "@at", "%percent", "*star", "!bang", "   padded   "]
    data["scripted_inputs"] = awkward
    data["initial_facts"] = [{"id": f"F{i}", "text": t} for i, t in enumerate(awkward, 1)]
    data["trajectory"][0]["description"] = "key: value # not a comment"
    data["player"]["name"] = "yes"
    data["review"] = {"status": "draft"}
    text = P.render_spec_yaml(data)
    assert yaml.safe_load(text) == data
    # The same awkward strings that fit the readable layout keep it (block scalar synopsis etc.).
    plain = yaml.safe_load((FIXTURES / "caligari.yaml").read_text())
    plain = P.assemble_spec(P.DraftRequest("c", plain["title"], 1920, "Francis", "s", ("Horror", "Mystery")),
                            {k: plain[k] for k in ("player", "synopsis", "initial_facts", "commitments",
                                                   "trajectory", "scripted_inputs")})
    text = P.render_spec_yaml(plain)
    assert "synopsis: >\n  In the crooked" in text and "  briefing: >\n    You are Francis" in text
    assert text.endswith("\nreview: {status: draft}\n")
    synopsis = text.split("synopsis: >\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(synopsis) > 5 and max(len(line) for line in synopsis) <= P.WIDTH
    spec = parse_spec(text, "c.yaml")
    assert spec.review is not None and spec.review.status == "draft"


def test_assemble_spec_never_takes_known_fields_from_the_model():
    request = P.DraftRequest("my-film", "My Film", 1950, "Ann", "story", ("Drama", "War"))
    data = P.assemble_spec(request, {"id": "evil", "title": "Other", "genres": ["Comedy", "Satire"],
                                     "review": {"status": "reviewed"}, "synopsis": "Para one\n\n\nPara   two",
                                     "commitments": [{"id": "C1", "kind": "invariant", "text": "t", "before": None,
                                                      "after": None, "depends_on": []}], "extra": 1})
    assert (data["id"], data["title"], data["genres"], data["review"]) == ("my-film", "My Film", ["Drama", "War"],
                                                                          {"status": "draft"})
    assert data["synopsis"] == "Para one\nPara two\n"
    assert data["commitments"] == [{"id": "C1", "kind": "invariant", "text": "t"}]
    assert data["extra"] == 1  # left in, so validation tells the model it is not a spec field


def test_parse_draft_answer():
    assert P.parse_draft_answer('```json\n{"a": 1}\n```') == ({"a": 1}, [])
    answer, problems = P.parse_draft_answer("Sure! Here is the spec")
    assert answer is None and "not valid JSON" in problems[0]
    assert "JSON object" in P.parse_draft_answer("[1, 2]")[1][0]


def test_parse_genres_and_ids():
    assert P.parse_genres("horror, Sci-Fi") == ("Horror", "Sci-Fi")
    for bad in ("Horror", "Horror,Horror", "Horror,Noir", "A,B,C"):
        with pytest.raises(ValueError, match="two different genres"):
            P.parse_genres(bad)
    assert P.slug("The Cabinet of Dr. Caligari (1920 film)") == "cabinet-of-dr-caligari"
    assert P.slug("1984") == "spec-1984"
    assert P.check_spec_id("caligari") is None and "not a valid spec id" in P.check_spec_id("9 lives")


# --- review -----------------------------------------------------------------------------------------


REVIEWED = {"status": "reviewed", "reviewer": "Ada", "date": __import__("datetime").date(2025, 3, 1), "notes": "ok"}


def test_set_review_appends_and_keeps_every_other_byte():
    text = (FIXTURES / "caligari.yaml").read_text()
    assert "review" not in yaml.safe_load(text)
    new = P.set_review(text, REVIEWED)
    assert new.startswith(text)
    assert new[len(text):] == "\nreview:\n  status: reviewed\n  reviewer: Ada\n  date: 2025-03-01\n  notes: ok\n"
    assert parse_spec(new).review.reviewer == "Ada"


def test_set_review_replaces_only_the_review_block():
    head = "# a comment that must survive\nid: x   # trailing comment\ntitle: 'Quoted'\n"
    tail = "# after the block\nsynopsis: >\n  folded\n  text\n"
    for block in ("review: {status: draft}\n", "review:\n  status: draft\n  notes: |\n    multi\n    line\n",
                  "review:\n  status: reviewed\n  reviewer: Bob  # old\n", "review:\n"):
        text = head + block + tail
        new = P.set_review(text, REVIEWED)
        assert new.startswith(head) and new.endswith(tail), block
        assert yaml.safe_load(new)["review"] == REVIEWED
        assert P.set_review(new, REVIEWED) == new  # approving twice changes nothing more


def test_set_review_at_end_without_newline_and_with_crlf():
    new = P.set_review("id: x\nreview: {status: draft}", {"status": "reviewed", "reviewer": "A"})
    assert new == "id: x\nreview:\n  status: reviewed\n  reviewer: A\n"
    crlf = "id: x\r\ntitle: y\r\n"
    new = P.set_review(crlf, {"status": "draft"})
    assert new == "id: x\r\ntitle: y\r\n\r\nreview: {status: draft}\r\n"


def test_set_review_refuses_what_it_cannot_edit_safely():
    with pytest.raises(P.ReviewEditError, match="invalid YAML"):
        P.set_review("id: [x\n", REVIEWED)
    with pytest.raises(P.ReviewEditError, match="block mapping"):
        P.set_review("{id: x, review: {status: draft}}\n", REVIEWED)


def spec_copy(tmp_path, name="caligari.yaml", edit=None):
    path = tmp_path / name
    shutil.copy(FIXTURES / "caligari.yaml", path)
    if edit:
        path.write_text(edit(path.read_text()))
    return path


def test_review_shows_outline_and_findings(tmp_path, capsys):
    path = spec_copy(tmp_path)
    before = path.read_bytes()
    assert main(["specs", "review", str(path)]) == 0
    out = capsys.readouterr().out
    assert "caligari: The Cabinet of Dr. Caligari (film, 1920; Horror / Mystery)" in out
    assert "player: Francis" in out and "2 invariant, 2 ordering, 2 achievement" in out
    assert "  1. fair-visit: Francis and Alan go to the fair" in out and "0 finding(s)" in out
    assert "review: none" in out
    assert path.read_bytes() == before
    assert main(["specs", "review", str(path), "--reviewer", "Ada"]) == 2  # only with --approve
    assert main(["specs", "review", str(path), "--approve"]) == 2
    assert "needs --reviewer" in capsys.readouterr().err


def test_review_approve_records_the_block_only(tmp_path, capsys):
    path = spec_copy(tmp_path)
    before = path.read_text()
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "Ada Byron", "--note", "checked: POV ok"]) == 0
    after = path.read_text()
    assert after.startswith(before)
    review = parse_spec(after).review
    assert (review.status, review.reviewer, review.notes) == ("reviewed", "Ada Byron", "checked: POV ok")
    assert review.date is not None
    capsys.readouterr()
    assert main(["specs", "review", str(path)]) == 0
    assert f"review: reviewed by Ada Byron on {review.date.isoformat()}: checked: POV ok" in capsys.readouterr().out


def test_review_refuses_approval_with_findings_unless_forced(tmp_path, capsys):
    # before/after swapped: valid YAML and schema, but the linter's ordering-out-of-order rule fires.
    path = spec_copy(tmp_path, edit=lambda t: t.replace("before: prophecy\n    after: alan-murdered",
                                                        "before: alan-murdered\n    after: prophecy"))
    before = path.read_bytes()
    assert main(["specs", "review", str(path)]) == 1
    out = capsys.readouterr().out
    assert "1 finding(s):" in out and "ordering-out-of-order" in out
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "Ada"]) == 1
    assert "not approved" in capsys.readouterr().err and path.read_bytes() == before
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "Ada", "--force"]) == 0
    text = path.read_text()
    assert text.startswith(before.decode())
    assert parse_spec(text).review.notes == "[approved with 1 open finding(s)]"


def test_review_of_an_invalid_spec_lists_validation_problems(tmp_path, capsys):
    path = spec_copy(tmp_path, edit=lambda t: t.replace("kind: ordering", "kind: sequence", 1))
    assert main(["specs", "review", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:" in out and "commitments[2].kind: got 'sequence'" in out


def test_review_approve_records_checklist_findings_and_fixes(tmp_path, capsys):
    from pytest_ncp.lint import RULES

    path = spec_copy(tmp_path)
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "a fresh reader",
                 "--checked", "facts-true-at-turn-0", "--finding", "node jane-abducted: Francis is not there, "
                 "so he cannot see it", "--fix", "trigger rewritten: Francis hears screams"]) == 0
    review = parse_spec(path.read_text()).review
    assert review.checklist == [*RULES, "facts-true-at-turn-0"]
    assert review.findings == ["node jane-abducted: Francis is not there, so he cannot see it"]
    assert review.fixes == ["trigger rewritten: Francis hears screams"]
    # A second review keeps what the first one found and fixed.
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "B", "--fix", "input 12 added"]) == 0
    review = parse_spec(path.read_text()).review
    assert review.reviewer == "B" and review.fixes == ["trigger rewritten: Francis hears screams", "input 12 added"]
    assert len(review.findings) == 1
    capsys.readouterr()
    assert main(["specs", "review", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  fixed: input 12 added" in out and "  found: node jane-abducted" in out


def test_review_checked_lists_the_valid_checks(tmp_path, capsys):
    path = spec_copy(tmp_path)
    assert main(["specs", "review", str(path), "--approve", "--reviewer", "A", "--checked", "vibes"]) == 2
    err = capsys.readouterr().err
    assert "'vibes' is not a review check" in err and "commitments-auditable-from-one-response" in err
    assert main(["specs", "review", str(path), "--finding", "x"]) == 2  # only with --approve


def test_a_review_finding_with_a_question_mark_is_recorded():
    from pytest_ncp.authoring.layout import review_block, yaml_scalar

    import yaml

    finding = "is the clerk alive? the synopsis says so"
    assert yaml.safe_load("x: [" + yaml_scalar(finding, flow=True) + "]") == {"x": [finding]}
    block = review_block({"status": "reviewed", "reviewer": "R", "findings": [finding, "a? b"], "fixes": []})
    assert yaml.safe_load(block)["review"]["findings"] == [finding, "a? b"]
