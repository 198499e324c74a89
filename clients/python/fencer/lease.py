"""A held lock, kept alive in a background thread.

The deadline rule (the Go client's, ``api/client/doc.go``): the server starts
or extends a lease when it handles the request, never before the client sent
it. So the client measures the lease from the monotonic send time of its last
confirmed renewal (or of the acquire) and stops believing in it at that time
plus TTL minus a margin (TTL/10, at least 50 ms, at most TTL/2), before the
server could expire it. Renewals go out at about TTL/3 with jitter, so two can
fail before the deadline; a refused renewal (410 lease_lost) ends the lease at
once. :meth:`Lease.check` reads the clock itself, so a process paused past its
deadline sees the loss on its first look, before the thread runs.

Only a renewal the server answered as the contract says confirms the lease:
a redirect, an empty or non-JSON answer, or one naming another grant or TTL
is a :class:`~fencer.errors.BadAnswer`, which confirms nothing, so renewals
that keep getting one leave the lease to its local deadline.
"""

from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, MutableMapping, Optional

from .errors import FencerError, LeaseExpired, LeaseLost

if TYPE_CHECKING:  # pragma: no cover
    import urllib.request

    from .client import Client


def margin(ttl: float) -> float:
    """The safety margin by which the local deadline precedes the server's."""
    return min(max(ttl / 10, 0.05), ttl / 2)


