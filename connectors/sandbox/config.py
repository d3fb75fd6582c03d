"""What a sandbox starts with; everything here can also be changed at run time via /_sandbox/."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from .accounts import Account
from .faults import FaultConfig

DEFAULT_OPENAPI = Path(__file__).with_name("openapi.yaml")


@dataclass
class SandboxConfig:
    faults: FaultConfig = field(default_factory=FaultConfig)
    accounts: dict[str, Account] = field(default_factory=dict)  # explicit keys win over the test-key rules
    batch_vins_per_second: float = 1000.0   # a 1,000-VIN recall batch completes in about a second
    insecure_webhooks: bool = False         # also allow http://127.0.0.1 / localhost webhookUrl and csvUrl
    webhook_timeout_seconds: float = 5.0
    openapi_path: Path = DEFAULT_OPENAPI
    journal: bool = False                   # record every call in order (GET /_sandbox/journal)
    seed: int | None = None                 # when set, overrides faults.seed
    vehicles: dict[str, dict] = field(default_factory=dict)  # per-VIN overrides (connectors/sandbox/control.py)

    def effective_faults(self) -> FaultConfig:
        return self.faults if self.seed is None else replace(self.faults, seed=self.seed)
