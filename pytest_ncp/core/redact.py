"""Secrets out of text that may reach traces, results, cassettes or error messages.

Stdlib only: ``config`` (results.json's api_base), the model client, cassettes and stored failures use it.
"""

from __future__ import annotations

import os
import re

# (pattern, replacement): key-shaped tokens go whole; after a header, scheme or field name, only the value.
_SCHEMES = r"(?:basic|bearer|digest)"
_KEY_PATTERNS = [
    # Userinfo in any URL (``https://admin:hunter2@proxy/v1``): the whole of it, user name included.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@"), r"\1***@"),
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"), "***"),
    # An authorization scheme keeps its name, never its credential (``Authorization: Basic ***``).
    (re.compile(rf"(?i)((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?{_SCHEMES}\s+)(?!\*\*\*)[^\s\"',}}]{{4,}}"),
     r"\1***"),
    # Elsewhere a credential has a digit or one of = + / _ - in it: "basic validation" is prose, not a header.
    (re.compile(rf"(?i)\b({_SCHEMES})(\s+)(?=[^\s]*[\d=+/_\-])[A-Za-z0-9_\-\.=+/~]{{6,}}"), r"\1\2***"),
    (re.compile(rf"(?i)((?:api[_-]?key|x-api-key|authorization|proxy-authorization|ocp-apim-subscription-key)"
                rf"[\"']?\s*[:=]\s*[\"']?)(?!{_SCHEMES}\s)(?!\*\*\*)[^\s\"',}}]{{4,}}"), r"\1***"),
    # Credentials in URL queries, whatever their shape: any parameter whose name says key, token, secret,
    # password, auth, credential, session or signature (``?key=``, ``&subscription-key=``, ``&sig=``).
    (re.compile(r"(?i)([?&;][\w.\-]*(?:key|token|secret|passw(?:or)?d|pwd|pass|auth|credential|session|"
                r"sig|signature|code)[\w.\-]*=)[^&#\s\"'<>]+"), r"\1***"),
    # Well-known key shapes: Google (AIza...), GitHub (ghp_..., github_pat_...), Slack (xox.-...).
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), "***"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), "***"),
]
_SECRET_NAMES = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIAL|AUTH", re.I)


def _secret_values() -> list[str]:
    return [v for k, v in os.environ.items() if v and len(v) >= 6 and _SECRET_NAMES.search(k)]


_USERINFO = re.compile(r"(?i)^\s*[a-z][a-z0-9+.\-]*://([^/?#@\s]+)@")


def _unquote(text: str) -> str:
    """Percent-decoding (``p%40ss`` -> ``p@ss``), without urllib: this module stays clear of network packages."""
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))
    return raw.decode("utf-8", "replace")


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The user name and password of a URL's userinfo (the values to scrub from any text that may echo
    them, e.g. an HTTP library's exception): ``http://u:pw@host`` -> ("u:pw", "u", "pw"), percent-decoded too."""
    m = _USERINFO.match(url or "")
    if not m:
        return ()
    raw = m.group(1)
    parts = [raw, _unquote(raw), *(_unquote(x) for x in raw.split(":", 1))]
    return tuple(dict.fromkeys(v for v in parts if v and len(v) >= 4))


def scrub(text: str, extra: tuple[str | None, ...] = ()) -> str:
    """Remove API keys, passwords and auth headers from text that may reach traces, results or errors.

    ``extra``: values known to be secret here (the configured key, a URL's userinfo), removed wherever they
    appear, whatever their shape."""
    for value in sorted((v for v in (*extra, *_secret_values()) if v and len(v) >= 4), key=len, reverse=True):
        text = text.replace(value, "***")
    for pattern, replacement in _KEY_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
