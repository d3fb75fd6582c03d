"""The client against the sandbox over a real loopback socket: every endpoint, typed results."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fleet_data.connectors import AsyncVehicleDataClient, RetryPolicy, Settings
from fleet_data.connectors import errors as e
from fleet_data.connectors.models import BatchStatus, PlateDecode, PlateFanOut
from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox

KEY = "client_test_key"
CANDIDATES = [f"1FTFW1E{n:02d}DFC1031{n % 10}"[:17] for n in range(40)] + [f"2T1BURHE{n}JC0{n:05d}"[:17] for n in range(40)]


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig(insecure_webhooks=True)) as sb:
        yield sb


@pytest.fixture
async def client(sandbox):
    sandbox.set_faults(FaultConfig())
    async with AsyncVehicleDataClient(Settings(api_key=KEY, base_url=sandbox.url)) as c:
        yield c


@pytest.fixture(scope="module")
def known_vins(sandbox):
    """VINs the sandbox has full data for, and one it has none for (found, not assumed)."""

    async def sort_out():
        found, missing = [], []
        async with AsyncVehicleDataClient(Settings(api_key=KEY, base_url=sandbox.url)) as c:
            for vin in CANDIDATES:
                try:
                    await c.specs(vin, disable_international=True)
                    await c.market_value(vin)
                    found.append(vin)
                except e.NotFoundError:
                    missing.append(vin)
        return found, missing

    found, missing = asyncio.run(sort_out())
    assert found, "the sandbox should have data for most VINs"
    return found


async def test_specs_are_typed(client, known_vins):
    result = await client.specs(known_vins[0])
    assert isinstance(result.attributes.year, int) and 1980 <= result.attributes.year <= 2030
    assert result.attributes.make
    assert result.colors and result.colors[0].name
    assert result.equipment
    assert result.input.get("key") in (None, "[redacted]")
    assert KEY not in json.dumps(result.raw)


async def test_international_fallback_and_its_refusal(client):
    vin = "WVWZZZ1JZXW000001"
    result = await client.specs(vin)
    assert result.is_international and result.attributes.make
    with pytest.raises(e.NotFoundError):
        await client.specs(vin, disable_international=True)
    decoded = await client.international_vin(vin)
    assert decoded.attributes.vin == vin


async def test_market_value_groups_and_mileage_adjustment(client, known_vins):
    vin = known_vins[0]
    plain = await client.market_value(vin, state="CA")
    adjusted = await client.market_value(vin, state="CA", mileage=52000, condition="clean")
    assert {g.kind for g in plain.groups} == {"whole", "retail", "trade_in"}
    assert plain.retail and plain.retail > 0
    group = adjusted.group("retail", "clean")
    assert group.mileage not in (None, 0)
    assert group.adjusted == pytest.approx(group.base + group.mileage + (group.add_deduct or 0) + (group.regional or 0))
    with pytest.raises(e.InvalidRequestError, match="Invalid condition"):
        await client.market_value(vin, condition="mint")
    with pytest.raises(e.InvalidRequestError, match="Invalid mileage"):
        await client.market_value(vin, mileage="lots")


async def test_market_value_v1_numbers_are_parsed(client, known_vins):
    result = await client.market_value_v1(known_vins[0])
    assert isinstance(result.retail, float) and result.retail > 0


async def test_v1_legacy_validation_500_is_a_validation_error(client):
    with pytest.raises(e.InvalidRequestError) as caught:
        await client.market_value_v1("SHORT")
    assert caught.value.status == 500  # the legacy route says 500; the body says "validation"


async def test_history_and_lien_theft(client, known_vins):
    history = await client.history(known_vins[0])
    assert history.vin == known_vins[0]
    assert isinstance(history.brandsRecordCount, int)
    hits = 0
    for vin in known_vins[:15]:
        try:
            lien = await client.lien_theft(vin)
            hits += 1
            assert lien.events and lien.events[0].event
        except e.NotFoundError as exc:
            assert exc.message == "No lien or theft data found for this VIN"
    assert hits > 0


async def test_recalls_agree_between_vin_and_model(client, known_vins):
    report = await client.recalls(known_vins[0])
    data = report.data
    assert data.vin == known_vins[0]
    by_model = await client.recalls_by_model(data.model_year, data.make, data.model)
    pool = {r.nhtsa_campaign_number for r in by_model.data.recalls}
    assert {r.nhtsa_campaign_number for r in data.recalls} <= pool
    for recall in by_model.data.recalls:
        assert recall.report_received_date is not None  # day/month/year parsed to a date
    with pytest.raises(e.InvalidRequestError):
        await client.recalls_by_model("", "Honda", "Accord")


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers.get("content-length") or 0)
        _Receiver.received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        return None


async def test_recalls_batch_lifecycle_with_webhook(client, known_vins):
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        vins = known_vins[:10]
        hook = f"http://127.0.0.1:{server.server_port}/hook"
        job = await client.submit_recalls_batch(vins, webhook_url=hook, idempotency_key="lifecycle-1")
        assert job.status in (BatchStatus.UPLOADING, BatchStatus.PROCESSING) and job.totalVins == 10
        replay = await client.submit_recalls_batch(vins, webhook_url=hook, idempotency_key="lifecycle-1")
        assert replay.batchId == job.batchId  # the same key never starts (or pays for) a second batch
        done = await client.wait_for_recalls_batch(job.batchId, poll_interval=0.05, timeout=30)
        assert done.status is BatchStatus.COMPLETED
        results = await client.recalls_batch_results(job.batchId)
        assert {r.vin for r in results.data.results} == set(vins)
        downloaded = await client.download_recalls_batch(job.batchId)
        assert sorted((r.vin, r.recallCount) for r in downloaded) == sorted((r.vin, r.recallCount) for r in results.data.results)
        for item in results.data.results[:3]:
            per_vin = await client.recalls(item.vin)
            assert per_vin.data.recall_count == item.recallCount
        for _ in range(100):
            if _Receiver.received:
                break
            await asyncio.sleep(0.05)
        assert _Receiver.received[-1]["batchId"] == job.batchId
    finally:
        server.shutdown()
        server.server_close()


async def test_batch_results_before_completion_is_not_complete(sandbox, known_vins):
    with run_sandbox(SandboxConfig(batch_vins_per_second=1)) as slow:
        async with AsyncVehicleDataClient(Settings(api_key=KEY, base_url=slow.url)) as c:
            job = await c.submit_recalls_batch(known_vins[:20])
            with pytest.raises(e.BatchNotCompleteError):
                await c.recalls_batch_results(job.batchId)
            with pytest.raises(e.NotFoundError, match="Batch not found"):
                await c.recalls_batch_results("rb_doesnotexist")


async def test_x402_batch_token_is_scoped_to_its_batch(sandbox, known_vins):
    async with AsyncVehicleDataClient(Settings(api_key=None, base_url=sandbox.url)) as c:
        job = await c.submit_recalls_batch(known_vins[:3], payment="x402-proof")
        assert job.batchToken
        status = await c.recalls_batch_status(job.batchId, batch_token=job.batchToken)
        assert status.batchId == job.batchId
        other = await c.submit_recalls_batch(known_vins[3:5], payment="x402-proof-2")
        with pytest.raises(e.NotFoundError):
            await c.recalls_batch_status(other.batchId, batch_token=job.batchToken)


async def test_plates(client):
    single = await client.plate("ABC123", country="US", state="CA")
    assert isinstance(single, PlateDecode) and single.make
    try:
        fan = await client.plate("ABC123", country="US")
        assert isinstance(fan, PlateFanOut) and fan.count == len(fan.results)
    except e.NotFoundError:
        pass  # no jurisdiction matched: 404, nothing billed
    us = await client.us_plate("ABC123", "CA", decode_vin=True)
    assert us.vin and us.vehicle_specs is not None
    legacy = await client.plate_v1("ABC123", "CA")
    assert legacy.CarMake
    with pytest.raises(e.InvalidRegionError):
        await client.plate("ABC123", country="XX", state="ZZ")
    with pytest.raises(e.InvalidRequestError, match="Missing vehicle registration number"):
        await client.plate("", country="US", state="CA")


async def test_ownership_needs_enterprise(sandbox, client, known_vins):
    with pytest.raises(e.PermissionDeniedError) as caught:
        await client.ownership(known_vins[0])
    assert caught.value.error_code == "api_not_enabled"
    async with AsyncVehicleDataClient(Settings(api_key="test_enterprise", base_url=sandbox.url)) as ent:
        found = 0
        for vin in known_vins[:10]:
            try:
                result = await ent.ownership(vin, include=["phones"])
                found += 1
                assert result.owners and result.owners[0].last_name
            except e.NotFoundError as exc:
                assert exc.error_code == "no_data"
        assert found
        with pytest.raises(e.InvalidRequestError) as bad:
            await ent.ownership("SHORT")
        assert bad.value.error_code == "invalid_vin"


async def test_ymm_options_and_images(client):
    makes = await client.ymm_options("makes", year=2019)
    assert makes.layer == "makes" and makes.values
    models = await client.ymm_options("models", year=2019, make=makes.values[0])
    assert models.values
    with pytest.raises(e.InvalidRequestError, match="Invalid dimension"):
        await client.ymm_options("colors")
    images = await client.images(makes.values[0], models.values[0], angle="front")
    assert images.images and images.images[0].link.startswith("https://")
    with pytest.raises(e.InvalidRequestError, match="Please supply a make and model"):
        await client.images("", "")


@pytest.mark.parametrize(
    ("key", "expected"),
    [("test_blocked", e.KeyBlockedError), ("test_inactive", e.AuthenticationError), ("test_unknown", e.AuthenticationError),
     ("test_basic_tier", e.PlanNotAllowedError), ("test_prepaid_0", e.InsufficientCreditsError), ("test_quota_0", e.QuotaExceededError)],
)
async def test_account_errors(sandbox, known_vins, key, expected):
    async with AsyncVehicleDataClient(Settings(api_key=key, base_url=sandbox.url)) as c:
        with pytest.raises(expected) as caught:
            await c.history(known_vins[0])
    if expected is e.QuotaExceededError:
        assert caught.value.usage.remaining == 0
    if expected is e.InsufficientCreditsError:
        assert caught.value.credits.shortfall and caught.value.credits.shortfall > 0


async def test_missing_key_is_401(sandbox, known_vins):
    async with AsyncVehicleDataClient(Settings(api_key=None, base_url=sandbox.url)) as c:
        with pytest.raises(e.AuthenticationError, match="Missing API key"):
            await c.specs(known_vins[0])


async def test_faults_are_retried_to_success_and_counted(sandbox, known_vins):
    sandbox.reset_stats()
    sandbox.set_faults(FaultConfig(rate=0.3, statuses=[502, 503, 504], seed=7))
    policy = RetryPolicy(max_retries=8, initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01)
    calls = []
    try:
        async with AsyncVehicleDataClient(Settings(api_key=KEY, base_url=sandbox.url, retry=policy), on_call=calls.append) as c:
            results = await asyncio.gather(*(c.recalls(v) for v in known_vins[:20]))
    finally:
        sandbox.set_faults(FaultConfig())
    assert len(results) == 20
    served = sum(row["count"] for row in sandbox.stats()["requests"] if row["endpoint"] == "/v1/recalls")
    assert served == len(calls)  # every attempt the client made is one request the server saw
    assert any(c.will_retry for c in calls)


# --- paths and products shown by the vendor's SDKs (the spec says "not shown") -----------------

IMAGES = [f"https://example.com/{i}.jpg" for i in range(20)]


async def _first_found(call, images=IMAGES):
    for image in images:
        try:
            return await call(image)
        except e.NotFoundError:
            continue
    raise AssertionError("no image recognised in 20 tries")


async def test_plate_recognition_and_vin_ocr_on_the_sdk_paths(sandbox, client):
    sandbox.reset_stats()
    plates = await _first_found(client.plate_recognition)
    assert plates.results and plates.results[0].plate and plates.results[0].box.xmax is not None
    vin = await _first_found(client.vin_ocr)
    assert len(vin.vin) == 17 and vin.candidates[0].vin == vin.vin
    with pytest.raises(e.InvalidRequestError, match="Invalid image data format"):
        await client.vin_ocr("not an image!")
    served = {row["endpoint"] for row in sandbox.stats()["requests"]}
    assert {"/platerecognition", "/v1/vinocr"} <= served


async def test_obd_decodes_the_sdk_example(client):
    result = await client.obd("P0115")
    assert result.code == "P0115" and "Coolant" in result.diagnosis
    with pytest.raises(e.NotFoundError, match="Could not find code P01"):
        await client.obd("P01")


async def test_year_make_model(client):
    result = await client.year_make_model(2012, "BMW", "5 Series", trim="540i")
    assert result.bestMatch.trim == "540i xDrive" and result.bestMatch.year == 2012
    assert result.bestMatch.base_msrp > 0 and [t["name"] for t in result.trimOptions][0] == "530i"
    with pytest.raises(e.NotFoundError, match="No data found for this year, make and model"):
        await client.year_make_model(2012, "Nomake", "X")


async def test_ymm_options_year_make_model_are_variants(client):
    result = await client.ymm_options(year=2026, make="Toyota", model="Tacoma")
    assert result.layer == "variants" and result.values


async def test_ownership_searches(sandbox, client):
    with pytest.raises(e.PermissionDeniedError) as caught:
        await client.ownership_by_zip("90210")
    assert caught.value.error_code == "api_not_enabled"
    calls = []
    async with AsyncVehicleDataClient(Settings(api_key="test_enterprise", base_url=sandbox.url), on_call=calls.append) as ent:
        person = await ent.ownership_by_person("John", "Sample", "123 Example St", "90210", include=["phones"])
        assert person.count == len(person.matches) and person.matches[0].last_name == "Sample"
        assert person.matches[0].phones and not person.matches[0].emails
        residents = await ent.ownership_by_address("123 Example St", "90210")
        assert residents.matches and residents.matches[0].address.street == "123 Example St"
        page = await ent.ownership_by_zip("90210", gender="F", min_age=45, page=1, limit=5)
        assert page.count == len(page.records) <= 5 and all(r.gender == "F" for r in page.records)
        assert page.total >= page.count
        with pytest.raises(e.InvalidRequestError) as bad:
            await ent.ownership_by_zip("9021")
        assert bad.value.error_code == "invalid_zip"
    assert [c.units for c in calls if c.status == 200] == [person.count, residents.count, page.count]
