"""`VehicleDataClient`: every endpoint of the Vehicle Data Service as a typed async method."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, TypedDict, Unpack

from . import models as m
from .base_client import BaseClient
from .errors import BatchNotCompleteError


class ImageOptions(TypedDict, total=False):
    """The image search's optional filters, as the vendor SDKs name them (sent as the service spells them)."""

    year: int | str | None
    trim: str | None
    color: str | None
    transparent: bool | None
    angle: str | None
    photo_type: str | None
    size: str | None
    license: str | None


IMAGE_PARAMS = {"photo_type": "photoType"}  # the one filter whose query name differs


class AsyncVehicleDataClient(BaseClient):
    """Async client with one long-lived connection pool. Use `async with`.

    Every method raises a subclass of `connectors.errors.VehicleDataError` on failure.
    """

    async def _get(self, endpoint: str, result_type: type[m.Result], /, **params: Any) -> Any:
        # Positional-only: `model` and `endpoint` are also query parameter names.
        answer = await self.request(endpoint, params)
        return result_type.from_payload(answer.body, endpoint)

    # --- VIN decoding -----------------------------------------------------------------
    async def specs(self, vin: str, *, deepdata: bool = False, disable_international: bool = False) -> m.SpecsResult:
        return await self._get(
            "specs", m.SpecsResult, vin=vin,
            deepdata=1 if deepdata else None, disableIntVINDecoding=1 if disable_international else None,
        )

    async def international_vin(self, vin: str) -> m.InternationalDecodeResult:
        return await self._get("international-vin", m.InternationalDecodeResult, vin=vin)

    # --- values, history, liens ----------------------------------------------------------
    async def market_value(
        self, vin: str, *, state: str | None = None, mileage: int | float | None = None, condition: str | None = None
    ) -> m.MarketValue:
        return await self._get("market-value", m.MarketValue, vin=vin, state=state, mileage=mileage, condition=condition)

    async def market_value_v1(self, vin: str) -> m.MarketValueV1:
        return await self._get("market-value-v1", m.MarketValueV1, vin=vin)

    async def history(self, vin: str) -> m.HistoryReport:
        return await self._get("history", m.HistoryReport, vin=vin)

    async def lien_theft(self, vin: str) -> m.LienTheftResult:
        return await self._get("lien-theft", m.LienTheftResult, vin=vin)

    # --- recalls -------------------------------------------------------------------------
    async def recalls(self, vin: str) -> m.RecallReport:
        return await self._get("recalls", m.RecallReport, vin=vin)

    async def recalls_by_model(self, year: int | str, make: str, model: str) -> m.RecallsByModel:
        return await self._get("recalls-ymm", m.RecallsByModel, year=year, make=make, model=model)

    async def submit_recalls_batch(
        self,
        vins: Sequence[str] | None = None,
        *,
        csv: str | None = None,
        csv_url: str | None = None,
        webhook_url: str | None = None,
        idempotency_key: str | None = None,
        payment: str | None = None,
    ) -> m.BatchJob:
        """Submit a batch. Pass a stored `idempotency_key` to make a resubmission a free replay."""
        body = {"vins": list(vins) if vins is not None else None, "csv": csv, "csvUrl": csv_url, "webhookUrl": webhook_url}
        answer = await self.request(
            "recalls-batch-submit",
            json_body={k: v for k, v in body.items() if v is not None},
            idempotency_key=idempotency_key,
            payment=payment,
        )
        job = m.BatchSubmitted.from_payload(answer.body, "recalls-batch-submit").data
        if job.batchToken:
            self._add_secret(job.batchToken)
        return job

    async def recalls_batch_status(self, batch_id: str, *, batch_token: str | None = None) -> m.BatchJob:
        answer = await self.request("recalls-batch-status", {"batchId": batch_id}, batch_token=batch_token)
        return m.BatchStatusResult.from_payload(answer.body, "recalls-batch-status").data

    async def recalls_batch_results(self, batch_id: str, *, batch_token: str | None = None) -> m.BatchResults:
        answer = await self.request("recalls-batch-results", {"batchId": batch_id}, batch_token=batch_token)
        return m.BatchResults.from_payload(answer.body, "recalls-batch-results")

    async def recalls_batch_results_raw(self, batch_id: str, *, batch_token: str | None = None) -> tuple[m.BatchJob, bytes]:
        """A finished batch's job, and its whole answer as the bytes sent (redacted): the results are the caller's
        to read (a pipeline shreds them in SQL, never a model per VIN)."""
        answer = await self.request("recalls-batch-results", {"batchId": batch_id}, batch_token=batch_token, raw=True)
        head = m.BatchResultsHead.from_payload(answer.body, "recalls-batch-results")
        assert answer.raw is not None  # a JSON answer always comes with its bytes when asked `raw`
        return head.data.job, answer.raw

    async def download_recalls_batch(self, batch_id: str, *, batch_token: str | None = None) -> list[m.BatchResultItem]:
        answer = await self.request("recalls-batch-download", {"batchId": batch_id}, batch_token=batch_token)
        return m.parse_batch_csv(answer.body)

    async def wait_for_recalls_batch(
        self,
        batch_id: str,
        *,
        batch_token: str | None = None,
        poll_interval: float = 1.0,
        max_interval: float = 30.0,
        timeout: float = 3600.0,
        webhooks: Any = None,
        webhook_fallback: float = 60.0,
    ) -> m.BatchJob:
        """Wait until the batch is completed, partial or failed: the one batch poll loop.

        Polls the status with growing intervals; with a `BatchWebhookReceiver` it asks only when the
        webhook arrives, and every `webhook_fallback` seconds in case a delivery is lost. (A run's
        batches are read one status at a time by its scheduler, by the same `BatchPolling` rule.)
        """
        polling = BatchPolling(poll_interval, max_interval, timeout, webhook_fallback)
        while True:
            job = await self.recalls_batch_status(batch_id, batch_token=batch_token)
            if job.status.is_terminal:
                return job
            pause = polling.next_pause(job, notified=webhooks is not None)
            if webhooks is not None:
                await webhooks.wait(batch_id, pause)
            else:
                await self._sleep(pause)

    async def recalls_batch_results_when_ready(self, batch_id: str, **wait: Any) -> m.BatchResults:
        """Results of a batch, waiting for completion first; a 409 race is waited out too."""
        while True:
            await self.wait_for_recalls_batch(batch_id, **wait)
            try:
                return await self.recalls_batch_results(batch_id, batch_token=wait.get("batch_token"))
            except BatchNotCompleteError:
                await self._sleep(wait.get("poll_interval", 1.0))

    # --- plates --------------------------------------------------------------------------
    async def plate(
        self,
        plate: str,
        *,
        country: str = "US",
        state: str | None = None,
        district: str | None = None,
        require_vin: bool | None = None,
    ) -> m.PlateDecode | m.PlateFanOut:
        """v2 decoder. With country=US and no state the answer is the fan-out form."""
        answer = await self.request(
            "plate", {"plate": plate, "country": country, "state": state, "district": district, "require_vin": require_vin}
        )
        model = m.PlateFanOut if "results" in answer.body else m.PlateDecode
        return model.from_payload(answer.body, "plate")

    async def us_plate(self, plate: str, state: str, *, decode_vin: bool = False) -> m.USPlateDecode:
        return await self._get("us-plate", m.USPlateDecode, plate=plate, state=state, decodeVIN="true" if decode_vin else None)

    async def plate_v1(self, plate: str, state: str | None = None) -> m.LegacyPlateDecode:
        return await self._get("plate-v1", m.LegacyPlateDecode, plate=plate, state=state)

    # --- ownership -----------------------------------------------------------------------
    async def ownership(self, vin: str, *, include: Iterable[str] | None = None) -> m.OwnershipResult:
        return await self._get("ownership", m.OwnershipResult, vin=vin, include=_csv(include))

    async def ownership_by_phone(self, phone: str, *, include: Iterable[str] | None = None) -> m.PhoneOwnership:
        return await self._get("ownership-phone", m.PhoneOwnership, phone=phone, include=_csv(include))

    async def ownership_by_phones(self, phones: Sequence[str], *, include: Iterable[str] | None = None) -> m.PhoneOwnershipBulk:
        if len(phones) > 100:
            raise ValueError("ownership by phone takes at most 100 numbers per call")
        body = {"phones": list(phones), **({"include": _csv(include)} if include else {})}
        answer = await self.request("ownership-phones", json_body=body)
        return m.PhoneOwnershipBulk.from_payload(answer.body, "ownership-phones")

    async def ownership_by_person(
        self, first_name: str, last_name: str, address: str, zip: str, *, include: Iterable[str] | None = None
    ) -> m.OwnershipSearch:
        """`address` is the street only (no city or state); `zip` five digits, optionally ZIP+4."""
        return await self._get("ownership-person", m.OwnershipSearch, first_name=first_name, last_name=last_name,
                               address=address, zip=zip, include=_csv(include))

    async def ownership_by_address(self, address: str, zip: str, *, include: Iterable[str] | None = None) -> m.OwnershipSearch:
        return await self._get("ownership-address", m.OwnershipSearch, address=address, zip=zip, include=_csv(include))

    async def ownership_by_zip(
        self,
        zip: str,
        *,
        gender: str | None = None,
        min_age: int | None = None,
        max_age: int | None = None,
        income: str | None = None,
        page: int | None = None,
        limit: int | None = None,
        include: Iterable[str] | None = None,
    ) -> m.OwnershipZip:
        """One page (`limit` at most 100, 15 by default) of the people in a ZIP; billed per record."""
        return await self._get("ownership-zip", m.OwnershipZip, zip=zip, gender=gender, min_age=min_age,
                               max_age=max_age, income=income, page=page, limit=limit, include=_csv(include))

    # --- catalog -------------------------------------------------------------------------
    async def ymm_options(
        self,
        dimension: str | None = None,
        *,
        year: int | str | None = None,
        make: str | None = None,
        model: str | None = None,
        trim: str | None = None,
    ) -> m.YmmOptions:
        return await self._get("ymm-options", m.YmmOptions, dimension=dimension, year=year, make=make, model=model, trim=trim)

    async def year_make_model(self, year: int | str, make: str, model: str, *, trim: str | None = None) -> m.YearMakeModel:
        return await self._get("year-make-model", m.YearMakeModel, year=year, make=make, model=model, trim=trim)

    async def images(self, make: str, model: str, **options: Unpack[ImageOptions]) -> m.ImageResult:
        """`options`: the endpoint's optional filters (year, trim, color, transparent, angle, photo_type, size, license)."""
        query: dict[str, Any] = {IMAGE_PARAMS.get(k, k): v for k, v in options.items()}
        return await self._get("images", m.ImageResult, make=make, model=model, **query)

    # --- image and OBD products (paths from the vendor's SDKs; see README) ----------------
    async def plate_recognition(self, image: str) -> m.PlateRecognition:
        """`image`: an http(s) URL or a base64 string (sent as `image`, the npm SDK's spelling)."""
        answer = await self.request("plate-recognition", json_body={"image": image})
        return m.PlateRecognition.from_payload(answer.body, "plate-recognition")

    async def vin_ocr(self, image: str) -> m.VinRecognition:
        answer = await self.request("vin-ocr", json_body={"image": image})
        return m.VinRecognition.from_payload(answer.body, "vin-ocr")

    async def obd(self, code: str) -> m.ObdCode:
        return await self._get("obd", m.ObdCode, code=code)


@dataclass
class BatchPolling:
    """When to read a running batch's status again: growing pauses, or the webhook's fallback, until `timeout`."""

    interval: float = 1.0
    max_interval: float = 30.0
    timeout: float = 3600.0
    webhook_fallback: float = 60.0
    started: float = field(default_factory=time.monotonic)

    def next_pause(self, job: m.BatchJob, *, notified: bool) -> float:
        """Seconds until the next read of `job` (not yet ended); `TimeoutError` once the batch has run too long."""
        now = time.monotonic()
        deadline = self.started + self.timeout
        pause = self.webhook_fallback if notified else self.interval
        if now + min(pause, 1.0) > deadline:
            raise TimeoutError(f"batch {job.batchId} still {job.status_text!r} after {self.timeout:.0f}s")
        if not notified:
            self.interval = min(self.max_interval, self.interval * 1.5)
        return min(pause, max(0.0, deadline - now))


def _csv(values: Iterable[str] | None) -> str | None:
    return ",".join(values) if values else None


