"""Pure functions over episode records: results.json, metrics, run comparison and human reviews.

The same numbers come from a live run, a results file or merged shards. Imports core only.
"""
