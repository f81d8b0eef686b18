"""Building NCP-Bench specs: from the CMU Movie Summary Corpus to reviewed spec files.

The paper builds its 100 environments in three steps, and ``ncp specs`` follows them:

1. ``import-cmu``: read the corpus (plot summaries, movie metadata, character metadata), clean the
   (movie, character) candidates, map the corpus's free-form genres onto the 18 NCP genres, and
   pick a genre-diverse subset;
2. ``draft``: a model drafts a spec from one synopsis and character; the draft is validated and
   linted, and regenerated with the problems until it is clean;
3. ``review``: a person reads the draft and records their approval in the spec file.

Everything here is pure (files in, values out; no model calls, no printing), so each step is tested
on its own; ``pytest_ncp.commands.specs`` wires them to the command line. yaml, pydantic and jinja2
are imported inside the functions that need them.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import textwrap
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

if TYPE_CHECKING:
    from .spec import NarrativeSpec

# The 18 NCP genres (the same tuple as pytest_ncp.spec.GENRES, which imports pydantic; a test keeps
# the two in step).
GENRES: tuple[str, ...] = (
    "Action", "Adventure", "Comedy", "Crime", "Drama", "Family", "Fantasy", "Historical", "Horror",
    "Musical", "Mystery", "Romance", "Satire", "Sci-Fi", "Sports", "Thriller", "War", "Western",
)

DEFAULT_MIN_WORDS = 150
DEFAULT_COUNT = 100

# The earliest surviving narrative films are from 1888; a release year outside this range is a data
# error in the corpus (it holds e.g. "1010-12-02" for a 2010 film), not a date to trust.
EARLIEST_YEAR = 1888
LATEST_YEAR = 2100


class CorpusError(Exception):
    """A corpus file cannot be used at all (missing, or not the file its option names)."""


# --- genre mapping -------------------------------------------------------------------------------

# Explicit entries for corpus genres the keyword rules below would get wrong or miss. An empty tuple
# means "says nothing about the story" (format, origin, audience). Keys are lower-cased.
GENRE_TABLE: dict[str, tuple[str, ...]] = {
    # crime and mystery without the word in the name
    "film noir": ("Crime", "Thriller"), "neo-noir": ("Crime", "Thriller"), "gangster film": ("Crime",),
    "heist": ("Crime",), "caper story": ("Crime", "Comedy"), "prison": ("Crime",), "prison film": ("Crime",),
    "detective": ("Mystery", "Crime"), "detective fiction": ("Mystery", "Crime"), "whodunit": ("Mystery",),
    "suspense": ("Thriller",), "spy": ("Thriller",), "conspiracy fiction": ("Thriller",),
    "legal drama": ("Drama", "Crime"), "courtroom drama": ("Drama", "Crime"),
    # horror sub-genres
    "slasher": ("Horror",), "monster movie": ("Horror",), "creature film": ("Horror",),
    "zombie film": ("Horror",), "vampire movies": ("Horror",), "werewolf fiction": ("Horror",),
    "haunted house film": ("Horror",), "natural horror films": ("Horror",), "gothic film": ("Horror",),
    "psycho-biddy": ("Horror", "Thriller"), "demonic child": ("Horror",), "splatter film": ("Horror",),
    "supernatural": ("Fantasy", "Horror"),
    # science fiction
    "time travel": ("Sci-Fi",), "dystopia": ("Sci-Fi",), "cyberpunk": ("Sci-Fi",), "alien film": ("Sci-Fi",),
    "apocalyptic and post-apocalyptic fiction": ("Sci-Fi",), "space opera": ("Sci-Fi", "Adventure"),
    "superhero movie": ("Action", "Fantasy"), "superhero": ("Action", "Fantasy"),
    "space western": ("Sci-Fi", "Western"), "science fiction western": ("Sci-Fi", "Western"),
    # fantasy, adventure, action
    "fairy tale": ("Fantasy", "Family"), "sword and sorcery": ("Fantasy", "Adventure"),
    "sword and sorcery films": ("Fantasy", "Adventure"), "swashbuckler films": ("Adventure", "Action"),
    "jungle movie": ("Adventure",), "road movie": ("Adventure", "Drama"), "chase movie": ("Action",),
    "martial arts film": ("Action",), "wuxia": ("Action", "Fantasy"), "disaster": ("Action", "Thriller"),
    "epic": ("Historical",), "historical epic": ("Historical",), "sword and sandal": ("Historical", "Action"),
    # history and biography
    "period piece": ("Historical",), "costume drama": ("Historical", "Drama"), "biography": ("Historical",),
    "biopic [feature]": ("Historical",), "docudrama": ("Historical", "Drama"),
    # war
    "combat films": ("War",), "anti-war": ("War",), "anti-war film": ("War",), "cold war": ("Thriller",),
    # comedy and satire
    "slapstick": ("Comedy",), "parody": ("Satire", "Comedy"), "spoof": ("Satire", "Comedy"),
    "mockumentary": ("Satire", "Comedy"), "buddy film": ("Comedy",), "gross out": ("Comedy",),
    "stoner film": ("Comedy",), "black comedy": ("Comedy", "Satire"), "tragicomedy": ("Comedy", "Drama"),
    # music
    "music": ("Musical",), "dance": ("Musical",), "operetta": ("Musical",), "backstage musical": ("Musical",),
    "singing cowboy": ("Western", "Musical"),
    # sports
    "boxing": ("Sports",), "baseball": ("Sports",), "horse racing": ("Sports",), "auto racing": ("Sports",),
    "extreme sports": ("Sports",),
    # drama without the word
    "melodrama": ("Drama",), "tragedy": ("Drama",), "coming of age": ("Drama",),
    "social problem film": ("Drama",), "animal picture": ("Family",), "christmas movie": ("Family",),
    "holiday film": ("Family",),
    # Look of the film, origin, format or audience: no story genre. Listed so they are not guessed at.
    "world cinema": (), "black-and-white": (), "indie": (), "silent film": (), "short film": (),
    "animation": (), "bollywood": (), "japanese movies": (), "film adaptation": (), "teen": (),
    "cult": (), "lgbt": (), "gay": (), "television movie": (), "art film": (), "experimental film": (),
    "stop motion": (), "anime": (), "ensemble film": (), "b-movie": (), "remake": (), "sequel": (),
    "computer animation": (), "americana": (), "culture & society": (), "erotica": (), "avant-garde": (),
}

# Keyword rules for every corpus genre not in the table, tried in this order on the lower-cased
# name (whole words): "Romantic comedy" -> Comedy, Romance; "Crime Thriller" -> Thriller, Crime.
GENRE_KEYWORDS: tuple[tuple[str, str], ...] = (
    (r"science fiction|sci-fi|sci fi", "Sci-Fi"),
    (r"western", "Western"),
    (r"horror", "Horror"),
    (r"satire|satirical", "Satire"),
    (r"comedy|comedies", "Comedy"),
    (r"musical", "Musical"),
    (r"thrillers?", "Thriller"),
    (r"mystery|mysteries", "Mystery"),
    (r"crime", "Crime"),
    (r"fantasy", "Fantasy"),
    (r"adventure", "Adventure"),
    (r"action", "Action"),
    (r"war", "War"),
    (r"romance|romantic", "Romance"),
    (r"sports?", "Sports"),
    (r"family|children's|children", "Family"),
    (r"historical|history|biographical|biopic", "Historical"),
    (r"drama", "Drama"),
)
_KEYWORD_PATTERNS = tuple((re.compile(rf"(?<![\w-])(?:{p})(?![\w])"), g) for p, g in GENRE_KEYWORDS)

# Non-fiction: no story to play through.
NON_FICTION_GENRES: frozenset[str] = frozenset({
    "documentary", "concert film", "rockumentary", "educational", "nature", "travel", "news",
    "instrumental music", "sports documentary",
})


def map_genre(cmu_genre: str) -> tuple[str, ...]:
    """The NCP genres one corpus genre speaks for (often none: "World cinema", "Black-and-white")."""
    key = " ".join(cmu_genre.lower().split())
    if key in GENRE_TABLE:
        return GENRE_TABLE[key]
    out: list[str] = []
    for pattern, genre in _KEYWORD_PATTERNS:
        if pattern.search(key) and genre not in out:
            out.append(genre)
    return tuple(out)


def primary_secondary(cmu_genres: Sequence[str]) -> tuple[str, ...]:
    """The two NCP genres that best describe a movie (fewer when the corpus says too little).

    Each corpus genre votes for the NCP genres it maps to; most votes first. Drama is the corpus's
    catch-all (half of all movies carry it), so on a tie the more specific genre wins; remaining ties
    go to the genre named first.
    """
    votes: Counter[str] = Counter()
    first: dict[str, int] = {}
    for i, name in enumerate(cmu_genres):
        for genre in map_genre(name):
            votes[genre] += 1
            first.setdefault(genre, i)
    ranked = sorted(votes, key=lambda g: (-votes[g], g == "Drama", first[g]))
    return tuple(ranked[:2])


# --- reading the corpus --------------------------------------------------------------------------


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


# --- cleaning ------------------------------------------------------------------------------------

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


# --- selection -----------------------------------------------------------------------------------


def select_diverse(candidates: Sequence[Candidate], count: int) -> list[Candidate]:
    """Greedy, deterministic selection of ``count`` candidates that spreads over genres and pairs.

    Each pick maximises, in order: genres not yet covered by any pick; fewest earlier picks with the
    same (unordered) genre pair, so every pair is taken once before any is taken twice; least-used
    genres; then, within a pair, the longest plot (the most detailed synopsis) and the lowest id.
    Everything before the plot length depends only on the pair, so each step compares pairs, not
    candidates: fast on the full corpus.
    """
    by_pair: dict[tuple[str, str], list[Candidate]] = {}
    for c in candidates:
        by_pair.setdefault(_pair(c), []).append(c)
    for group in by_pair.values():
        # Best last, so the next pick of a pair is a pop().
        group.sort(key=lambda c: (c.plot_words, _negated_id(c.movie_id)))
    usage: Counter[str] = Counter()
    taken: Counter[tuple[str, str]] = Counter()
    picked: list[Candidate] = []
    while len(picked) < count and by_pair:
        def score(pair: tuple[str, str]) -> tuple:
            best = by_pair[pair][-1]
            return (sum(1 for g in pair if usage[g] == 0), -taken[pair], -(usage[pair[0]] + usage[pair[1]]),
                    best.plot_words, _negated_id(best.movie_id))

        pair = max(by_pair, key=score)
        choice = by_pair[pair].pop()
        if not by_pair[pair]:
            del by_pair[pair]
        picked.append(choice)
        taken[pair] += 1
        usage.update(pair)
    return picked


def _pair(c: Candidate) -> tuple[str, str]:
    a, b = sorted(c.genres)
    return (a, b)


def _negated_id(movie_id: str) -> tuple:
    # Larger is better in select_diverse's max(): lower ids must compare larger.
    kind, value = _id_order(movie_id)
    return (-kind, -value) if isinstance(value, int) else (-kind, tuple(-ord(ch) for ch in value))


@dataclass
class ImportReport:
    read_plots: int
    read_movies: int
    read_character_rows: int
    dropped: Counter[str]
    mismatched_characters: int
    cleaned: int
    selected: list[Candidate]
    warnings: list[str]

    def coverage(self) -> Counter[str]:
        return Counter(g for c in self.selected for g in c.genres)

    def summary(self) -> str:
        lines = [f"read: {self.read_plots} plot(s), {self.read_movies} movie(s), "
                 f"{self.read_character_rows} character row(s)"]
        total = sum(self.dropped.values())
        lines.append(f"dropped: {total}")
        for reason, label in DROP_REASONS.items():
            if self.dropped[reason]:
                lines.append(f"  {self.dropped[reason]:>6}  {reason}: {label}")
        lines.append(f"character-movie mismatches: {self.mismatched_characters} named character(s) not "
                     "mentioned in their movie's plot (never chosen as the player)")
        lines.append(f"cleaned: {self.cleaned} candidate(s); selected: {len(self.selected)}")
        cov = self.coverage()
        pairs = {_pair(c) for c in self.selected}
        lines.append(f"genre coverage: {len(cov)}/{len(GENRES)} genres, {len(pairs)} distinct genre pair(s)")
        if cov:
            lines.append("  " + ", ".join(f"{g} {cov[g]}" for g in GENRES if cov[g]))
        missing = [g for g in GENRES if not cov[g]]
        if missing:
            lines.append("  not covered: " + ", ".join(missing))
        if self.warnings:
            lines.append(f"warnings: {len(self.warnings)}")
            lines.extend(f"  {w}" for w in self.warnings[:10])
            if len(self.warnings) > 10:
                lines.append(f"  ... and {len(self.warnings) - 10} more")
        return "\n".join(lines)


def import_cmu(plots: str | Path, movies: str | Path, characters: str | Path, *,
               count: int = DEFAULT_COUNT, min_words: int = DEFAULT_MIN_WORDS) -> ImportReport:
    corpus = read_corpus(plots, movies, characters)
    cleaned = clean(corpus, min_words=min_words)
    return ImportReport(
        read_plots=len(corpus.plots), read_movies=len(corpus.movies),
        read_character_rows=corpus.character_rows, dropped=cleaned.dropped,
        mismatched_characters=cleaned.mismatched_characters, cleaned=len(cleaned.candidates),
        selected=select_diverse(cleaned.candidates, count), warnings=corpus.warnings,
    )


def write_candidates(path: str | Path, candidates: Iterable[Candidate]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for c in candidates:
            out.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
    tmp.replace(path)


def read_candidates(path: str | Path) -> list[Candidate]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from None
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(Candidate.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise CorpusError(f"{path}:{lineno}: not a candidate line ({type(exc).__name__}: {exc}); "
                              "candidate files are written by `ncp specs import-cmu`") from None
    return out


# --- drafting ------------------------------------------------------------------------------------

DRAFT_STEP = "spec_draft"
# Spec fields the command fills from what it already knows (or leaves to people: world_rules); the
# model writes the rest.
OWN_FIELDS: tuple[str, ...] = ("id", "title", "source", "genres", "review", "world_rules")
# Lint rules about facts only the person drafting knows; the model is not asked to fix them.
AUTHOR_RULES: tuple[str, ...] = ("missing-public-domain",)
PROSE_FIELDS: tuple[tuple[str, ...], ...] = (("player", "briefing"), ("synopsis",))
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
# JSON-Schema keywords that strict structured outputs reject or that only restate what validation
# checks anyway (the validator, not the decoder, is the judge: its messages name the field).
_UNSTRICT_KEYWORDS = frozenset({"title", "default", "pattern", "minLength", "maxLength", "minItems", "maxItems",
                                "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


@dataclass(frozen=True)
class DraftRequest:
    spec_id: str
    title: str
    year: int
    character: str
    synopsis: str
    genres: tuple[str, str] | None = None  # None: the model chooses
    medium: str = "film"
    public_domain: str | None = None  # source.public_domain; the person drafting knows it, not the model


def slug(text: str) -> str:
    s = "-".join(re.sub(r"[^a-z0-9]+", " ", title_key(text).encode("ascii", "ignore").decode()).split())[:64]
    s = s.strip("-")
    return s if s[:1].isalpha() else f"spec-{s}".strip("-")


def check_spec_id(spec_id: str) -> str | None:
    """Why ``spec_id`` cannot be a spec id, or None."""
    if not _ID.match(spec_id) or len(spec_id) > 64:
        return (f"{spec_id!r} is not a valid spec id (a letter, then letters, digits, '_', '.' or '-'; at most "
                "64 characters): name the output file after the id, e.g. specs/my-film.yaml")
    return None


def parse_genres(text: str) -> tuple[str, str]:
    """``"Horror,Mystery"`` -> ("Horror", "Mystery"); ValueError naming the valid genres otherwise."""
    lookup = {g.lower(): g for g in GENRES}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p.lower() not in lookup]
    if unknown or len(parts) != 2 or parts[0].lower() == parts[1].lower():
        raise ValueError(f"--genres needs two different genres from: {', '.join(GENRES)} (got {text!r})")
    return (lookup[parts[0].lower()], lookup[parts[1].lower()])


def draft_schema(*, with_genres: bool = False) -> dict[str, Any]:
    """The strict JSON schema of a draft answer, derived from the spec models.

    Deriving it (instead of writing it by hand) keeps it in step with spec.py: a new spec field shows
    up here. Strict structured outputs need every property required, no additional properties and no
    ``$ref``; optional fields stay nullable (``before``/``after``) or may be empty lists.
    """
    from .spec import NarrativeSpec

    full = NarrativeSpec.model_json_schema()
    defs = full.get("$defs", {})

    def strict(node: Any) -> Any:
        if isinstance(node, list):
            return [strict(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return strict(defs[node["$ref"].rsplit("/", 1)[-1]])
        out = {k: strict(v) for k, v in node.items() if k not in _UNSTRICT_KEYWORDS and k != "$defs"}
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    properties = {k: strict(v) for k, v in full["properties"].items() if k not in OWN_FIELDS}
    if with_genres:
        properties = {"genres": {"type": "array", "items": {"type": "string", "enum": list(GENRES)},
                                 "description": "Primary and secondary genre (two different ones)."},
                      **properties}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def draft_response_format(request: DraftRequest) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {
        "name": DRAFT_STEP, "schema": draft_schema(with_genres=request.genres is None), "strict": True}}


def draft_messages(request: DraftRequest, *, problems: Sequence[str] = (), previous: str | None = None,
                   template: str | Path = "spec_draft") -> list[dict[str, str]]:
    """Chat messages asking for a draft; on a retry they carry the previous draft and its problems."""
    from .prompts import render

    return render(template, default_role="user", request=request, genres_list=GENRES,
                  problems=list(problems), previous=previous)


def parse_draft_answer(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The model's JSON answer as a dict, or None and the problem to tell it."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, re.S)
    if fenced:  # models without structured output often wrap JSON in a code fence
        stripped = fenced.group(1)
    try:
        answer = json.loads(stripped)
    except ValueError as exc:
        return None, [f"the answer is not valid JSON ({exc}); answer with one JSON object only"]
    if not isinstance(answer, dict):
        return None, [f"the answer must be a JSON object with the spec fields, got {type(answer).__name__}"]
    return answer, []


def assemble_spec(request: DraftRequest, answer: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as data, in the field order of the bundled specs, marked as a draft for review.

    Fields the command knows (id, title, source, the given genres) are never taken from the model.
    """
    genres = list(request.genres) if request.genres else answer.get("genres")
    data: dict[str, Any] = {
        "id": request.spec_id, "title": request.title,
        "source": {"work": request.title, "year": request.year, "medium": request.medium,
                   **({"public_domain": request.public_domain} if request.public_domain else {})},
        "genres": genres,
    }
    for key in ("player", "synopsis", "initial_facts", "commitments", "trajectory", "scripted_inputs"):
        if key in answer:
            data[key] = answer[key]
    # Unknown keys are kept so validation reports them to the model instead of their vanishing.
    for key, value in answer.items():
        if key not in data and key not in OWN_FIELDS:
            data[key] = value
    for commitment in data.get("commitments") or []:
        if isinstance(commitment, dict):
            # Strict schemas make every field present; absent optional fields read better than nulls.
            for opt in ("before", "after"):
                if opt in commitment and commitment[opt] is None:
                    del commitment[opt]
            if commitment.get("depends_on") == []:
                del commitment["depends_on"]
    data["review"] = {"status": "draft"}
    return _normalise_prose(data)


