"""Calls sent through the provider's Batch API (OpenAI's files and batches, through litellm): half the price,
answers within the batch window instead of seconds. For work that waits on nothing (``ncp calibrate --batch``).

``BatchTransport`` is a ``ModelClient`` transport: each call joins the pending batch and waits; once no new call
has come for ``quiet`` seconds (every caller is waiting on one), the pending calls go out as one batch, which is
polled every ``poll`` seconds with a visible status until it ends. Calls that depend on earlier answers (a
conflict's confirmation, a retry) go out in the next batch.

Resumable: every submitted batch is recorded in ``DIR/batches.json`` before it is polled, with the ids of its
calls (a hash of each request, so the same prompts give the same ids). A process killed while a batch ran picks
it up when it asks for the same calls again, instead of sending them twice.

Fails closed: a call the batch gives no answer for (an expired or failed batch, a line in its error file, a
line missing) raises ``ModelError``: an auditor error, never a pass.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .prices import Price, price_of
from .request import request_params
from .types import Completion, ModelError, cached_tokens

BATCH_STATE = "batches.json"
BATCH_WINDOW = 86400.0  # seconds: a provider answers a batch within 24 hours
ENDED = ("completed", "expired", "failed", "cancelled")


@dataclass
class BatchTransport:
    state_dir: Path
    api_base: str | None = None
    api_key: str | None = None
    poll: float = 30.0
    quiet: float = 1.0
    on_status: Callable[[str], None] = print
    _pending: dict[str, tuple[dict[str, Any], dict[str, Any], asyncio.Future[Completion]]] = field(
        default_factory=dict, repr=False)
    _seen: dict[str, int] = field(default_factory=dict, repr=False)
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _flushes: set[asyncio.Task[None]] = field(default_factory=set, repr=False)  # held: the loop keeps weak refs
    _prices: dict[str, Price | None] = field(default_factory=dict, repr=False)
    submitted: list[str] = field(default_factory=list)  # batch ids this process sent or picked up

    @classmethod
    def attach(cls, client: Any, state_dir: Path, *, poll: float, on_status: Callable[[str], None]) -> BatchTransport:
        """Send every call of ``client`` (a ``ModelClient``) through batches recorded in ``state_dir``. A call waits
        for its batch within the batch window, not an HTTP timeout; the caller starts every independent call at
        once (its concurrency), so that each round of them is one batch."""
        transport = cls(state_dir=Path(state_dir), api_base=client.api_base, api_key=client.api_key, poll=poll,
                        quiet=min(1.0, poll), on_status=on_status)
        client.timeout = client.deadline = BATCH_WINDOW
        client.transport = transport
        return transport

    # --- the transport ----------------------------------------------------------------------------
    async def __call__(self, request: dict[str, Any]) -> Completion:
        model = request["model"]
        if not model.startswith("openai/"):
            raise ModelError(f"--batch sends OpenAI-compatible models only (openai/...), not {model}",
                             role=request["role"], model=model)
        body = {**request_params(request), "model": model[len("openai/"):]}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        # Identical requests (samples at a temperature) are told apart by their order: interchangeable answers.
        n = self._seen[digest] = self._seen.get(digest, -1) + 1
        custom_id = f"{digest}-{n}"
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending[custom_id] = (request, body, future)
        self._arm()
        return await future

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self.quiet, self._start_flush)

    def _start_flush(self) -> None:
        task = asyncio.get_running_loop().create_task(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            results = await self._answers(pending)
        except Exception as exc:  # noqa: BLE001 - every waiting call gets the failure, none hangs
            results = {cid: ModelError(f"batch call failed: {type(exc).__name__}: {exc}", role=req["role"],
                                       model=req["model"]) for cid, (req, _, _) in pending.items()}
        for cid, (request, _, future) in pending.items():
            if future.done():
                continue
            answer = results.get(cid) or ModelError("the batch gave no answer for this call", role=request["role"],
                                                    model=request["model"])
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(answer)

    # --- batches ----------------------------------------------------------------------------------
    async def _answers(self, pending: dict[str, Any]) -> dict[str, Completion | ModelError]:
        state = self._state()
        wanted = set(pending)
        jobs = [b for b in state if wanted & set(b["custom_ids"])]  # sent by an earlier process: picked up
        left = wanted - {c for b in jobs for c in b["custom_ids"]}
        if left:
            jobs.append(await self._submit({c: pending[c] for c in sorted(left)}))
        results: dict[str, Completion | ModelError] = {}
        for job in jobs:
            answered = await self._wait(job, pending)
            results.update({k: v for k, v in answered.items() if k in wanted})
        return results

    async def _submit(self, calls: dict[str, Any]) -> dict[str, Any]:
        litellm = _litellm()
        lines = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body})
                        + "\n" for cid, (_, body, _) in calls.items())
        upload = await litellm.acreate_file(file=("batch.jsonl", lines.encode("utf-8"), "application/jsonl"),
                                            purpose="batch", custom_llm_provider="openai", **self._where())
        batch = await litellm.acreate_batch(completion_window="24h", endpoint="/v1/chat/completions",
                                            input_file_id=upload.id, custom_llm_provider="openai", **self._where())
        job = {"id": batch.id, "custom_ids": list(calls)}
        self._save([*self._state(), job])  # before the first poll: a killed process finds it
        self.on_status(f"batch {batch.id}: submitted {len(calls)} call(s)")
        return job

    async def _wait(self, job: dict[str, Any], pending: dict[str, Any]) -> dict[str, Completion | ModelError]:
        litellm = _litellm()
        self.submitted.append(job["id"])
        last = ""
        while True:
            batch = await litellm.aretrieve_batch(job["id"], custom_llm_provider="openai", **self._where())
            counts = getattr(batch, "request_counts", None)
            status = (f"batch {job['id']}: {batch.status}" + (
                f" ({getattr(counts, 'completed', 0)} of {getattr(counts, 'total', 0)} done, "
                f"{getattr(counts, 'failed', 0)} failed)" if counts is not None else ""))
            if status != last:
                self.on_status(status)
                last = status
            if batch.status in ENDED:
                break
            await asyncio.sleep(self.poll)
        results: dict[str, Completion | ModelError] = {}
        why = f"batch {job['id']} ended {batch.status}"
        for file_id in (batch.output_file_id, getattr(batch, "error_file_id", None)):
            if not file_id:
                continue
            content = await litellm.afile_content(file_id=file_id, custom_llm_provider="openai", **self._where())
            for line in content.content.decode("utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    cid = row.get("custom_id")
                    if cid in pending:
                        results[cid] = self._completion(row, pending[cid][0], why)
        for cid in job["custom_ids"]:
            if cid in pending and cid not in results:
                request = pending[cid][0]
                results[cid] = ModelError(f"{why}: no answer for this call (fails closed)", role=request["role"],
                                          model=request["model"])
        return results

    def _completion(self, row: dict[str, Any], request: dict[str, Any], why: str) -> Completion | ModelError:
        response = row.get("response") or {}
        body = response.get("body") or {}
        if response.get("status_code") != 200 or row.get("error"):
            message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
            return ModelError(f"{why}: the call failed in the batch (HTTP {response.get('status_code')}: "
                              f"{message or row.get('error')})", role=request["role"], model=request["model"],
                              status=response.get("status_code"))
        try:
            choice = body["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            return ModelError(f"{why}: an answer without choices[0].message", role=request["role"],
                              model=request["model"])
        usage = body.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cached = min(cached_tokens(usage), prompt)
        price = self._price(request["model"])
        return Completion(text=text, model=request["model"], role=request["role"], step=request.get("step"),
                          prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                          cost_usd=price.batched().cost(prompt, completion, cached) if price else 0.0,
                          finish_reason=choice.get("finish_reason"))

    # --- where, and what was sent -----------------------------------------------------------------
    def _where(self) -> dict[str, Any]:
        base = self.api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        key = self.api_key or os.environ.get("OPENAI_API_KEY") or ("ncp-no-key" if base else None)
        return {k: v for k, v in (("api_base", base), ("api_key", key)) if v}

    def _price(self, model: str) -> Price | None:
        if model not in self._prices:
            self._prices[model] = price_of(model)
        return self._prices[model]

    def _state(self) -> list[dict[str, Any]]:
        path = self.state_dir / BATCH_STATE
        if not path.exists():
            return []
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data.get("batches", []))

    def _save(self, batches: list[dict[str, Any]]) -> None:
        from ..core.files import atomic_write_text

        self.state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.state_dir / BATCH_STATE, json.dumps({"batches": batches}, indent=1) + "\n")


def _litellm() -> Any:
    from .litellm_path import import_litellm

    return import_litellm()
