"""Recall batch jobs: the state machine, background processing at a set rate, and webhook delivery."""
from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .recalls import batch_result
from .vehicles import now_iso

TICK_SECONDS = 0.05
EVENT = "recalls_batch.completed"


@dataclass
class Batch:
    batch_id: str
    numeric_id: int
    owner: str                 # API key, or "" for an x402 submission
    token: str | None          # x402 batch-scoped credential
    vins: list[str]
    webhook_url: str | None
    will_fail: bool = False
    status: str = "uploading"
    processed: int = 0
    created_at: str = field(default_factory=now_iso)
    completed_at: str | None = None
    results: list[dict] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "partial", "failed")

    def job(self) -> dict:
        return {"batchId": self.batch_id, "numericBatchId": self.numeric_id, "status": self.status,
                "totalVins": len(self.vins), "processedVins": self.processed,
                "createdAt": self.created_at, "completedAt": self.completed_at}


class BatchStore:
    def __init__(self, vins_per_second: float, insecure_webhooks: bool, webhook_timeout: float = 5.0):
        self.vins_per_second = vins_per_second
        self.insecure_webhooks = insecure_webhooks
        self.webhook_timeout = webhook_timeout
        self.batches: dict[str, Batch] = {}
        self.by_token: dict[str, str] = {}
        self.idempotent: dict[tuple[str, str], tuple[int, dict]] = {}
        self.deliveries: list[dict] = []
        self._numbers = itertools.count(1001)
        self._tasks: set[asyncio.Task] = set()
        self.vehicles: dict[str, dict] = {}  # per-VIN overrides: a batch counts what /v1/recalls lists

    def create(self, owner: str, vins: list[str], webhook_url: str | None, *, x402: bool, will_fail: bool) -> Batch:
        batch = Batch(batch_id=f"rb_{secrets.token_hex(12)}", numeric_id=next(self._numbers), owner=owner,
                      token=f"bt_{secrets.token_urlsafe(24)}" if x402 else None, vins=vins,
                      webhook_url=webhook_url, will_fail=will_fail)
        self.batches[batch.batch_id] = batch
        if batch.token:
            self.by_token[batch.token] = batch.batch_id
        task = asyncio.get_running_loop().create_task(self._process(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return batch

    def find(self, batch_id: str, *, key: str | None, token: str | None) -> Batch | None:
        """The batch, only if this key owns it or this token was issued for it."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        if token is not None:
            return batch if self.by_token.get(token) == batch_id else None
        return batch if key and batch.owner == key else None

    async def _process(self, batch: Batch) -> None:
        await asyncio.sleep(TICK_SECONDS)  # stays visibly `uploading` for a moment, as the real one does
        batch.status = "processing"
        loop = asyncio.get_running_loop()
        started = loop.time()
        total = len(batch.vins)
        while batch.processed < total:
            await asyncio.sleep(TICK_SECONDS)
            due = min(total, int((loop.time() - started) * self.vins_per_second) + 1)
            if batch.will_fail and due >= total // 2:
                batch.status = "failed"
                break
            batch.results.extend(batch_result(vin, self.vehicles.get(vin)) for vin in batch.vins[batch.processed:due])
            batch.processed = due
        else:
            batch.status = "completed"
        batch.completed_at = now_iso()
        if batch.webhook_url:
            await self._deliver(batch)

    async def _deliver(self, batch: Batch) -> None:
        assert batch.webhook_url is not None  # only a batch with a webhook is delivered
        payload = {"event": EVENT, "batchId": batch.batch_id, "numericBatchId": batch.numeric_id,
                   "status": batch.status, "totalVins": len(batch.vins), "processedVins": batch.processed,
                   "completedAt": batch.completed_at}
        record: dict[str, Any] = {"url": batch.webhook_url, "batchId": batch.batch_id, "payload": payload,
                                  "attemptedAt": now_iso(), "status": None, "error": None}
        if not is_loopback_http(batch.webhook_url):
            record["error"] = "the sandbox delivers webhooks only to loopback receivers (no internet)"
        else:
            try:
                timeout = aiohttp.ClientTimeout(total=self.webhook_timeout)
                async with aiohttp.ClientSession(timeout=timeout) as session:
                    async with session.post(batch.webhook_url, json=payload,
                                            headers={"X-Service-Event": EVENT}) as answer:
                        record["status"] = answer.status
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
        self.deliveries.append(record)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def is_loopback_http(url: str | None) -> bool:
    from urllib.parse import urlsplit
    if not url:
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.hostname in ("127.0.0.1", "localhost", "::1")
