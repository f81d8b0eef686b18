"""Documented path of :mod:`pytest_ncp.analysis.reviews` (reviews.json) and :mod:`pytest_ncp.report.review_walk`."""
from .analysis.reviews import *  # noqa: F401,F403
from .report.review_walk import *  # noqa: F401,F403
