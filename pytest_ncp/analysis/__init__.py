"""Statistical analysis of runs that depends on nothing else in pytest_ncp: plain numbers in, plain numbers out."""
