"""The aiohttp application: API routes, the fault/latency/counting middleware, admin routes, openapi.yaml.

Admin routes live under /_sandbox/, need no key, are never counted and never faulted:
  GET  /_sandbox/stats     -> {"requests": [{"endpoint", "key", "status", "count"}...],
                               "units": [{"key", "api", "units"}...], "total": N}
                              (status 0 = connection dropped by a fault; "api" is a quota group)
  POST /_sandbox/reset     -> clears request counts, units used and credits spent
  GET/POST /_sandbox/faults -> the FaultConfig as JSON; POST replaces it and reseeds the generator
  POST /_sandbox/accounts  -> {"key": ..., <Account fields>} registers or replaces an account
  GET  /_sandbox/webhooks  -> {"deliveries": [{url, batchId, payload, attemptedAt, status, error}...]}
  POST /_sandbox/settings  -> {"batch_vins_per_second": F, "insecure_webhooks": bool}
  GET  /_sandbox/health    -> {"ok": true}
  GET  /_sandbox/vehicles[/{vin}]  -> every VIN's overrides / that VIN's ({} when none)
  POST /_sandbox/vehicles/{vin}    -> {"recalls": [...], "value_factor": F, "title_brands": [...], "history": {...},
                                       "lien_theft": [...] | null, "specs": {...}}: tells the sandbox the vehicle
                                      changed (control.py); each POST replaces only the fields it names; 400 + message
  DELETE /_sandbox/vehicles[/{vin}] -> forgets that VIN's overrides / every VIN's
"""
from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from . import batch_routes, errors, misc_routes, owner_routes, vin_routes
from .accounts import Account
from .calls import error_response
from .config import SandboxConfig
from .control import OverrideError, validate
from .faults import FaultConfig
from .state import STATE, SandboxState
from .stats import DROPPED

ROUTES = [
    ("GET", "/specs", vin_routes.specs),
    ("GET", "/v1/international-vin-decoder", vin_routes.international_decoder),
    ("GET", "/v1/recalls", vin_routes.recalls),
    ("GET", "/v1/recalls-ymm", vin_routes.recalls_ymm),
    ("*", "/v1/recalls-batch/submit", batch_routes.submit),
    ("GET", "/v1/recalls-batch/status", batch_routes.status),
    ("GET", "/v1/recalls-batch/results", batch_routes.results),
    ("GET", "/v1/recalls-batch/download", batch_routes.download),
    ("GET", "/v2/platedecoder", misc_routes.plate_v2),
    ("GET", "/v1/us-platedecoder", misc_routes.plate_us),
    ("GET", "/platedecoder", misc_routes.plate_v1),
    ("GET", "/v2/marketvalue", vin_routes.market_value_v2),
    ("GET", "/marketvalue", vin_routes.market_value_v1),
    ("GET", "/history", vin_routes.history),
    ("GET", "/v1/lien-theft", vin_routes.lien_theft),
    ("GET", "/v1/ownership/vin", owner_routes.by_vin),
    ("GET", "/v1/ownership/phone", owner_routes.by_phone),
    ("POST", "/v1/ownership/phone/bulk", owner_routes.by_phone_bulk),
    ("GET", "/v1/ownership/person", owner_routes.by_person),
    ("GET", "/v1/ownership/address", owner_routes.by_address),
    ("GET", "/v1/ownership/zip", owner_routes.by_zip),
    ("GET", "/v1/ymm-options", misc_routes.ymm_options),
    ("GET", "/v1/ymm", misc_routes.year_make_model),
    ("GET", "/images", misc_routes.images),
    # Paths from the vendor's SDKs (carsxe 1.4.0 on PyPI and npm); the spec shows none.
    ("POST", "/platerecognition", misc_routes.plate_recognition),
    ("POST", "/v1/vinocr", misc_routes.vin_ocr),
    ("GET", "/obdcodesdecoder", misc_routes.obd),
]
_UNCOUNTED = "/_sandbox/"
log = logging.getLogger("connectors.sandbox")
MALFORMED_BODY = b'{"success": true, "attributes": {"year": "20'


class _Dropped(Exception):
    """A fault closed the connection; nothing is written back."""


@web.middleware
async def service_middleware(request: web.Request, handler):
    if request.path.startswith(_UNCOUNTED) or request.path == "/openapi.yaml":
        return await handler(request)
    state = request.app[STATE]
    resource = request.match_info.route.resource
    endpoint = resource.canonical if resource is not None else request.path
    key = request.query.get("key", "")
    faults = state.faults.config
    draw = state.faults.draw(endpoint)
    state.stats.started()
    # A timed-out call counts as 504 even when the client hangs up before the answer.
    status = 504 if draw.kind == "timeout" else DROPPED
    try:
        if draw.latency_s:
            await asyncio.sleep(draw.latency_s)
        response = await _answer(request, handler, draw, faults)
        status = response.status
        return response
    except _Dropped:
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError from None
    finally:
        state.stats.count(endpoint, key, status, request.query.get("vin", ""),
                          request.query.get("batchId") or request.query.get("plate") or "",
                          request.headers.get("Idempotency-Key", ""))