def _normalise_prose(data: dict[str, Any]) -> dict[str, Any]:
    """Re-flow the long prose fields: whitespace collapsed, one newline between paragraphs.

    That is exactly what a folded block scalar (``>``) can hold, so the file reads like the bundled
    specs and the value loaded back from it is the value that was validated.
    """
    for path in PROSE_FIELDS:
        holder: Any = data
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(path[-1]), str):
            paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", holder[path[-1]])]
            text = "\n".join(p for p in paragraphs if p)
            holder[path[-1]] = text + "\n" if text else ""
    return data


# --- YAML rendering ------------------------------------------------------------------------------

WIDTH = 100


def _scalar(value: Any, *, flow: bool = False) -> str:
    """One YAML scalar: plain when that reads back as the same string, double-quoted otherwise."""
    import yaml

    if value is None:
        return "null"
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    text = str(value)
    special = ",[]{}" if flow else ""
    plain = (
        text == text.strip() and text and "\n" not in text and ": " not in text and " #" not in text
        and not text.endswith(":") and text[0] not in "-?:,[]{}#&*!|>'\"%@`" and not any(c in text for c in special)
        and all(c.isprintable() for c in text)
    )
    if plain:
        try:
            plain = yaml.safe_load(text) == text
        except yaml.YAMLError:
            plain = False
    # A JSON string is a valid YAML double-quoted scalar (YAML's escapes are a superset of JSON's).
    return text if plain else json.dumps(text, ensure_ascii=False)


