"""Benchmark specs proven by a reference playthrough (docs/specs.md, "Writing a playthrough").

The loader checks a playthrough when a spec has one; this rule asks for one. A benchmark spec is one with a
``review`` record (the bundled specs under ``specs/`` all carry one); a studio's own spec or a test fixture
without a review record is not asked. The finding is a notice: it is printed and counted but does not fail
``ncp lint`` while the bundled specs are still being given their playthroughs. Once all of them have one,
``PLAYTHROUGH_SEVERITY`` becomes ``"error"``.
"""

from __future__ import annotations

from .core import Context, LintFinding

PLAYTHROUGH_SEVERITY = "notice"

PLAYTHROUGH_RULES: dict[str, str] = {
    "missing-playthrough": "a benchmark spec (one with a review record) has no reference playthrough proving it "
                           "winnable (a notice: printed and counted, exit 0, until every bundled spec has one)",
}


def _missing_playthrough(cx: Context) -> list[LintFinding]:
    spec = cx.spec
    if spec.review is None or spec.playthrough is not None:
        return []
    return [cx.finding("missing-playthrough", ("scripted_inputs",), (
        f"no `playthrough:` for the {len(spec.scripted_inputs)} scripted inputs: write what an ideal narrator "
        "answers to each, with the node it advances and a key-delta quote (docs/specs.md, Writing a playthrough)"),
        PLAYTHROUGH_SEVERITY)]


PLAYTHROUGH_CHECKS = (_missing_playthrough,)
