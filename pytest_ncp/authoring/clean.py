"""Cleaning: drop unusable (movie, character) candidates, choose the player character, remove duplicates."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from .corpus import CorpusRead
from .genres import NON_FICTION_GENRES, primary_secondary

DEFAULT_MIN_WORDS = 150


# Why a movie is dropped, in the order the checks run (a movie counts under its first reason).
DROP_REASONS: dict[str, str] = {
    "no_metadata": "plot without a movie metadata row (no title)",
    "no_plot": "no plot summary",
    "not_fiction": "documentary or concert film",
    "no_year": "missing or implausible release date",
    "few_genres": "fewer than two of the 18 genres",
    "short_plot": "plot too short to support interaction",
    "no_character": "no named character",
    "character_not_in_plot": "no character of the movie is mentioned in its plot",
    "duplicate": "duplicate or near-duplicate of a kept movie (title and year, or plot text)",
}


@dataclass(frozen=True)
class Candidate:
    movie_id: str
    title: str
    year: int
    genres: tuple[str, str]
    character: str
    plot: str
    plot_words: int

    def to_dict(self) -> dict[str, Any]:
        return {"movie_id": self.movie_id, "title": self.title, "year": self.year,
                "genres": list(self.genres), "character": self.character, "plot": self.plot,
                "plot_words": self.plot_words}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(movie_id=str(data["movie_id"]), title=str(data["title"]), year=int(data["year"]),
                   genres=(data["genres"][0], data["genres"][1]), character=str(data["character"]),
                   plot=str(data["plot"]), plot_words=int(data["plot_words"]))


@dataclass
class Cleaned:
    candidates: list[Candidate]
    dropped: Counter[str]
    mismatched_characters: int  # named characters (not movies) absent from their movie's plot


def title_key(title: str) -> str:
    """A title with articles, accents, punctuation and Wikipedia's "(1931 film)" suffix removed."""
    t = unicodedata.normalize("NFKD", title)
    t = "".join(ch for ch in t if not unicodedata.combining(ch)).casefold()
    t = re.sub(r"\s*\((?:\d{4}\s+)?(?:[\w-]+\s+)?(?:film|movie)\)\s*$", "", t)
    t = re.sub(r",\s*(?:the|a|an)\s*$", "", t)
    t = re.sub(r"^(?:the|a|an)\s+", "", t)
    t = t.replace("&", " and ")
    return " ".join(re.sub(r"[\W_]+", " ", t).split())


# Words in character names that are not the name itself ("Dr. Caligari" is found as "Caligari").
_NAME_NOISE = frozenset("""
mr mrs ms miss mister dr doctor sir lady lord madam madame captain capt colonel major general
lieutenant sergeant sgt officer detective inspector sheriff professor prof father mother uncle aunt
king queen prince princess count countess baron duke jr sr the of and de la le von van del da
""".split())


def name_parts(name: str) -> list[str]:
    parts = [p.strip(".,'\"()") for p in re.split(r"[\s/]+", name)]
    return [p for p in parts if len(p) >= 2 and p[0].isupper() and p.lower() not in _NAME_NOISE]


def word_index(plot: str) -> dict[str, tuple[int, int]]:
    """Each word of a plot -> (occurrences, offset of the first); built once per plot, so checking its
    characters is a few lookups instead of a regex scan of the whole plot per name part."""
    index: dict[str, tuple[int, int]] = {}
    for m in re.finditer(r"\w+", plot):
        word = m.group()
        count, first = index.get(word, (0, m.start()))
        index[word] = (count + 1, first)
    return index


def mentions(name: str, plot: str, index: Mapping[str, tuple[int, int]] | None = None) -> tuple[int, int]:
    """(times the character is mentioned, offset of the first mention) in the plot; (0, -1) if never.

    A mention is the full name or any of its name parts as a whole, case-sensitive word: plots call
    "Jane Olsen" "Jane" or "Olsen", and "Dr. Caligari" "Caligari".
    """
    index = word_index(plot) if index is None else index
    best, first = 0, -1
    for part in dict.fromkeys([*name_parts(name), name.strip()]):
        if not part:
            continue
        if re.fullmatch(r"\w+", part):
            count, at = index.get(part, (0, -1))
        elif best:
            continue  # a multi-word full name is never mentioned more often than its first part
        else:
            hits = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(part)}(?!\w)", plot)]
            count, at = len(hits), (hits[0] if hits else -1)
        if count:
            best = max(best, count)
            first = at if first < 0 else min(first, at)
    return best, first


def clean(corpus: CorpusRead, *, min_words: int = DEFAULT_MIN_WORDS) -> Cleaned:
    """Drop unusable movies (``DROP_REASONS``) and pick each kept movie's player character.

    The character is the one the plot mentions most (ties: first mentioned, then name), which picks a
    character the synopsis can support without making it the protagonist by rule.
    """
    dropped: Counter[str] = Counter()
    mismatched = 0
    survivors: list[Candidate] = []
    for wiki_id in corpus.plots.keys() - corpus.movies.keys():
        dropped["no_metadata"] += 1
    for wiki_id, movie in corpus.movies.items():
        plot = corpus.plots.get(wiki_id, "")
        if not plot:
            dropped["no_plot"] += 1
            continue
        if any(g.lower() in NON_FICTION_GENRES for g in movie.cmu_genres):
            dropped["not_fiction"] += 1
            continue
        if movie.year is None:
            dropped["no_year"] += 1
            continue
        genres = primary_secondary(movie.cmu_genres)
        if len(genres) < 2:
            dropped["few_genres"] += 1
            continue
        words = len(plot.split())
        if words < min_words:
            dropped["short_plot"] += 1
            continue
        names = corpus.characters.get(wiki_id, [])
        if not names:
            dropped["no_character"] += 1
            continue
        index = word_index(plot)
        scored = [(mentions(n, plot, index), n) for n in names]
        mismatched += sum(1 for (count, _), _ in scored if count == 0)
        present = [(count, first, n) for (count, first), n in scored if count > 0]
        if not present:
            dropped["character_not_in_plot"] += 1
            continue
        count, first, character = min(present, key=lambda x: (-x[0], x[1], x[2]))
        survivors.append(Candidate(wiki_id, movie.title or wiki_id, movie.year, (genres[0], genres[1]),
                                   character, plot, words))
    kept = _dedupe(survivors, dropped)
    return Cleaned(kept, dropped, mismatched)


def _id_order(movie_id: str) -> tuple[int, int | str]:
    # Corpus ids are numbers: order them as numbers, and anything else after them as text.
    return (0, int(movie_id)) if movie_id.isdigit() else (1, movie_id)


def _dedupe(candidates: list[Candidate], dropped: Counter[str]) -> list[Candidate]:
    """Keep the best of each group of duplicates: the longest plot, then the lowest id.

    Two movies are duplicates when their titles match after ``title_key`` and their years differ by at
    most one (release-date noise), or when their plots are the same text. Remakes a year or more
    apart keep their own entries.
    """
    kept: list[Candidate] = []
    years: dict[str, list[int]] = {}
    plots: set[str] = set()
    for c in sorted(candidates, key=lambda c: (-c.plot_words, _id_order(c.movie_id))):
        key, plot_key = title_key(c.title), " ".join(c.plot.casefold().split())
        if plot_key in plots or any(abs(y - c.year) <= 1 for y in years.get(key, ())):
            dropped["duplicate"] += 1
            continue
        years.setdefault(key, []).append(c.year)
        plots.add(plot_key)
        kept.append(c)
    return sorted(kept, key=lambda c: _id_order(c.movie_id))
