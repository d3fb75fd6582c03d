"""The ceiling: the same calls at the same concurrency, each body read and dropped.

No parsing, no retry, no storage: the most this machine's client side can do with aiohttp.
    python -m tests.bench.compare.bare_aiohttp --base-url URL --key K --fleet F --concurrency C
"""
from __future__ import annotations

import asyncio

import aiohttp
from yarl import URL

from .cli import emit, parser
from .fleets import read_fleet, urls


async def call_all(targets: list[str], concurrency: int) -> int:
    """How many of `targets` answered 200, fetched by `concurrency` workers over one pool."""
    queue = iter(targets)  # workers take turns on one iterator: no locking needed in one event loop
    ok = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:

        async def worker() -> None:
            nonlocal ok
            for url in queue:
                async with session.get(URL(url, encoded=True)) as response:
                    await response.read()
                    ok += response.status == 200

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    targets = [url for _, url in urls(args.base_url, args.key, read_fleet(args.fleet))]
    ok = asyncio.run(call_all(targets, args.concurrency))
    emit("bare_aiohttp", calls=len(targets), ok=ok, rows=None)
    return 0 if ok == len(targets) else 1


if __name__ == "__main__":
    raise SystemExit(main())
