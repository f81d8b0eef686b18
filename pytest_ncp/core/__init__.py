"""Plain data and file formats: run settings, exit codes, the spec format, the fact ledger, quotes, world
rules, redaction, safe text, traces and atomic files. Imports no other pytest_ncp folder (prompts aside):
no network, no pytest, no model client."""
