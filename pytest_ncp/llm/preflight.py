"""Is an endpoint there at all? ``ncp doctor``'s first check, and the run's preflight.

A broken endpoint (a server that is not running, a wrong ``--api-base``, a key it refuses) would otherwise
fail every call of every episode, each with its own error: hundreds of identical lines after a run that
spent its time retrying. Before episodes start, ``ncp run`` and the pytest session probe each distinct
endpoint the run will really call once (``GET {base}/models``: cheap, no tokens) and stop in seconds with
one message naming every broken (role, model, endpoint).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable, Literal

from ..core.redact import scrub
from .client import EndpointError, endpoint_label, get_models

# ok: it answered the model list; answers: it answered, not with a model list (still a server: the calls decide);
# refused: it answered 401/403 (the key); unreachable: no answer at all; skipped: not an OpenAI-compatible endpoint.
ProbeStatus = Literal["ok", "answers", "refused", "unreachable", "skipped"]
REFUSING = (401, 403)


@dataclass(frozen=True)
class Probe:
    status: ProbeStatus
    endpoint: str                 # host:port (never credentials)
    text: str                     # what was found, and the fix when it is broken
    models: tuple[str, ...] = ()  # the ids it listed
    seconds: float = 0.0

    @property
    def broken(self) -> bool:
        return self.status in ("refused", "unreachable")


def model_base(api_base: str | None, model: str) -> str | None:
    """The OpenAI-compatible base URL calls for ``model`` go to; None for other providers (no model list)."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if api_base:
        return api_base
    if provider == "openai":
        return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or "https://api.openai.com/v1"
    return None


def probe_endpoint(api_base: str | None, model: str, *, timeout: float = 10, flag: str = "--api-base") -> Probe:
    """``GET {base}/models`` of the endpoint ``model`` is reached at (``flag``: how the front end spells the
    endpoint option, for the fix it suggests)."""
    base = model_base(api_base, model)
    where = endpoint_label(api_base, model)
    if base is None:
        provider = model.split("/", 1)[0]
        return Probe("skipped", where, f"not an OpenAI-compatible endpoint ({provider}); model list skipped")
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    key = os.environ.get("OPENAI_API_KEY") if provider == "openai" else None
    started = time.monotonic()
    try:
        data = get_models(base, api_key=key, timeout=timeout)
    except EndpointError as exc:
        if exc.status in REFUSING:
            return Probe("refused", where, f"{where} refuses the requests (HTTP {exc.status} on GET models) -> check "
                                           "the API key (e.g. OPENAI_API_KEY) for this endpoint")
        if exc.status is not None:
            return Probe("answers", where, f"{where} answers, but GET models gave HTTP {exc.status}; the model list "
                                           "is not checked")
        if exc.not_json:
            return Probe("answers", where, f"{where} answers GET models with something that is not JSON; is "
                                           f"{flag} the OpenAI-compatible base (ending in /v1)?")
        return Probe("unreachable", where, scrub(f"cannot reach {where} ({exc.reason}) -> start the server, or set "
                                                 f"{flag} to its URL (e.g. http://127.0.0.1:8080/v1)"))
    ids = tuple(str(m.get("id")) for m in (data.get("data") or []) if isinstance(m, dict)) \
        if isinstance(data, dict) else ()
    return Probe("ok", where, f"{where} answers", ids, time.monotonic() - started)


def preflight(calls: Iterable[tuple[str, str]], api_base: str | None, *, timeout: float = 10,
              flag: str = "--api-base") -> list[str]:
    """Probe each distinct endpoint of ``calls`` ((role, model) the run will make) once; one line per broken
    (role, model, endpoint), empty when every endpoint answers."""
    probes: dict[tuple[str | None, str], Probe] = {}
    problems: list[str] = []
    for role, model in dict.fromkeys(calls):
        base = model_base(api_base, model)
        provider = model.split("/", 1)[0] if "/" in model else "openai"
        key = (base, provider)
        if key not in probes:
            probes[key] = probe_endpoint(api_base, model, timeout=timeout, flag=flag)
        probe = probes[key]
        if probe.broken:
            problems.append(f"{role} {model} at {probe.endpoint}: {probe.text}")
    return problems


__all__ = ["Probe", "ProbeStatus", "model_base", "preflight", "probe_endpoint"]
