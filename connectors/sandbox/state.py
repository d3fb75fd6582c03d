"""Everything one running sandbox holds: accounts and usage, counters, faults, batches."""
from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from .accounts import Ledger
from .batches import BatchStore
from .config import SandboxConfig
from .control import validate
from .faults import FaultInjector
from .stats import Stats


@dataclass
class SandboxState:
    config: SandboxConfig
    ledger: Ledger
    stats: Stats
    faults: FaultInjector
    batches: BatchStore
    vehicles: dict[str, dict]   # per-VIN overrides (control.py), shared with the batch store

    @classmethod
    def from_config(cls, config: SandboxConfig) -> "SandboxState":
        ledger = Ledger()
        for key, account in config.accounts.items():
            ledger.add_account(key, account)
        vehicles = {vin.strip().upper(): validate(overrides) for vin, overrides in config.vehicles.items()}
        batches = BatchStore(config.batch_vins_per_second, config.insecure_webhooks, config.webhook_timeout_seconds)
        batches.vehicles = vehicles
        return cls(config=config, ledger=ledger, stats=Stats(config.journal), faults=FaultInjector(config.effective_faults()),
                   batches=batches, vehicles=vehicles)


STATE = web.AppKey("sandbox_state", SandboxState)
