"""Selection: a genre-diverse subset of the cleaned candidates, the import report, and candidates files."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.files import atomic_write_text
from ..core.terms import GENRES
from .clean import DEFAULT_MIN_WORDS, DROP_REASONS, Candidate, _id_order, clean
from .corpus import CorpusError, read_corpus

DEFAULT_COUNT = 100


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
        def score(pair: tuple[str, str]) -> tuple[Any, ...]:
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


def _negated_id(movie_id: str) -> tuple[int, int | tuple[int, ...]]:
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
    atomic_write_text(path, "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in candidates))


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
