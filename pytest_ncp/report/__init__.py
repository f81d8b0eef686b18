"""Human-readable output: failure text, transcripts and the run table (no pytest imports here)."""
