"""Recall batches over HTTP: submit (key or x402), status, results and CSV download.

Submit costs one unit per VIN (recalls quota); status, results and download are free.
An `Idempotency-Key` replays the first 202 answer of the same caller and charges nothing;
the replay carries `Idempotent-Replayed: true` (Stripe's convention) so callers can tell.
"""
from __future__ import annotations

import json
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from . import errors
from .batches import is_loopback_http
from .calls import Call, ok
from .vehicles import is_valid_vin

MAX_VINS = 10_000
MAX_CSV_BYTES = 5 * 1024 * 1024


def _invalid() -> errors.ApiError:
    return errors.ApiError(400, errors.BATCH_BODY_INVALID)


def _url_allowed(url: str, insecure: bool) -> bool:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    return insecure and parts.scheme == "http" and is_loopback_http(url)


def _csv_vins(text: str) -> list[str]:
    vins = []
    for line in text.splitlines():
        cell = line.split(",")[0].strip().strip('"').upper()
        if cell and cell != "VIN":
            vins.append(cell)
    return vins


async def _download_csv(url: str, insecure: bool) -> str:
    if not (insecure and is_loopback_http(url)):
        raise errors.ApiError(400, errors.BATCH_CSV_DOWNLOAD.format(
            reason="the sandbox has no internet access (only loopback URLs in insecure mode)"))
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            async with session.get(url) as answer:
                if answer.status != 200:
                    raise errors.ApiError(400, errors.BATCH_CSV_DOWNLOAD.format(reason=f"HTTP {answer.status}"))
                data = await answer.content.read(MAX_CSV_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise errors.ApiError(400, errors.BATCH_CSV_DOWNLOAD.format(reason=type(exc).__name__)) from None
    if len(data) > MAX_CSV_BYTES:
        raise errors.ApiError(400, errors.BATCH_CSV_TOO_LARGE)
    return data.decode("utf-8", "replace")


async def _vins_from_body(body, *, x402: bool, insecure: bool) -> list[str]:
    if not isinstance(body, dict):
        raise _invalid()
    vins_field, csv_text, csv_url = body.get("vins"), body.get("csv"), body.get("csvUrl")
    if x402 and (csv_text or csv_url):
        raise errors.ApiError(400, errors.BATCH_X402_VINS_ONLY)
    vins: list[str] = []
    if vins_field is not None:
        if not isinstance(vins_field, list) or not all(isinstance(v, str) for v in vins_field):
            raise _invalid()
        vins += [v.strip().upper() for v in vins_field]
    if csv_text:
        if not isinstance(csv_text, str):
            raise _invalid()
        if len(csv_text.encode()) > MAX_CSV_BYTES:
            raise errors.ApiError(400, errors.BATCH_CSV_TOO_LARGE)
        vins += _csv_vins(csv_text)
    if csv_url:
        if not isinstance(csv_url, str) or not _url_allowed(csv_url, insecure):
            raise errors.ApiError(400, errors.BATCH_CSV_URL_NOT_HTTPS)
        vins += _csv_vins(await _download_csv(csv_url, insecure))
    if not vins or not all(is_valid_vin(v) for v in vins):
        raise _invalid()
    if len(vins) > MAX_VINS:
        raise errors.ApiError(400, errors.BATCH_TOO_MANY.format(count=f"{len(vins):,}"))
    return vins


async def submit(request: web.Request):
    if request.method != "POST":
        raise errors.ApiError(405, errors.BATCH_METHOD, headers={"Allow": "POST"})
    call = Call(request)
    payment = request.headers.get("X-Payment", "").strip()
    x402 = bool(payment) and not call.key
    if not x402:
        call.authorize()
    state = call.state
    caller = f"x402:{payment}" if x402 else call.key
    idem = request.headers.get("Idempotency-Key")
    if idem and (caller, idem) in state.batches.idempotent:
        status, body = state.batches.idempotent[(caller, idem)]
        replay = ok(body, status=status, stamp=False)
        replay.headers["Idempotent-Replayed"] = "true"
        return replay
    try:
        body = json.loads(await request.text() or "null")
    except ValueError:
        raise _invalid() from None
    vins = await _vins_from_body(body, x402=x402, insecure=state.config.insecure_webhooks)
    webhook = body.get("webhookUrl")
    if webhook is not None and (not isinstance(webhook, str)
                                or not _url_allowed(webhook, state.config.insecure_webhooks)):
        raise errors.ApiError(400, errors.BATCH_WEBHOOK_NOT_HTTPS)
    if not x402:
        call.charge({"recalls": len(vins)}, bulk=True)
    batch = state.batches.create(call.key if not x402 else "", vins, webhook, x402=x402,
                                 will_fail=state.faults.draw_batch_failure())
    data = {"batchId": batch.batch_id, "numericBatchId": batch.numeric_id, "status": batch.status,
            "totalVins": len(vins), "processedVins": 0}
    if batch.token:
        data["batchToken"] = batch.token
    answer = {"data": data, "message": errors.BATCH_ACCEPTED.format(batch_id=batch.batch_id)}
    if idem:
        state.batches.idempotent[(caller, idem)] = (202, answer)
    return ok(answer, status=202, stamp=False)


def _find(request: web.Request):
    call = Call(request)
    token = request.headers.get("X-Service-Batch-Token")
    if not token:
        call.authorize()
    batch_id = (call.query.get("batchId") or "").strip()
    if not batch_id:
        raise errors.ApiError(400, errors.BATCH_MISSING_ID)
    batch = call.state.batches.find(batch_id, key=call.key, token=token)
    if batch is None:
        raise errors.ApiError(404, errors.BATCH_NOT_FOUND)
    return batch


def _finished(batch):
    if not batch.finished:
        raise errors.ApiError(409, errors.BATCH_NOT_COMPLETE)
    return batch


async def status(request):
    return ok({"data": _find(request).job()}, stamp=False)


async def results(request):
    batch = _finished(_find(request))
    job = {"batchId": batch.batch_id, "numericBatchId": batch.numeric_id, "status": batch.status}
    return ok({"data": {"job": job, "results": batch.results}}, stamp=False)


async def download(request):
    batch = _finished(_find(request))
    lines = ["vin,hasRecalls,recallCount"]
    lines += [f"{r['vin']},{'true' if r['hasRecalls'] else 'false'},{r['recallCount']}" for r in batch.results]
    return web.Response(text="\n".join(lines) + "\n", content_type="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{batch.batch_id}.csv"'})
