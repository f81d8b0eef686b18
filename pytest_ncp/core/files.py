"""Files that are never seen half-written: results.json, reviews.json, cassettes, specs, stored failures."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never part of one.

    The text goes to a temporary file beside ``path`` (the rename stays on one file system), is flushed
    and fsynced, then replaces ``path`` in one ``os.replace``; the temporary file is removed when
    anything fails, a KeyboardInterrupt included. The parent directory is created. The file gets the
    usual permissions (the umask's), and the text is written as it is (no newline translation).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding=encoding, newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
