"""fencer.aio: the asyncio client of the fencer lock service, on aiohttp
(Debian's ``python3-aiohttp``; ``pip install ./clients/python[aio]``).

    from fencer.aio import Client
    async with Client(["127.0.0.1:7001", "127.0.0.1:7002"]) as client:
        async with client.lock("nightly-report", ttl=10, wait=5) as lease:
            await client.put("report", data, lease.token, lock=lease.name)

The body of ``async with client.lock(...)`` is cancelled, and
:class:`~fencer.errors.LeaseLost` raised from the block, as soon as the
lease may be lost; ``lease.lost`` (an :class:`asyncio.Event`) is set at the
same moment. Errors are the synchronous client's (:mod:`fencer.errors`).
See docs/clients/python-asyncio.md for the guarantees.
"""

from .client import Client, Pending
from .lease import KeptAlive, Lease, MultiLock
from .session import Session
from .watch import FROM_NOW, Watch

__all__ = ["Client", "Pending", "KeptAlive", "Lease", "MultiLock", "Session", "Watch", "FROM_NOW"]
