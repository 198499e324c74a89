"""The local deadline of one lease, apart from threads and event loops: the
rule both the synchronous keep-alive (:mod:`fencer.lease`) and the asyncio
one (:mod:`fencer.aio.lease`) follow, from one copy.

The server starts or extends a lease when it handles the request, never
before the client sent it. So a lease is measured from the monotonic send
time of its last confirmed renewal (or of the acquire) and given up at that
time plus TTL minus a margin (TTL/10, at least 50 ms, at most TTL/2),
before the server could expire it. Renewals are due at about TTL/3 with
jitter, so two can fail before the deadline.
"""

from __future__ import annotations

import random

from .errors import LeaseExpired


def margin(ttl: float) -> float:
    """The safety margin by which the local deadline precedes the server's."""
    return min(max(ttl / 10, 0.05), ttl / 2)


class LeaseClock:
    """When a lease was last confirmed, when it is given up, and when its
    next renewal is due; times on the :func:`time.monotonic` clock. Not
    locked: the synchronous keep-alive holds its own lock around it."""

    def __init__(self, ttl_ms: int, start: float) -> None:
        #: The TTL as granted, in milliseconds: every renewal must report it.
        self.ttl_ms = int(ttl_ms)
        self.ttl = self.ttl_ms / 1000.0
        self.margin = margin(self.ttl)
        self.confirmed = start
        self.due = start + self._interval()

    def _interval(self) -> float:
        return self.ttl / 3 * (0.8 + 0.2 * random.random())

    @property
    def deadline(self) -> float:
        return self.confirmed + self.ttl - self.margin

    def confirm(self, sent: float) -> None:
        """A renewal sent at ``sent`` was confirmed: measure from it (never
        from an older one that was answered late)."""
        if sent > self.confirmed:
            self.confirmed = sent
            self.due = sent + self._interval()

    def expired(self, now: float) -> bool:
        return now >= self.deadline

    def expiry(self, now: float, what: str, code: str) -> LeaseExpired:
        """The error of a lease whose deadline passed."""
        return LeaseExpired("%s: no renewal confirmed before the local deadline (last confirmed %.3fs ago, ttl %gs, margin %gs)"
                            % (what, now - self.confirmed, self.ttl, self.margin), code=code)

    def wake(self, keep_alive: bool) -> float:
        """When the keep-alive next has something to do: renew, or give
        the lease up."""
        return min(self.deadline, self.due) if keep_alive else self.deadline

    def failed(self, now: float) -> None:
        """A renewal failed without ending the lease: try again soon; the
        deadline still rules."""
        self.due = now + min(self.ttl / 10, 1.0)

    def attempt_timeout(self) -> float:
        """A third of the TTL per attempt (as the Go client's), so that a
        hung member leaves time to renew through another before the
        deadline."""
        return max(self.ttl / 3, 0.1)

    def late(self, received: float) -> bool:
        """Whether a grant that arrived at ``received`` came more than TTL/3
        after its request went out: it is confirmed by a renewal first."""
        return received - self.confirmed > self.ttl / 3
