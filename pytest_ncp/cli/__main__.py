"""``python -m pytest_ncp.cli``: the ``ncp`` command."""

import sys

from . import main

sys.exit(main())