class Lease:
    """A grant of a lock: ``token`` (pass it to every write the lock
    protects), ``lost`` (a :class:`threading.Event` set as soon as the lease
    may be lost) and :meth:`check` (raises :class:`LeaseLost` once it is)."""

    def __init__(self, client: "Client", grant: Dict[str, Any], start: float, kind: str = "locks") -> None:
        self._client = client
        #: "locks" or "semaphores" (a permit: ``limit`` is the semaphore's).
        self.kind = kind
        self.name: str = grant["lock"] if kind == "locks" else grant["semaphore"]
        self.limit: int = int(grant.get("limit", 1))
        self.holder: str = grant.get("holder", "")
        self.token: int = int(grant["token"])
        self.secret: str = grant["lease"]
        #: The TTL as granted, in milliseconds: every renewal must report it.
        self.ttl_ms: int = int(grant["ttl_ms"])
        self.ttl: float = self.ttl_ms / 1000.0
        self.existing: bool = bool(grant.get("existing", False))
        #: The value published with the grant (an election's leader's), or "".
        self.value: str = grant.get("value", "")
        self.margin = margin(self.ttl)
        self.lost = threading.Event()
        self._mu = threading.Lock()
        self._confirmed = start
        self._due = start + self._interval()
        self._cause: Optional[LeaseLost] = None
        self._released = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ---- the deadline ----------------------------------------------------

    def _interval(self) -> float:
        return self.ttl / 3 * (0.8 + 0.2 * random.random())

    @property
    def deadline(self) -> float:
        """The local deadline on the :func:`time.monotonic` clock."""
        with self._mu:
            return self._confirmed + self.ttl - self.margin

    def _confirm(self, sent: float) -> None:
        with self._mu:
            if self.lost.is_set() or sent <= self._confirmed:
                return
            self._confirmed = sent
            self._due = sent + self._interval()

    def _lose(self, cause: LeaseLost) -> None:
        with self._mu:
            if self.lost.is_set():
                return
            self._cause = cause
            self.lost.set()

    def _check_deadline(self) -> None:
        now = time.monotonic()
        with self._mu:
            late = now - self._confirmed
            expired = not self.lost.is_set() and now >= self._confirmed + self.ttl - self.margin
        if expired:
            self._lose(LeaseExpired("lock %r token %d: no renewal confirmed before the local deadline (last confirmed %.3fs ago, ttl %gs, margin %gs)"
                                    % (self.name, self.token, late, self.ttl, self.margin), code="lease_lost"))

    def check(self) -> None:
        """Raise :class:`LeaseLost` (or its subclass :class:`LeaseExpired`) if
        the lease may be lost; return otherwise."""
        self._check_deadline()
        if self.lost.is_set():
            assert self._cause is not None
            raise self._cause

    @property
    def valid(self) -> bool:
        """True while the lease is believed held."""
        self._check_deadline()
        return not self.lost.is_set()

    # ---- renewals --------------------------------------------------------

    def renew(self) -> None:
        """Renew now, bounded by the local deadline. A refusal ends the lease
        and raises LeaseLost; other failures leave it to the deadline."""
        try:
            resp = self._client.renew(self.name, self.token, self.secret, deadline=self.deadline, kind=self.kind,
                                      ttl_ms=self.ttl_ms, attempt_timeout=self._attempt_timeout())
        except LeaseLost as e:
            self._lose(e)
            raise
        self._confirm(resp.sent)
        self.check()

    def _confirm_grant(self, received: float) -> None:
        """Confirm a late grant by one renewal before handing it out (see
        Client.acquire); release it if that fails."""
        try:
            resp = self._client.renew(self.name, self.token, self.secret, deadline=received + self.ttl, kind=self.kind,
                                      ttl_ms=self.ttl_ms, attempt_timeout=self._attempt_timeout())
            self._confirm(resp.sent)
            self.check()
        except FencerError as cause:
            self._lose(cause if isinstance(cause, LeaseLost) else LeaseLost(str(cause), code=cause.code))
            try:
                self._client.release(self.name, self.token, self.secret, kind=self.kind)
                after = "released it"
            except LeaseLost:
                after = "it had ended already"
            except FencerError as e:
                after = "its release failed too (%s); the server frees it within %gs" % (e, self.ttl)
            raise LeaseLost("lock %r granted with token %d, but the grant could not be confirmed: %s; %s"
                            % (self.name, self.token, cause, after), code=cause.code, status=cause.status) from cause

    def _attempt_timeout(self) -> float:
        # A third of the TTL per attempt (as the Go client's), so that a
        # hung node leaves time to renew through another before the deadline.
        return max(self.ttl / 3, 0.1)

    def _start(self, keep_alive: bool) -> None:
        self._thread = threading.Thread(target=self._watch, args=(keep_alive,),
                                        name="fencer-lease-%s" % self.name, daemon=True)
        self._thread.start()

    def _watch(self, keep_alive: bool) -> None:
        while True:
            with self._mu:
                deadline = self._confirmed + self.ttl - self.margin
                due = self._due
            wake = min(deadline, due) if keep_alive else deadline
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            self._check_deadline()
            if self.lost.is_set():
                return
            if keep_alive and time.monotonic() >= due:
                try:
                    self.renew()
                except LeaseLost:
                    return
                except FencerError:
                    with self._mu:  # retry soon; the deadline still rules
                        self._due = time.monotonic() + min(self.ttl / 10, 1.0)

    # ---- release and fencing ---------------------------------------------

    def release(self) -> None:
        """Stop renewing and give the lock back. Releasing a lease already
        lost is not an error."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._mu:
            if self._released:
                return
            self._released = True
        was_lost = self.lost.is_set()
        self._lose(LeaseLost("lock %r token %d: released" % (self.name, self.token), code="lease_lost"))
        try:
            self._client.release(self.name, self.token, self.secret, kind=self.kind)
        except LeaseLost:
            if not was_lost:
                raise

    # ---- elections -------------------------------------------------------

    def proclaim(self, value: str) -> None:
        """Change the value this holder publishes (an election leader's
        address, say); the token, its term, does not change. Raises
        :class:`LeaseLost` when this caller no longer holds the lock."""
        from .client import _lock_path  # client imports this module
        resp = self._client.request("POST", _lock_path(self.name, "value"),
                                    {"lease": self.secret, "token": self.token, "value": value})
        self.value = resp.json().get("value", value)

    def resign(self) -> None:
        """Step down from leading an election: :meth:`release`."""
        self.release()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.release()
        except LeaseLost:
            pass  # the body learns of a loss through check(); leaving is not the place

    def headers(self, headers: Optional[MutableMapping[str, str]] = None, *, lock: bool = True) -> MutableMapping[str, str]:
        """Add ``Fencing-Token`` (and, with ``lock`` and a lock's lease,
        ``Fencing-Lock``) to
        ``headers`` (a new dict if None) and return it: pass the result to
        ``requests`` or any HTTP call the lock protects."""
        h: MutableMapping[str, str] = {} if headers is None else headers
        h["Fencing-Token"] = str(self.token)
        if lock and self.kind == "locks":
            h["Fencing-Lock"] = self.name
        return h

    def fence(self, request: "urllib.request.Request", *, lock: bool = True) -> "urllib.request.Request":
        """Add the fencing headers to a :class:`urllib.request.Request` and
        return it."""
        for k, v in self.headers(lock=lock).items():
            request.add_header(k, v)
        return request

    def put(self, key: str, value: bytes) -> int:
        """A fenced write of ``key`` with this lease's token and lock; checks
        the lease first."""
        self.check()
        return self._client.put(key, value, self.token, lock=self.name if self.kind == "locks" else None)

    def __repr__(self) -> str:
        return "Lease(%r, token=%d, lost=%s)" % (self.name, self.token, self.lost.is_set())