def _folded(text: str, indent: int) -> str:
    pad = " " * indent
    lines: list[str] = []
    for i, paragraph in enumerate(text.rstrip("\n").split("\n")):
        if i:
            lines.append("")
        lines.extend(pad + line for line in textwrap.wrap(paragraph, WIDTH - indent, break_long_words=False,
                                                         break_on_hyphens=False))
    return ">\n" + "\n".join(lines)


def _prose(text: Any, indent: int) -> str:
    if isinstance(text, str) and text.strip() and text.endswith("\n") and "\n\n" not in text:
        return _folded(text, indent)
    return _scalar(text)


def _flow_list(items: Any) -> str:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return _scalar(items) if not isinstance(items, (list, dict)) else json.dumps(items, ensure_ascii=False)
    return "[" + ", ".join(_scalar(i, flow=True) for i in items) + "]"


def render_spec_yaml(data: Mapping[str, Any]) -> str:
    """A readable spec file (the layout of specs/caligari.yaml) that loads back to exactly ``data``.

    When some value cannot be laid out this way (an unexpected type from a model), the whole file
    falls back to ``yaml.safe_dump``: less pretty, still exact.
    """
    import yaml

    try:
        text = _layout(data)
        if yaml.safe_load(text) == data:
            return text
    except (yaml.YAMLError, TypeError, AttributeError, KeyError):
        pass
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=WIDTH)


