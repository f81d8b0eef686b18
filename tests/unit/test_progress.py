from __future__ import annotations

import io

from pytest_ncp.llm import Usage
from pytest_ncp.report.progress import ProgressDisplay
from pytest_ncp.engine.runner import RunProgress


def test_plain_status_when_not_a_terminal():
    progress = RunProgress(total=10, running=3, finished=5, conflicts=2, errors=1, turns=40)
    usage = Usage(prompt_tokens=1200, completion_tokens=34, cost_usd=0.0123)
    out = io.StringIO()
    with ProgressDisplay(progress, usage, stream=out) as display:
        assert display.live is False
    text = out.getvalue()
    assert "5/10 episodes done, 3 running, 2 conflict(s), 1 error(s)" in text
    assert "1,234 tokens, $0.0123" in text and "turns/s" in text


def test_live_bar_on_a_terminal_ends_with_the_status_line():
    progress = RunProgress(total=4, finished=4)
    out = io.StringIO()
    with ProgressDisplay(progress, Usage(), stream=out, live=True):
        pass
    assert out.getvalue().rstrip().endswith("$0.0000")
    assert "4/4 episodes done" in out.getvalue()
