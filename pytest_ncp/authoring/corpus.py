"""Reading the CMU Movie Summary Corpus: plots, movie metadata and character metadata, with file:line warnings."""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

# The earliest surviving narrative films are from 1888; a release year outside this range is a data
# error in the corpus (it holds e.g. "1010-12-02" for a 2010 film), not a date to trust.
EARLIEST_YEAR = 1888
LATEST_YEAR = 2100


class CorpusError(Exception):
    """A corpus file cannot be used at all (missing, or not the file its option names)."""


@dataclass(frozen=True)
class Movie:
    wiki_id: str
    title: str
    release: str  # as written in the corpus
    year: int | None  # None when missing or not a plausible date
    cmu_genres: tuple[str, ...]


@dataclass
class CorpusRead:
    """What the three files held, plus lines that could not be read (``path:line: problem``)."""

    plots: dict[str, str] = field(default_factory=dict)
    movies: dict[str, Movie] = field(default_factory=dict)
    characters: dict[str, list[str]] = field(default_factory=dict)  # wiki id -> names, corpus order
    character_rows: int = 0
    warnings: list[str] = field(default_factory=list)


def parse_year(release: str) -> int | None:
    """Year of a corpus release date (``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``); None when unusable."""
    release = release.strip()
    m = re.fullmatch(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?", release)
    if not m:
        return None
    year = int(m.group(1))
    if not EARLIEST_YEAR <= year <= LATEST_YEAR:
        return None
    if m.group(2):
        try:
            _dt.date(year, int(m.group(2)), int(m.group(3) or 1))
        except ValueError:
            return None  # "1952-13-40": the whole date is garbage, so the year is not trusted either
    return year


def _rows(path: Path, columns: int, option: str, warnings: list[str]) -> Iterator[tuple[int, list[str]]]:
    """Tab-separated rows with exactly ``columns`` fields.

    A wrong first row means the wrong file was given (an error naming the option to fix); a bad row
    later is skipped with a warning, so one damaged line does not sink a 450,000-line file.
    """
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc}); check {option}") from None
    seen_good = False
    with handle:
        for lineno, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t", columns - 1) if columns == 2 else line.split("\t")
            if len(fields) != columns:
                problem = f"{path}:{lineno}: expected {columns} tab-separated columns, got {len(fields)}"
                if not seen_good:
                    raise CorpusError(f"{problem}: is this the file {option} expects? (see `ncp specs "
                                      f"import-cmu --help` for the CMU Movie Summary Corpus files)")
                warnings.append(problem + " (line skipped)")
                continue
            seen_good = True
            yield lineno, fields


def _json_dict_values(text: str, where: str, warnings: list[str]) -> tuple[str, ...]:
    text = text.strip()
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        warnings.append(f"{where}: genres are not a JSON object (ignored)")
        return ()
    if not isinstance(value, dict):
        warnings.append(f"{where}: genres are not a JSON object (ignored)")
        return ()
    return tuple(str(v) for v in value.values() if isinstance(v, str) and v.strip())


def read_corpus(plots: str | Path, movies: str | Path, characters: str | Path) -> CorpusRead:
    """Read plot_summaries.txt, movie.metadata.tsv and character.metadata.tsv."""
    out = CorpusRead()
    plots, movies, characters = Path(plots), Path(movies), Path(characters)
    for _, (wiki_id, text) in _rows(plots, 2, "--plots (plot_summaries.txt)", out.warnings):
        out.plots[wiki_id.strip()] = text.strip()
    for lineno, f in _rows(movies, 9, "--movies (movie.metadata.tsv)", out.warnings):
        wiki_id = f[0].strip()
        out.movies[wiki_id] = Movie(
            wiki_id=wiki_id, title=" ".join(f[2].split()), release=f[3].strip(), year=parse_year(f[3]),
            cmu_genres=_json_dict_values(f[8], f"{movies}:{lineno}", out.warnings),
        )
    for _, f in _rows(characters, 13, "--characters (character.metadata.tsv)", out.warnings):
        out.character_rows += 1
        name = " ".join(f[3].split())
        if name:  # most rows name only the actor
            names = out.characters.setdefault(f[0].strip(), [])
            if name not in names:  # one character played by several actors has several rows
                names.append(name)
    return out
