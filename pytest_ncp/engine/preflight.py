"""Which endpoints a run will really call, checked once before its episodes start (``llm.preflight``).

The auditor always calls its model; a simulated player calls its own; the narrator's model is called by the
built-in narrators (a studio's narrator may call anything, or nothing: its calls are not guessed). Nothing is
probed in the offline demo, nor when cassettes may replay the calls (``none``, or ``once`` / ``new_episodes``
over a cassette folder that already holds recordings): a replayed call reaches no endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.config import RunConfig


def planned_calls(config: RunConfig, narrator_factory: Any = None) -> list[tuple[str, str]]:
    """(role, model) of every kind of live call the run will make."""
    if config.demo or _replayed(config):
        return []
    from .narrators import LLMNarrator

    calls = [("auditor", config.auditor_model)]
    if config.player != "scripted" and config.player_model:
        calls.append(("player", config.player_model))
    if isinstance(narrator_factory, type) and issubclass(narrator_factory, LLMNarrator):
        model = getattr(narrator_factory, "model", None) or config.narrator_model
        if model:
            calls.append(("narrator", str(model)))
    return calls


def _replayed(config: RunConfig) -> bool:
    if config.record_mode is None or config.record_mode == "all":
        return False
    if config.record_mode == "none":
        return True
    folder = Path(config.cassettes) if config.cassettes else None
    return folder is not None and folder.is_dir() and any(folder.iterdir())


def endpoint_problems(config: RunConfig, narrator_factory: Any = None, flag: str = "--api-base") -> list[str]:
    """One line per broken (role, model, endpoint) the run would call; empty when all answer (``flag``: how the
    front end spells the endpoint option)."""
    from ..llm.preflight import preflight

    calls = planned_calls(config, narrator_factory)
    return preflight(calls, config.api_base, timeout=min(10.0, config.timeout), flag=flag) if calls else []


def preflight_message(problems: list[str], where: str = "--api-base") -> str:
    """The one message that stops a run whose endpoints are broken."""
    return ("ncp: the run did not start: " + ("an endpoint it calls is" if len(problems) == 1 else
                                               f"{len(problems)} endpoints it calls are")
            + " broken (checked before any episode):\n  " + "\n  ".join(problems)
            + f"\n  (ncp doctor --model MODEL {where} URL checks one endpoint in detail)")
