"""How a fetch step may call the service: one value instead of five parameters on every fetch function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fleet_data.connectors import Settings

from fleet_data.tasks.control.budget import Budget
from fleet_data.tasks.control.stops import Stops


@dataclass
class Calls:
    """The service's settings, at most `concurrency` calls in flight, within the run's `budget`, ending when the
    run's `stops` say so, each settled VIN (or plate, or batch VIN) told to `on_progress`."""

    settings: Settings
    concurrency: int = 32
    budget: Budget = field(default_factory=lambda: Budget(None))
    stops: Stops = field(default_factory=Stops)
    on_progress: Callable[[int], None] | None = None

    def progress(self, n: int) -> None:
        if self.on_progress is not None:
            self.on_progress(n)
