"""``ncp specs``: build benchmark specs the way the paper built NCP-Bench.

    ncp specs import-cmu --plots plot_summaries.txt --movies movie.metadata.tsv \\
                         --characters character.metadata.tsv [--count 100] [--out candidates.jsonl]
    ncp specs draft --candidate candidates.jsonl --id ID --model M --out specs/<id>.yaml
    ncp specs draft --synopsis FILE --title T --year Y --character NAME [--genres A,B] --model M ...
    ncp specs review SPEC [--approve --reviewer NAME [--note TEXT] [--force]]

The work is done by pure functions in ``pytest_ncp.authoring``; this module parses options, calls the
model and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import sys
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text
from ..core.options import CALL_OPTIONS
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_options, call_config, positive, usage




def register(sub: Any) -> None:

    p = sub.add_parser("specs", help="build specs: import the CMU corpus, draft specs with a model, review them",
                       description="Build NCP-Bench specs: import-cmu -> draft -> review (docs/specs.md).")
    steps = p.add_subparsers(dest="specs_command", metavar="STEP")
    p.set_defaults(func=lambda args: _help(p))

    q = steps.add_parser(
        "import-cmu", help="clean the CMU Movie Summary Corpus and pick a genre-diverse set of candidates",
        description="Read the CMU Movie Summary Corpus (download it yourself: plot_summaries.txt, "
                    "movie.metadata.tsv and character.metadata.tsv), drop unusable (movie, character) "
                    "candidates, map genres onto the 18 NCP genres and select a genre-diverse subset.")
    q.add_argument("--plots", required=True, metavar="FILE", help="plot_summaries.txt (wiki id <TAB> plot)")
    q.add_argument("--movies", required=True, metavar="FILE", help="movie.metadata.tsv (9 columns)")
    q.add_argument("--characters", required=True, metavar="FILE", help="character.metadata.tsv (13 columns)")
    q.add_argument("--count", type=positive, default=100, help="candidates to select (default 100)")
    q.add_argument("--min-words", type=positive, default=150,
                   help="drop plots shorter than this many words (default 150)")
    q.add_argument("--out", default="candidates.jsonl", metavar="FILE", help="JSON lines (default candidates.jsonl)")
    q.set_defaults(func=cmd_import_cmu)

    d = steps.add_parser(
        "draft", help="draft a spec from a synopsis and a character with a model (validated, linted, retried)",
        description="Ask a model for a spec, validate and lint it, and regenerate it with the problems until "
                    "it is clean or --attempts run out. The file is marked `review: {status: draft}`.")
    src = d.add_argument_group("source (a candidate from import-cmu, or a synopsis file)")
    src.add_argument("--candidate", metavar="FILE", help="candidates.jsonl written by import-cmu")
    src.add_argument("--id", dest="movie_id", metavar="ID", help="movie_id of the candidate to draft")
    src.add_argument("--synopsis", metavar="FILE", help="a text file with the story's synopsis")
    src.add_argument("--title", help="title of the work (with --synopsis)")
    src.add_argument("--year", type=int, help="year of the work (with --synopsis)")
    src.add_argument("--character", metavar="NAME", help="the player character")
    src.add_argument("--genres", metavar="A,B", help="primary,secondary genre (default: the candidate's, or the "
                                                     "model chooses)")
    src.add_argument("--medium", choices=("film", "book", "play"), default="film", help="kind of work")
    src.add_argument("--public-domain", metavar="TEXT",
                     help="source.public_domain: why the work (and any work it adapts) is free to use; without it "
                          "the draft is written but `ncp lint` flags missing-public-domain")
    d.add_argument("--model", required=True, help="litellm model name, e.g. openai/gpt-4o")
    d.add_argument("--api-base", help="OpenAI-compatible endpoint (overrides env vars)")
    d.add_argument("--attempts", type=positive, default=3, help="drafts to try before giving up (default 3)")
    add_options(d, CALL_OPTIONS, "specs draft")
    d.add_argument("--out", metavar="specs/ID.yaml",
                   help="spec file to write; its name is the spec id (default specs/<title-slug>.yaml)")
    d.add_argument("--force", action="store_true", help="overwrite an existing spec file")
    d.set_defaults(func=cmd_draft)

    r = steps.add_parser(
        "review", help="show a spec's problems and outline; --approve records the review in the file",
        description="Print validation and lint findings and an outline. With --approve, record "
                    "`review: {status: reviewed, reviewer, date, checklist, findings, fixes, notes}` in the "
                    "file (only that block changes); refused while there are findings unless --force. The "
                    "checklist is every lint rule (run by this command) plus the --checked items.")
    r.add_argument("spec", metavar="SPEC", help="the spec file")
    r.add_argument("--approve", action="store_true", help="record the review as done")
    r.add_argument("--reviewer", metavar="NAME", help="who reviewed it (required with --approve)")
    r.add_argument("--note", metavar="TEXT", help="review notes to record")
    r.add_argument("--checked", metavar="CHECK", action="append", default=[],
                   help="a check the reviewer made by reading (repeatable): "
                        + ", ".join(_review_checks()))
    r.add_argument("--finding", metavar="TEXT", action="append", default=[],
                   help="what the review found (repeatable; added to the spec's earlier findings)")
    r.add_argument("--fix", metavar="TEXT", action="append", default=[],
                   help="what was changed because of it (repeatable; added to the earlier fixes)")
    r.add_argument("--force", action="store_true", help="approve even with open findings (noted in the file)")
    r.set_defaults(func=cmd_review)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE



# --- import-cmu ----------------------------------------------------------------------------------


def cmd_import_cmu(args: argparse.Namespace) -> int:
    from ..authoring import CorpusError, import_cmu, write_candidates

    try:
        report = import_cmu(args.plots, args.movies, args.characters, count=args.count, min_words=args.min_words)
    except CorpusError as exc:
        return usage(str(exc), "ncp specs")
    write_candidates(args.out, report.selected)
    print(report.summary())
    print(f"candidates: {args.out}")
    if len(report.selected) < args.count:
        print(f"note: only {len(report.selected)} candidate(s) survived cleaning, fewer than --count {args.count}")
    return EXIT_OK


# --- draft ---------------------------------------------------------------------------------------


def cmd_draft(args: argparse.Namespace) -> int:
    from ..authoring import CorpusError, draft_spec
    from ..llm import ModelClient, ModelError

    try:
        request, out = _draft_request(args)
    except (ValueError, CorpusError) as exc:
        return usage(str(exc), "ncp specs")
    if out.exists() and not args.force:
        return usage(f"{out} exists; pass --force to overwrite it, or choose another --out", "ncp specs")
    print(f"drafting {out} ({request.title}, {request.year}; player {request.character}) with {args.model}")
    try:
        client = ModelClient.from_config(call_config(args, api_base=args.api_base))
        text, problems = asyncio.run(draft_spec(client, args.model, request, str(out), attempts=args.attempts,
                                                report=print))
    except ModelError as exc:
        print(f"ncp specs: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if text is None:
        print(f"no valid draft after {args.attempts} attempt(s); problems of the last one:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        print("nothing written: try another --model, more --attempts, or a cleaner synopsis", file=sys.stderr)
        return EXIT_FAILED
    atomic_write_text(out, text)
    print(f"wrote {out} (review: draft). Read it, then: ncp specs review {out} --approve --reviewer NAME")
    if not request.public_domain:
        print(f"note: {out} has no source.public_domain; add why the work is free to use (or pass --public-domain)")
    return EXIT_OK


def _draft_request(args: argparse.Namespace) -> tuple[Any, Path]:
    from ..authoring import DraftRequest, check_spec_id, parse_genres, read_candidates, slug

    genres = parse_genres(args.genres) if args.genres else None
    if args.candidate:
        if args.synopsis:
            raise ValueError("give either --candidate (with --id) or --synopsis, not both")
        candidates = read_candidates(args.candidate)
        if args.movie_id is None:
            if len(candidates) != 1:
                raise ValueError(f"{args.candidate} holds {len(candidates)} candidates: choose one with --id")
            chosen = candidates[0]
        else:
            matches = [c for c in candidates if c.movie_id == args.movie_id]
            if not matches:
                known = ", ".join(c.movie_id for c in candidates[:10]) + (" ..." if len(candidates) > 10 else "")
                raise ValueError(f"no candidate with movie_id {args.movie_id!r} in {args.candidate} (ids: {known})")
            chosen = matches[0]
        title, year, character, synopsis = (args.title or chosen.title, args.year or chosen.year,
                                            args.character or chosen.character, chosen.plot)
        genres = genres or chosen.genres
    elif args.synopsis:
        missing = [o for o, v in (("--title", args.title), ("--year", args.year), ("--character", args.character))
                   if not v]
        if missing:
            raise ValueError(f"--synopsis needs {', '.join(missing)} as well")
        try:
            synopsis = Path(args.synopsis).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"{args.synopsis}: cannot read ({exc.strerror or exc})") from None
        if not synopsis:
            raise ValueError(f"{args.synopsis} is empty")
        title, year, character = args.title, args.year, args.character
    else:
        raise ValueError("say what to draft: --candidate FILE --id ID, or --synopsis FILE --title T --year Y "
                         "--character NAME")
    out = Path(args.out) if args.out else Path("specs") / f"{slug(title)}.yaml"
    problem = check_spec_id(out.stem)
    if problem:
        raise ValueError(problem)
    return DraftRequest(spec_id=out.stem, title=title, year=int(year), character=character, synopsis=synopsis,
                        genres=genres, medium=args.medium, public_domain=args.public_domain), out


# --- review --------------------------------------------------------------------------------------


def cmd_review(args: argparse.Namespace) -> int:
    from ..authoring import ReviewEditError, outline, set_review, spec_problems

    path = Path(args.spec)
    from ..authoring import REVIEW_CHECKS

    if not args.approve and (args.reviewer or args.note or args.force or args.checked or args.finding or args.fix):
        return usage("--reviewer, --note, --checked, --finding, --fix and --force are recorded only with --approve",
                     "ncp specs")
    unknown = [c for c in args.checked if c not in REVIEW_CHECKS]
    if unknown:
        return usage(f"--checked {unknown[0]!r} is not a review check; valid: {', '.join(REVIEW_CHECKS)}", "ncp specs")
    if args.approve and not (args.reviewer and args.reviewer.strip()):
        return usage("--approve needs --reviewer NAME (who is vouching for this spec)", "ncp specs")
    try:
        # Bytes, not read_text(): universal newlines would turn a CRLF file into LF on write-back.
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return usage(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})", "ncp specs")
    spec, findings, notices = spec_problems(text, str(path))
    if spec is not None:
        print(outline(spec))
    print(f"{len(findings)} finding(s)" + (":" if findings else ""))
    for f in findings:
        print(f"  {f}")
    if notices:
        print(f"{len(notices)} notice(s) (not failures):")
        for f in notices:
            print(f"  {f}")
    if not args.approve:
        return EXIT_FAILED if findings else EXIT_OK
    if findings and not args.force:
        print(f"not approved: fix the {len(findings)} finding(s) above, or approve anyway with --force",
              file=sys.stderr)
        return EXIT_FAILED
    from ..lint import RULES

    earlier = spec.review if spec is not None and spec.review is not None else None
    review: dict[str, Any] = {"status": "reviewed", "reviewer": args.reviewer.strip(), "date": _dt.date.today(),
                              "checklist": [*RULES, *dict.fromkeys(args.checked)]}
    for key, new in (("findings", args.finding), ("fixes", args.fix)):
        items = [*(getattr(earlier, key) if earlier else []), *(t.strip() for t in new if t.strip())]
        if items:
            review[key] = items
    notes = (args.note or "").strip()
    if findings:
        notes = (notes + " " if notes else "") + f"[approved with {len(findings)} open finding(s)]"
    if notes:
        review["notes"] = notes
    try:
        new = set_review(text, review)
    except ReviewEditError as exc:
        print(f"ncp specs: error: {path}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    atomic_write_text(path, new)
    print(f"recorded in {path}: reviewed by {review['reviewer']} on {review['date'].isoformat()}")
    return EXIT_OK


def _review_checks() -> list[str]:
    from ..authoring.review import REVIEW_CHECKS

    return list(REVIEW_CHECKS)