async def _answer(request, handler, draw, faults: FaultConfig) -> web.StreamResponse:
    def failure(err: errors.ApiError) -> web.Response:
        return error_response(err, retry_after=faults.retry_after_seconds, omit_retry_after=faults.omit_retry_after)

    if draw.kind == "status":
        return failure(errors.upstream_error(draw.status))
    if draw.kind == "timeout":
        await asyncio.sleep(faults.timeout_seconds)
        return failure(errors.upstream_error(504))
    if draw.kind == "drop":
        raise _Dropped()
    if draw.kind == "malformed":
        return web.Response(status=200, body=MALFORMED_BODY, content_type="application/json")
    if draw.kind == "slow":
        await asyncio.sleep(faults.slow_ms / 1000)
    try:
        return await handler(request)
    except errors.ApiError as err:
        return failure(err)
    except web.HTTPException as exc:  # unknown path or method, from the router
        return failure(errors.ApiError(exc.status, exc.reason or errors.NOT_FOUND_ROUTE))
    except Exception:
        # A sandbox bug: say so on stderr (path only: the query holds the key), answer like the service.
        log.exception("sandbox handler failed on %s %s", request.method, request.path)
        return failure(errors.ApiError(500, errors.INTERNAL))


async def openapi(request: web.Request) -> web.StreamResponse:
    path = request.app[STATE].config.openapi_path
    if not path.is_file():
        return web.json_response({"success": False, "message": errors.NOT_FOUND_ROUTE}, status=404)
    return web.Response(body=path.read_bytes(), content_type="application/yaml")


async def admin_stats(request):
    state = request.app[STATE]
    requests = state.stats.requests()
    return web.json_response({"requests": requests, "units": state.ledger.units(),
                              "total": sum(r["count"] for r in requests),
                              "in_flight": state.stats.in_flight, "peak_in_flight": state.stats.peak_in_flight})


async def admin_journal(request):
    return web.json_response({"enabled": request.app[STATE].stats.journal_on,
                              "calls": request.app[STATE].stats.journal()})


async def admin_reset(request):
    state = request.app[STATE]
    state.stats.reset()
    state.ledger.reset()
    return web.json_response({"ok": True})


async def admin_faults(request):
    state = request.app[STATE]
    if request.method == "POST":
        state.faults.configure(FaultConfig.from_dict(await request.json()))
    return web.json_response(state.faults.config.to_dict())


async def admin_accounts(request):
    body = await request.json()
    key = body.pop("key", "")
    if not key:
        return web.json_response({"ok": False, "message": "key is required"}, status=400)
    request.app[STATE].ledger.add_account(key, Account.from_dict(body))
    return web.json_response({"ok": True})


async def admin_webhooks(request):
    return web.json_response({"deliveries": request.app[STATE].batches.deliveries})


async def admin_settings(request):
    state = request.app[STATE]
    body = await request.json()
    if "batch_vins_per_second" in body:
        state.batches.vins_per_second = float(body["batch_vins_per_second"])
    if "journal" in body:
        state.stats.journal_on = bool(body["journal"])
    if "insecure_webhooks" in body:
        state.config.insecure_webhooks = state.batches.insecure_webhooks = bool(body["insecure_webhooks"])
    return web.json_response({"batch_vins_per_second": state.batches.vins_per_second,
                              "insecure_webhooks": state.config.insecure_webhooks,
                              "journal": state.stats.journal_on})


def _vin(request) -> str:
    return request.match_info.get("vin", "").strip().upper()


async def admin_vehicles(request):
    vehicles = request.app[STATE].vehicles
    vin = _vin(request)
    if request.method == "DELETE":
        if vin:
            vehicles.pop(vin, None)
        else:
            vehicles.clear()
        return web.json_response({"ok": True})
    if request.method == "POST":
        try:
            told = validate(await request.json())
        except (OverrideError, ValueError) as exc:  # ValueError: a body that is not JSON
            return web.json_response({"ok": False, "message": " ".join(str(exc).split())}, status=400)
        vehicles[vin] = {**vehicles.get(vin, {}), **told}
    return web.json_response(vehicles.get(vin, {}) if vin else vehicles)


async def admin_health(request):
    return web.json_response({"ok": True})


async def _close_batches(app: web.Application) -> None:
    await app[STATE].batches.close()


def create_app(config: SandboxConfig | None = None) -> web.Application:
    # Keys travel in query strings: aiohttp's own error logs must not echo request lines.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    app = web.Application(middlewares=[service_middleware], client_max_size=8 * 1024 * 1024)
    app[STATE] = SandboxState.from_config(config or SandboxConfig())
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    app.router.add_get("/openapi.yaml", openapi)
    app.router.add_get("/_sandbox/stats", admin_stats)
    app.router.add_post("/_sandbox/reset", admin_reset)
    app.router.add_route("*", "/_sandbox/faults", admin_faults)
    app.router.add_post("/_sandbox/accounts", admin_accounts)
    app.router.add_get("/_sandbox/webhooks", admin_webhooks)
    app.router.add_post("/_sandbox/settings", admin_settings)
    app.router.add_get("/_sandbox/health", admin_health)
    app.router.add_get("/_sandbox/journal", admin_journal)
    app.router.add_route("*", "/_sandbox/vehicles", admin_vehicles)
    app.router.add_route("*", "/_sandbox/vehicles/{vin}", admin_vehicles)
    app.on_cleanup.append(_close_batches)
    return app
