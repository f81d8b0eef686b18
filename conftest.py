"""Repo-level settings shared by tests/ and example_tests/.

The examples need nothing from here: they run offline in any project where pytest-ncp is installed
(each test that uses the ``ncp_model_server`` fixture has its model calls answered by that scripted
server; tests/packaging/test_examples.py runs a copy of example_tests/ without this file).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