def _layout(data: Mapping[str, Any]) -> str:
    out: list[str] = []
    done: set[str] = set()

    def put(key: str, rendered: str, blank_before: bool = False) -> None:
        if blank_before:
            out.append("")
        out.append(f"{key}: {rendered}" if not rendered.startswith("\n") else f"{key}:{rendered}")
        done.add(key)

    for key in ("id", "title"):
        if key in data:
            put(key, _scalar(data[key]))
    if isinstance(data.get("source"), dict):
        out.append("source:")
        out.extend(f"  {k}: {_scalar(v)}" for k, v in data["source"].items())
        done.add("source")
    if "genres" in data:
        put("genres", _flow_list(data["genres"]))
    player = data.get("player")
    if isinstance(player, dict):
        out += ["", "player:"]
        for k, v in player.items():
            out.append(f"  {k}: {_prose(v, 4) if k == 'briefing' else _scalar(v)}")
        done.add("player")
    if "synopsis" in data:
        put("synopsis", _prose(data["synopsis"], 2), blank_before=True)
    facts = data.get("initial_facts")
    if isinstance(facts, list) and all(isinstance(f, dict) for f in facts):
        out += ["", "initial_facts:"]
        for f in facts:
            out.append("  - {" + ", ".join(
                f"{k}: {json.dumps(v, ensure_ascii=False) if k == 'text' and isinstance(v, str) else _scalar(v, flow=True)}"
                for k, v in f.items()) + "}")
        done.add("initial_facts")
    for key in ("commitments", "trajectory"):
        items = data.get(key)
        if isinstance(items, list) and all(isinstance(i, dict) and i for i in items):
            out += ["", f"{key}:"]
            for item in items:
                for n, (k, v) in enumerate(item.items()):
                    lead = "  - " if n == 0 else "    "
                    rendered = _flow_list(v) if isinstance(v, list) else _scalar(v)
                    if k == "text":
                        rendered = json.dumps(v, ensure_ascii=False) if isinstance(v, str) else rendered
                    out.append(f"{lead}{k}: {rendered}")
            done.add(key)
    inputs = data.get("scripted_inputs")
    if isinstance(inputs, list):
        out += ["", "scripted_inputs:" + ("" if inputs else " []")]
        out.extend(f"  - {json.dumps(i, ensure_ascii=False) if isinstance(i, str) else _scalar(i)}" for i in inputs)
        done.add("scripted_inputs")
    rest = {k: v for k, v in data.items() if k not in done and k != "review"}
    if rest:
        import yaml

        out += ["", yaml.safe_dump(rest, sort_keys=False, allow_unicode=True, width=WIDTH).rstrip("\n")]
    if "review" in data:
        out += ["", review_block(data["review"]).rstrip("\n")]
    return "\n".join(out) + "\n"


