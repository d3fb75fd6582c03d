"""The Vehicle Data Service connector: typed client, error tree, retry policy, and the sandbox.

Knows nothing of Prefect or DuckDB.
"""

from . import errors, models
from .billing import estimate_units
from .calls import CallRecord
from .client import AsyncVehicleDataClient
from .config import ServiceAccess, Settings
from .endpoints import ENDPOINTS, Endpoint
from .retry import RetryPolicy
from .sync import VehicleDataClient

__all__ = [
    "AsyncVehicleDataClient", "CallRecord", "ENDPOINTS", "Endpoint", "RetryPolicy", "ServiceAccess",
    "Settings",
    "VehicleDataClient", "errors", "estimate_units", "models",
]
