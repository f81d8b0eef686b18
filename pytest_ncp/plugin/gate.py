"""The session's verdict as test items: ``ncp::gate[survival]``, ``ncp::gate[error-budget]``, ``ncp::gate[cost-cap]``...

A gate that fails must read red wherever a test does: pytest's last line, ``-rA``, JUnit XML, ``--lf``'s cache,
report-log plugins. So every check of the verdict (``analysis.verdict.decide``, computed once) that the session
asked for, or that did not pass, is reported as one test: passed, or failed with the verdict's own words.

Why reports and not collected items: the verdict can only be decided once every episode has reported, and under
pytest-xdist only the controller sees them all; a collected item would run on some worker, and ``-k``, ``--lf``
or ``--deselect`` could drop it. So nothing is collected: the controller writes the items' reports into the
report stream itself, through the hooks every reporter listens to (``pytest_runtest_logstart`` / ``logreport`` /
``logfinish``), at the end of the test loop (``GateItems`` wraps ``pytest_runtestloop``, inside the terminal's
wrapper so its closing progress counts them) or, when the loop never ran or was interrupted, at session finish.
The same happens with or without xdist, whatever was selected; a verdict over a selection says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

if TYPE_CHECKING:
    from ..analysis.verdict import Part, Verdict
    from .session import NcpSession

GATE_FILE = "ncp"  # the node id's "file": ncp::gate[KIND]


def gate_nodeid(kind: str) -> str:
    return f"{GATE_FILE}::gate[{kind}]"


def shown_parts(verdict: Verdict, *, max_error_rate: float) -> list[Part]:
    """The checks that become items: those asked for (a survival gate, a cost cap, canaries, a baseline, an error
    budget above 0) and any other that did not pass, so a session's exit code is never failing behind green
    tests. Completeness is not an item of its own: a session cut short (``-x``, ``--sw``, Ctrl-C) already reads
    so, and a gate it leaves undecided fails its own item."""
    from ..analysis.verdict import Baseline, Budget, Canaries, Completeness, CostCap, SurvivalGate

    asked = (SurvivalGate, CostCap, Canaries, Baseline)
    return [p for p in verdict.parts if not isinstance(p, Completeness) and (
        p.decision != "passed" or isinstance(p, asked) or (isinstance(p, Budget) and max_error_rate > 0))]


def selection(config: pytest.Config) -> str | None:
    """How the session's tests were narrowed (``-k``, ``-m``, ``--deselect``, ``--lf``), or None for all of them."""
    o = config.option
    said = []
    if getattr(o, "keyword", ""):
        said.append(f"-k {o.keyword!r}")
    if getattr(o, "markexpr", ""):
        said.append(f"-m {o.markexpr!r}")
    if getattr(o, "deselect", None):
        said.append("--deselect " + " ".join(o.deselect))
    if getattr(o, "lf", False):
        said.append("--lf")
    if not said:
        return None
    return f"the verdict judged the episodes of the selected tests only ({', '.join(said)})"


class _Crash:
    def __init__(self, message: str):
        self.message = message


class GateFailure:
    """A gate item's failure: the verdict's lines, the first of them as the short summary's message (pytest takes
    it from ``reprcrash``), written as they are, with no traceback."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.reprcrash = _Crash(lines[0])

    def toterminal(self, tw: Any) -> None:
        for line in self.lines:
            tw.line(line)

    def __str__(self) -> str:
        return "\n".join(self.lines)


def report_items(config: pytest.Config, ncp: NcpSession) -> int:
    """Write the verdict's items into the report stream (once); how many were written."""
    from ..report.verdict import PART_KINDS, part_lines

    verdict = ncp.verdict
    if verdict is None or ncp.gate_items_reported:
        return 0
    ncp.gate_items_reported = True
    hook = config.hook
    parts = shown_parts(verdict, max_error_rate=ncp.settings.max_error_rate)
    for part in parts:
        kind = PART_KINDS[type(part)]
        nodeid = gate_nodeid(kind)
        location = (GATE_FILE, None, f"gate[{kind}]")
        lines = part_lines(part, "session") or [f"ncp {kind}: {part.decision}"]
        if ncp.selection is not None:
            lines.append(ncp.selection)
        failed = part.decision != "passed"
        if failed and part.decision == "undecided":
            lines.append(f"a check that cannot decide is not a pass ({kind}: undecided)")
        properties = [("ncp.check", kind), ("ncp.decision", part.decision)]
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        for when in ("setup", "call", "teardown"):
            outcome: Literal["passed", "failed"] = "failed" if failed and when == "call" else "passed"
            report = pytest.TestReport(nodeid, location, {"ncp": 1}, outcome,
                                       # pytest's own TerminalRepr is private; this one has what reporters read
                                       cast(Any, GateFailure(lines)) if outcome == "failed" else None, when,
                                       user_properties=properties if when == "call" else [])
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
    return len(parts)


class GateItems:
    """Registered on the controller: decides the verdict when the test loop ends and reports its items."""

    def __init__(self, ncp: NcpSession):
        self.ncp = ncp

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside the terminal's wrapper: its final progress counts them
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        result = yield
        ncp = self.ncp
        if session.config.option.collectonly or not ncp.started:
            return result
        # pytest derives its exit status from these counts after the loop; the session's own status (as without
        # the items) is restored at session finish, where the verdict's code is applied as it always was.
        ncp.status_before_items = _status(session)
        ncp.conclude()
        session.testscollected += len(shown_parts(ncp.verdict, max_error_rate=ncp.settings.max_error_rate)) \
            if ncp.verdict is not None else 0
        report_items(session.config, ncp)
        return result


def _status(session: pytest.Session) -> pytest.ExitCode:
    if session.testsfailed:
        return pytest.ExitCode.TESTS_FAILED
    if session.testscollected == 0:
        return pytest.ExitCode.NO_TESTS_COLLECTED
    return pytest.ExitCode.OK
