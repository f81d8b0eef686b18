"""Secrets out of text that may reach traces, results, cassettes or error messages.

Stdlib only: ``config`` (results.json's api_base), the model client, cassettes and stored failures use it.
"""

from __future__ import annotations

import os
import re

# (pattern, replacement): key-shaped tokens go whole; after a header or field name, only the value.
_KEY_PATTERNS = [
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"), "***"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{6,}"), r"\1***"),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"), r"\1***"),
    # Credentials in URL queries (``?key=AIza...``, ``&token=ghp_...``), whatever their shape.
    (re.compile(r"(?i)([?&;](?:key|api[_-]?key|apikey|token|access[_-]?token|auth|secret|client[_-]?secret|"
                r"password|pass|pwd|sig|signature|code)=)[^&#\s\"'<>]+"), r"\1***"),
    # Well-known key shapes: Google (AIza...), GitHub (ghp_..., github_pat_...), Slack (xox.-...).
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), "***"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), "***"),
]


def _secret_values() -> list[str]:
    return [v for k, v in os.environ.items() if v and len(v) >= 6 and re.search(r"(KEY|TOKEN|SECRET)", k)]


def scrub(text: str, extra: tuple[str, ...] = ()) -> str:
    """Remove API keys and auth headers from text that may reach traces, results or errors."""
    for value in (*extra, *_secret_values()):
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    for pattern, replacement in _KEY_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