# --- review --------------------------------------------------------------------------------------


class ReviewEditError(Exception):
    """The review block cannot be written without touching the rest of the file."""


def review_block(review: Mapping[str, Any]) -> str:
    """``review: {status: draft}`` for drafts, a block mapping once someone has signed it."""
    if set(review) <= {"status"}:
        return "review: {" + ", ".join(f"{k}: {_scalar(v, flow=True)}" for k, v in review.items()) + "}\n"
    return "review:\n" + "".join(f"  {k}: {_scalar(v)}\n" for k, v in review.items())


def set_review(text: str, review: Mapping[str, Any]) -> str:
    """``text`` with its top-level ``review`` block replaced by ``review`` (appended when absent).

    Only the lines of the old block change: every other byte of the file stays as it was (comments,
    quoting, layout). The result is loaded back and compared with the intended data before it is
    returned, so a file this cannot edit safely raises ReviewEditError instead of being damaged.
    """
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ReviewEditError(f"{where}invalid YAML ({getattr(exc, 'problem', None) or exc}): fix it first") from None
    if not isinstance(root, yaml.MappingNode) or root.flow_style or not isinstance(data, dict):
        raise ReviewEditError("a spec file must be a block mapping of fields (id: ..., title: ...)")
    newline = "\r\n" if "\r\n" in text else "\n"
    block = review_block(review).replace("\n", newline)
    for key, value in root.value:
        if key.value == "review":
            start = key.start_mark.index - key.start_mark.column
            end = _line_end(text, _content_end(value))
            new = text[:start] + block + text[end:]
            break
    else:
        end = _line_end(text, _content_end(root)) if root.value else len(text)
        head = text[:end]
        if head and not head.endswith("\n"):
            head += newline
        new = head + (newline if head.strip() else "") + block + text[end:]
    expected = {**data, "review": dict(review)}
    try:
        reloaded = yaml.safe_load(new)
    except yaml.YAMLError:
        reloaded = None
    if reloaded != expected:
        raise ReviewEditError("the review block could not be replaced without changing other fields "
                              "(unusual layout around `review:`); edit it by hand")
    return new


