"""`python -m connectors.sandbox`: serve until SIGINT/SIGTERM. First stdout line: SANDBOX_URL=..."""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from .config import SandboxConfig
from .faults import FaultConfig, parse_latency
from .runner import start_site


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleet sandbox", description="Serve the Vehicle Data Service sandbox.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8787, help="0 picks a free port")
    p.add_argument("--latency-ms", type=parse_latency, default=None, help="MEAN or MIN-MAX per request")
    p.add_argument("--fault-rate", type=float, default=0.0, help="fraction of calls answering 500/502/503/504")
    p.add_argument("--fault-statuses", default="500,502,503,504", help="comma-separated statuses")
    p.add_argument("--timeout-rate", type=float, default=0.0)
    p.add_argument("--timeout-seconds", type=float, default=30.0)
    p.add_argument("--drop-rate", type=float, default=0.0)
    p.add_argument("--malformed-rate", type=float, default=0.0)
    p.add_argument("--slow-rate", type=float, default=0.0)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--omit-retry-after", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-rate", type=float, default=1000.0, help="recall batch VINs processed per second")
    p.add_argument("--insecure-webhooks", action="store_true",
                   help="also accept http://127.0.0.1 / localhost webhookUrl and csvUrl")
    p.add_argument("--journal", action="store_true", help="record every call in order (GET /_sandbox/journal)")
    p.add_argument("--vehicles", metavar="FILE", type=_vehicles_file,
                   help="JSON object of per-VIN overrides to start with (see POST /_sandbox/vehicles/{vin})")
    return p


def config_from_args(args: argparse.Namespace) -> SandboxConfig:
    faults = FaultConfig(rate=args.fault_rate, statuses=[int(s) for s in args.fault_statuses.split(",") if s],
                         timeout_rate=args.timeout_rate, timeout_seconds=args.timeout_seconds,
                         drop_rate=args.drop_rate, malformed_rate=args.malformed_rate, slow_rate=args.slow_rate,
                         slow_ms=args.slow_ms, latency_ms=args.latency_ms,
                         omit_retry_after=args.omit_retry_after, seed=args.seed)
    return SandboxConfig(faults=faults, batch_vins_per_second=args.batch_rate,
                         insecure_webhooks=args.insecure_webhooks, journal=args.journal, vehicles=args.vehicles or {})


def _vehicles_file(path: str) -> dict:
    """`--vehicles FILE`: checked before the server starts, so a bad file is one line and exit code 2."""
    import json

    from .control import OverrideError, validate

    try:
        told = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(told, dict):
            raise OverrideError("expected a JSON object keyed by VIN")
        for overrides in told.values():
            validate(overrides)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: {' '.join(str(exc).split())}") from None
    return told


async def _serve(config: SandboxConfig, host: str, port: int) -> None:
    runner, url = await start_site(config, host, port)
    print(f"SANDBOX_URL={url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(_serve(config_from_args(args), args.host, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
