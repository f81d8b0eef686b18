"""Know how good the auditor is: a gold-labelled set of turns, scoring against it, and canaries.

- ``goldset``: the case format (calibration/cases/*-v4.yaml on the live specs; the v3 snippets over frozen
  spec copies in calibration/legacy/), loading, ``check``.
- ``scoring``: confusion matrices, precision / recall / F1 with Wilson intervals (pure).
- ``audit``: runs the real ``LLMAuditor`` on gold cases (``ncp calibrate``) and on canaries.
"""
