"""The one door to models: every model call of the project (narrator, player, auditor, spec drafting).

``ModelClient.complete`` is the door: retries that honour Retry-After, per-endpoint limits, deadlines,
structured-output negotiation, cost, and secrets scrubbed from every error. Behind it, one module per
concern: ``types`` (what a call returns), ``client``, ``request`` (how a request is shaped),
``openai_compat`` (the lean path), ``litellm_path``, ``cassette`` (record / replay), ``batch`` (the providers' Batch APIs) and ``structured``
(asking for JSON and retrying with the problems). litellm and aiohttp are imported on the first call only.
"""

from __future__ import annotations

from ..core.redact import scrub
from .client import AdaptiveLimiter, ModelClient, Transport, brief_error, endpoint_label
from .litellm_path import import_litellm
from .request import merge_system_prompt, request_params, shape_structured
from .types import (
    ROLE_HEADER, STEP_HEADER, Completion, CostCapReached, ModelError, Role, Usage, current_episode, current_usage,
    in_chain,
)

__all__ = [
    "ROLE_HEADER", "STEP_HEADER", "AdaptiveLimiter", "Completion", "CostCapReached", "ModelClient", "ModelError", "Role", "Transport",
    "Usage", "brief_error", "current_episode", "current_usage", "endpoint_label", "import_litellm", "in_chain",
    "merge_system_prompt", "request_params", "scrub", "shape_structured",
]
