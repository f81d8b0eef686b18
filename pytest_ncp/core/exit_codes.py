"""Exit codes, the same for ``ncp`` and ``pytest`` (the README's table); defined here once.

pytest's own codes stay pytest's (4 for bad options); the plugin only adds ``EXIT_ERROR_BUDGET`` and
``EXIT_COST_CAP``. Precedence: 6, then 7, then 1.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1           # the narrator failed: a failing test, the gate below its rate or unable to decide,
                          # a significant regression, the auditor missing canaries
EXIT_GATE_FAILED = EXIT_FAILED
EXIT_USAGE = 2            # ncp: bad options or input, nothing was run
EXIT_ERROR_BUDGET = 6     # too many episodes could not be judged: the run proves nothing either way
EXIT_COST_CAP = 7         # --max-cost cut episodes short: the run is not the one asked for (raise the cap)
EXIT_INTERRUPTED = 130    # Ctrl-C: what finished is kept