def _content_end(node: Any) -> Any:
    """Mark just after the last character of a node's content (block collections end later, at the
    next token, which may sit after comments and blank lines that belong to what follows)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1])
    return node.end_mark


def _line_end(text: str, mark: Any) -> int:
    """Offset just past the line holding ``mark`` (a mark at column 0 already starts the next line)."""
    if mark.column == 0 and mark.index > 0:
        return mark.index
    nl = text.find("\n", mark.index)
    return len(text) if nl < 0 else nl + 1


def outline(spec: NarrativeSpec) -> str:
    """A short outline for a reviewer: who the player is, what is in the spec, the plot steps."""
    kinds = Counter(c.kind for c in spec.commitments)
    src = spec.source
    lines = [
        f"{spec.id}: {spec.title} ({src.medium}, {src.year}; {spec.genres[0]} / {spec.genres[1]})",
        f"player: {spec.player.name}",
        f"{len(spec.initial_facts)} initial fact(s), {len(spec.commitments)} commitment(s) ("
        + ", ".join(f"{kinds[k]} {k}" for k in ("invariant", "ordering", "achievement")) + "), "
        f"{len(spec.trajectory)} trajectory node(s), {len(spec.scripted_inputs)} scripted input(s)",
        "nodes:",
    ]
    lines += [f"  {i}. {n.id}: {n.description}" for i, n in enumerate(spec.trajectory, 1)]
    r = spec.review
    if r is None:
        lines.append("review: none")
    elif r.status == "reviewed":
        lines.append(f"review: reviewed by {r.reviewer or '?'} on {r.date or '?'}" + (f": {r.notes}" if r.notes else ""))
    else:
        lines.append("review: draft (not yet reviewed)")
    return "\n".join(lines)


def spec_problems(text: str, path: str) -> tuple[NarrativeSpec | None, list[str]]:
    """Validation problems, or (when the spec is valid) lint findings, as ``path:line: ...`` lines."""
    from .lint import lint_spec
    from .spec import SpecError, parse_spec

    try:
        spec = parse_spec(text, path)
    except SpecError as exc:
        return None, [str(p) for p in exc.problems]
    return spec, [str(f) for f in lint_spec(spec)]


def draft_problems(text: str, path: str, request: DraftRequest) -> list[str]:
    """Everything wrong with a rendered draft that the model can fix: validation, lint, the player it must be."""
    spec, problems = spec_problems(text, path)
    problems = [p for p in problems if not any(f": {rule}: " in p for rule in AUTHOR_RULES)]
    if spec is not None:
        wanted = {p.casefold() for p in name_parts(request.character) or [request.character]}
        got = {p.casefold() for p in name_parts(spec.player.name) or [spec.player.name]}
        if not wanted & got:
            line = spec.line_of("player", "name")
            problems.insert(0, f"{path}:{line}: player.name: the player must be {request.character!r} "
                               f"(got {spec.player.name!r}); write the spec from that character's point of view")
    return problems
