"""Pure functions over episode records: results.json, metrics, run comparison, human reviews, and the
anytime-valid sequential gates (sequential.py, stdlib only).

The same numbers come from a live run, a results file or merged shards. Imports core only.
"""
