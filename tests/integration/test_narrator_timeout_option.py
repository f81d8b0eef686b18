"""--ncp-narrator-timeout (and ini ncp_narrator_timeout): a hung narrator fails its episode, the session ends."""

from __future__ import annotations

import pytest

STUCK = '''
import threading

NEVER = threading.Event()


class Narrator:
    def respond(self, player_input, context):
        if context.spec.id == "caligari":
            NEVER.wait()  # stuck in user code for good
        return "The fair is loud."
'''


@pytest.mark.parametrize("how", [["--ncp-narrator-timeout=0.5"], ["-o", "ncp_narrator_timeout=0.5"]],
                         ids=["option", "ini"])
def test_a_hung_narrator_is_a_narrator_error_and_the_session_ends(project, how):
    project.twin("b-spec", title="Second Cabinet")
    project.pytester.makepyfile(stuck=STUCK)
    result = project.run_subprocess("-q", "-k", "episode", *how, narrator="stuck:Narrator")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["caligari: narrator error after turn 0: NarratorTimeout: respond() did not answer "
                                 "within 0.5 s (the narrator timeout*"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 1  # the other spec's episode ran to its end
