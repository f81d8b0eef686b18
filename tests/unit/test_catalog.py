"""specs/README.md is generated from the specs; these tests keep the committed page true."""

from __future__ import annotations

from pytest_ncp.authoring.catalog import catalog_markdown
from pytest_ncp.core.spec import GENRES, load_specs, parse_spec
from tests.conftest import FIXTURES, SPECS

GOOD = (FIXTURES / "caligari.yaml").read_text()


def test_committed_catalog_matches_the_specs():
    specs, errors = load_specs([SPECS])
    assert not errors
    expected = catalog_markdown(specs, base=SPECS)
    assert (SPECS / "README.md").read_text(encoding="utf-8") == expected, (
        "specs/README.md is out of date: run `ncp catalog specs/ > specs/README.md`")


def test_catalog_rows_and_genre_table():
    spec = parse_spec(GOOD, str(FIXTURES / "caligari.yaml"))
    other = parse_spec(GOOD.replace("id: caligari\n", "id: b-side\n", 1).replace("[Horror, Mystery]", "[Mystery, Comedy]")
                       .replace("title: The Cabinet of Dr. Caligari", "title: Pipes | and | Bars"), "b.yaml")
    page = catalog_markdown([spec, other], base=FIXTURES)
    lines = page.splitlines()
    assert "| Horror | 1 | 0 | 1 |" in lines and "| Mystery | 1 | 1 | 2 |" in lines and "| Comedy | 0 | 1 | 1 |" in lines
    assert "| **all** | 2 | 2 | 4 |" in lines
    genre_rows = [line for line in lines if line.startswith("| ") and line.split(" | ")[0][2:] in GENRES]
    assert len(genre_rows) == len(GENRES)
    row = next(line for line in lines if line.startswith("| [caligari]"))
    assert row == ("| [caligari](caligari.yaml) | The Cabinet of Dr. Caligari | 1920 | film | Horror / Mystery | Francis "
                   "| 9 | 6 (2/2/2) | 8 | 24 |")
    # Rows are sorted by id; a pipe in a title is escaped so the table keeps its columns.
    assert lines.index(next(line for line in lines if "b-side" in line)) < lines.index(row)
    assert "Pipes \\| and \\| Bars" in page
    assert "2 specs (2 films), from 1920 to 1920." in lines
