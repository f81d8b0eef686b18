"""Genre mapping: the CMU corpus's free-form genres onto the 18 NCP genres (primary, secondary)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence


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
