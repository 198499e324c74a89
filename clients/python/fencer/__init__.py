"""fencer: a Python client of the fencer lock service.

    from fencer import Client
    client = Client(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])
    with client.lock("nightly-report", ttl=10, wait=5) as lease:
        lease.check()                        # raises LeaseLost once it may be lost
        client.put("report", data, lease.token, lock=lease.name)

    with client.session(ttl=10) as session:  # one lease for many grants
        a, b = session.lock("partition-1"), session.lock("partition-2")

See README.md for the guarantees.
"""

from .client import Client, EventsLagged, EventStream, Response, Watch
from .errors import *  # noqa: F401,F403
from .errors import CODE_ERRORS, FencerError, from_response
from .lease import Lease, margin
from .multilock import MultiLock
from .session import Session

__version__ = "0.1.0"
__all__ = ["Client", "Response", "EventStream", "EventsLagged", "Watch", "Lease", "MultiLock", "Session", "margin", "CODE_ERRORS", "FencerError", "from_response"] + [
    c.__name__ for c in set(CODE_ERRORS.values())] + ["LeaseExpired", "Unavailable", "BadAnswer"]
