"""The run-wide ceiling on units (`--max-units`), shared by every chunk in the process."""

from __future__ import annotations


class Budget:
    """A run-wide ceiling on units (`--max-units`), shared by every chunk in the process."""

    def __init__(self, limit: int | None, spent: int = 0) -> None:
        self.limit = limit
        self.spent = spent
        self.reserved = 0

    def reserve(self, units: int) -> bool:
        if self.limit is not None and self.spent + self.reserved + units > self.limit:
            return False
        self.reserved += units
        return True

    def settle(self, reserved: int, actual: int) -> None:
        self.reserved -= reserved
        self.spent += actual
