"""Record and replay every model call (narrator, player, auditor) to human-readable cassettes.

A cassette is one YAML file per episode (``<spec>--r<repeat>.yaml``) holding its calls in order,
keyed by role, model, step and the normalised request; the n-th identical request replays the
n-th recording. Modes, as pytest-recording users know them:

- ``none``: replay only; a request with no recording is an error naming the closest recorded one.
- ``once``: replay an existing cassette as ``none`` would; record a missing one from scratch.
- ``new_episodes``: replay what is recorded, record what is not (appended).
- ``all``: call the model every time and re-record the cassette.

Only the request's content and the answer are stored: never API keys, headers or endpoints. The
request passes through the same scrubber as errors; the model's answer is stored verbatim (a
scrubber must never alter narration, or a replay would differ from the recording).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..core.files import atomic_write_text
from ..core.config import RECORD_MODES
from ..core.redact import scrub
from .types import Completion, current_episode
CASSETTE_VERSION = 1


class CassetteMiss(Exception):
    """Replay found no recording for a request (mode ``none`` or an existing cassette in ``once``)."""


def normalise_request(request: dict[str, Any]) -> dict[str, Any]:
    """What identifies a call: whitespace-normalised messages and the settings that change the answer."""
    def text(content: Any) -> Any:
        if isinstance(content, str):
            return re.sub(r"\s+", " ", content).strip()
        return content

    fmt = request.get("response_format") or {}
    return {
        "role": request.get("role"),
        "model": request.get("model"),
        "step": request.get("step"),
        "schema": (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, dict) else None,
        "temperature": request.get("temperature"),
        "messages": [{"role": m.get("role"), "content": text(m.get("content"))} for m in request["messages"]],
    }


def request_key(normalised: dict[str, Any]) -> str:
    blob = json.dumps(normalised, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class _Cassette:
    path: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    existed: bool = False
    dirty: bool = False
    served: dict[str, int] = field(default_factory=dict)  # key -> recordings already replayed


class CassetteTransport:
    """A ``ModelClient.transport`` that records to / replays from cassettes in ``directory``."""

    def __init__(self, mode: str, directory: str | Path,
                 inner: Callable[[dict[str, Any]], Awaitable[Completion]] | None):
        if mode not in RECORD_MODES:
            raise ValueError(f"unknown record mode {mode!r}; valid: {', '.join(RECORD_MODES)}")
        if mode != "none" and inner is None:
            raise ValueError(f"record mode {mode!r} needs a model to call")
        self.mode, self.directory, self.inner = mode, Path(directory), inner
        self._cassettes: dict[str, _Cassette] = {}
        self._lock = threading.Lock()

    def cassette(self, name: str) -> _Cassette:
        with self._lock:
            if name not in self._cassettes:
                path = self.directory / f"{name}.yaml"
                cassette = _Cassette(path)
                if path.exists() and self.mode != "all":
                    cassette.entries = _read(path)
                    cassette.existed = True
                self._cassettes[name] = cassette
            return self._cassettes[name]

    async def __call__(self, request: dict[str, Any]) -> Completion:
        name = current_episode.get() or "_session"
        cassette = self.cassette(name)
        normalised = normalise_request(request)
        key = request_key(normalised)
        replay_only = self.mode == "none" or (self.mode == "once" and cassette.existed)
        if self.mode != "all":
            hit = self._next_recording(cassette, key)
            if hit is not None:
                return _completion(hit, request)
            if replay_only:
                raise CassetteMiss(self._miss_message(cassette, normalised))
        assert self.inner is not None
        completion = await self.inner(request)
        with self._lock:
            cassette.entries.append(_entry(key, normalised, completion))
            cassette.served[key] = cassette.served.get(key, 0) + 1
            cassette.dirty = True
        return completion

    def _next_recording(self, cassette: _Cassette, key: str) -> dict[str, Any] | None:
        with self._lock:
            seen = cassette.served.get(key, 0)
            matches = [e for e in cassette.entries if e["key"] == key]
            if seen < len(matches):
                cassette.served[key] = seen + 1
                return matches[seen]
        return None

    def _miss_message(self, cassette: _Cassette, normalised: dict[str, Any]) -> str:
        wanted = _describe(normalised)
        where = f"cassette {cassette.path}"
        if not cassette.entries:
            return (f"no recording for this {normalised['role']} call ({normalised['step'] or 'chat'}) in {where}"
                    f" (it {'is empty' if cassette.existed else 'does not exist'}); record it with record mode "
                    "'once' or 'new_episodes'")
        best = max(cassette.entries,
                   key=lambda e: difflib.SequenceMatcher(None, _describe(e["request"]), wanted).ratio())
        diff = difflib.unified_diff(_describe(best["request"]).splitlines(), wanted.splitlines(),
                                    "recorded", "requested", n=1, lineterm="")
        shown = "\n".join(list(diff)[:40])
        return (f"no recording matches this {normalised['role']} call ({normalised['step'] or 'chat'}) in {where}; "
                f"the closest recorded request differs:\n{shown}\n(re-record with record mode 'new_episodes' "
                "or 'all')")

    def flush(self) -> None:
        """Write every cassette that changed (atomically, so a crash never leaves half a file).

        ``existed`` keeps meaning "was there when this run started": an episode still recording in
        ``once`` mode must not turn into a replay because another episode's end flushed its file.
        """
        with self._lock:
            for cassette in self._cassettes.values():
                if cassette.dirty:
                    _write(cassette.path, cassette.entries)
                    cassette.dirty = False


def _describe(normalised: dict[str, Any]) -> str:
    lines = [f"role: {normalised['role']}  model: {normalised['model']}  step: {normalised['step']}"]
    for m in normalised["messages"]:
        content = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        lines.append(f"[{m['role']}] {content}")
    return "\n".join(lines)


def _entry(key: str, normalised: dict[str, Any], c: Completion) -> dict[str, Any]:
    # The request (what we sent) is scrubbed; the model's answer is stored verbatim, so a replay returns
    # byte for byte what was recorded. (The key is computed before scrubbing, so replay still matches.)
    clean = json.loads(scrub(json.dumps(normalised, ensure_ascii=False)))
    return {"key": key, "request": clean,
            "response": {"text": c.text, "prompt_tokens": c.prompt_tokens,
                         "completion_tokens": c.completion_tokens, "cost_usd": c.cost_usd,
                         # only when a prompt cache served some: older cassettes stay as they were
                         **({"cached_tokens": c.cached_tokens} if c.cached_tokens else {}),
                         "finish_reason": c.finish_reason}}


def _completion(entry: dict[str, Any], request: dict[str, Any]) -> Completion:
    r = entry["response"]
    return Completion(text=r["text"], model=request["model"], role=request["role"], step=request.get("step"),
                      prompt_tokens=int(r.get("prompt_tokens", 0)), completion_tokens=int(r.get("completion_tokens", 0)),
                      cached_tokens=int(r.get("cached_tokens", 0)), cost_usd=float(r.get("cost_usd", 0.0)),
                      finish_reason=r.get("finish_reason"))


# --- YAML that reads and diffs well: long text as literal blocks ----------------------------------


def _dumper() -> Any:
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML publishes no types
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value or len(value) > 100 else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    import yaml

    # Text is written as it is: a narration with trailing spaces is quoted rather than trimmed, so a
    # replay returns exactly what was recorded.
    text = yaml.dump({"version": CASSETTE_VERSION, "interactions": entries}, Dumper=_dumper(),
                     sort_keys=False, allow_unicode=True, width=100)
    atomic_write_text(path, text)


def _read(path: Path) -> list[dict[str, Any]]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or data.get("version") != CASSETTE_VERSION:
        raise ValueError(f"{path}: not a pytest-ncp cassette (version {CASSETTE_VERSION} expected)")
    return list(data.get("interactions") or [])
