"""A held lock, kept alive in a background thread; and the keep-alive
itself (:class:`KeptAlive`), which a session's lease uses too.

The deadline rule (the Go client's, ``api/client/doc.go``; its arithmetic
is :class:`fencer.deadline.LeaseClock`, shared with the asyncio client): the
server starts or extends a lease when it handles the request, never before
the client sent it. So the client measures the lease from the monotonic send
time of its last confirmed renewal (or of the acquire) and stops believing in
it at that time plus TTL minus a margin (TTL/10, at least 50 ms, at most
TTL/2), before the server could expire it. Renewals go out at about TTL/3
with jitter, so two can fail before the deadline; a refused renewal (410
lease_lost) ends the lease at once. :meth:`Lease.check` reads the clock itself, so a process paused past its
deadline sees the loss on its first look, before the thread runs.

Only a renewal the server answered as the contract says confirms the lease:
a redirect, an empty or non-JSON answer, or one naming another grant or TTL
is a :class:`~fencer.errors.BadAnswer`, which confirms nothing, so renewals
that keep getting one leave the lease to its local deadline.

A grant under a session has none of this of its own: its session's lease
is kept alive by the same code, and the grant ends when the session does.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, MutableMapping, Optional

from . import calls
from .deadline import LeaseClock, margin  # noqa: F401 (margin: part of this module's API)
from .errors import FencerError, LeaseLost

if TYPE_CHECKING:  # pragma: no cover
    import urllib.request

    from .client import Client, Response
    from .session import Session


class KeptAlive:
    """The local deadline and keep-alive of one lease on the server, a
    grant's or a session's: ``_ended`` is set, and :meth:`check` raises the
    cause, once it may be lost. Subclasses say how to renew it
    (:meth:`_send_renewal`), which refusals end it (:meth:`_ends`), what it
    is called in messages (``what``) and how to give it back
    (:meth:`_give_back`)."""

    what = "lease"
    _gave_back = "released it"

    def __init__(self, client: "Client", ttl_ms: int, start: float) -> None:
        self._client = client
        self._clock = LeaseClock(ttl_ms, start)
        #: The TTL as granted, in milliseconds: every renewal must report it.
        self.ttl_ms: int = self._clock.ttl_ms
        self.ttl: float = self._clock.ttl
        self.margin = self._clock.margin
        self._ended = threading.Event()
        self._mu = threading.Lock()
        self._cause: Optional[FencerError] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ---- what a subclass says ----------------------------------------------

    def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        raise NotImplementedError

    def _ends(self, err: FencerError) -> bool:
        """Whether a refused renewal means the lease is gone."""
        return isinstance(err, LeaseLost)

    def _give_back(self) -> None:
        raise NotImplementedError

    def _on_end(self, cause: FencerError) -> None:
        """Called once, as the lease ends, before ``_ended`` is set."""

    # ---- the deadline ----------------------------------------------------

    @property
    def _confirmed(self) -> float:
        """The send time of the last confirmed acquire or renewal (the
        caller holds ``_mu``)."""
        return self._clock.confirmed

    @_confirmed.setter
    def _confirmed(self, sent: float) -> None:
        self._clock.confirmed = sent

    @property
    def deadline(self) -> float:
        """The local deadline on the :func:`time.monotonic` clock."""
        with self._mu:
            return self._clock.deadline

    def _confirm(self, sent: float) -> None:
        with self._mu:
            if self._cause is None:
                self._clock.confirm(sent)

    def _lose(self, cause: FencerError) -> None:
        with self._mu:
            if self._cause is not None:
                return
            self._cause = cause
        self._on_end(cause)
        self._ended.set()

    def _check_deadline(self) -> None:
        now = time.monotonic()
        with self._mu:
            expired = self._cause is None and self._clock.expired(now)
            err = self._clock.expiry(now, self.what, self._expired_code) if expired else None
        if err is not None:
            self._lose(err)

    _expired_code = "lease_lost"

    def check(self) -> None:
        """Raise the cause (a :class:`LeaseLost`, :class:`LeaseExpired` for
        the local deadline) if the lease may be lost; return otherwise."""
        self._check_deadline()
        if self._cause is not None:
            raise self._cause

    @property
    def valid(self) -> bool:
        """True while the lease is believed held."""
        self._check_deadline()
        return self._cause is None

    # ---- renewals --------------------------------------------------------

    def renew(self) -> None:
        """Renew now, bounded by the local deadline. A refusal ends the lease
        and is raised; other failures leave it to the deadline."""
        try:
            resp = self._send_renewal(self.deadline, self._attempt_timeout())
        except FencerError as e:
            if self._ends(e):
                self._lose(e)
            raise
        self._confirm(resp.sent)
        self.check()

    def _confirm_late(self, received: float) -> None:
        """Confirm a late grant by one renewal before handing it out (see
        Client.acquire); give it back if that fails. The renewal is bounded
        by a TTL after the grant arrived, not by the stale deadline: the
        server started the lease before it answered."""
        try:
            resp = self._send_renewal(received + self.ttl, self._attempt_timeout())
            self._confirm(resp.sent)
            self.check()
        except FencerError as cause:
            self._lose(cause if isinstance(cause, LeaseLost) else LeaseLost(str(cause), code=cause.code))
            try:
                self._give_back()
                after = self._gave_back
            except LeaseLost:
                after = "it had ended already"
            except FencerError as e:
                after = "giving it back failed too (%s); the server frees it within %gs" % (e, self.ttl)
            raise LeaseLost("%s was granted, but the grant could not be confirmed: %s; %s"
                            % (self.what, cause, after), code=cause.code, status=cause.status) from cause

    def _attempt_timeout(self) -> float:
        return self._clock.attempt_timeout()

    def _start(self, keep_alive: bool) -> None:
        self._thread = threading.Thread(target=self._watch, args=(keep_alive,),
                                        name="fencer-%s" % self.what, daemon=True)
        self._thread.start()

    def _watch(self, keep_alive: bool) -> None:
        while True:
            with self._mu:
                wake, due = self._clock.wake(keep_alive), self._clock.due
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            self._check_deadline()
            if self._cause is not None:
                return
            if keep_alive and time.monotonic() >= due:
                try:
                    self.renew()
                except FencerError:
                    if self._cause is not None:
                        return
                    with self._mu:
                        self._clock.failed(time.monotonic())

    def _halt(self) -> None:
        """Stop the keep-alive thread (and wait for it, unless it is the
        caller)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class Lease(KeptAlive):
    """A grant of a lock: ``token`` (pass it to every write the lock
    protects), ``lost`` (a :class:`threading.Event` set as soon as the lease
    may be lost) and :meth:`check` (raises :class:`LeaseLost` once it is).

    A grant held under a :class:`~fencer.session.Session` (``session`` is
    set) has no deadline or keep-alive of its own: it is believed while its
    session is, ends when the session does, and :meth:`renew` renews the
    session (the server refuses a renewal of the grant itself, 409
    session_grant)."""

    def __init__(self, client: "Client", grant: Dict[str, Any], start: float, kind: str = "locks",
                 session: "Optional[Session]" = None) -> None:
        super().__init__(client, grant["ttl_ms"], start)
        #: "locks" or "semaphores" (a permit: ``limit`` is the semaphore's).
        self.kind = kind
        self.name: str = grant["lock"] if kind == "locks" else grant["semaphore"]
        self.limit: int = int(grant.get("limit", 1))
        self.holder: str = grant.get("holder", "")
        self.token: int = int(grant["token"])
        #: The log index of the entry that enqueued this grant's durable
        #: waiter (``durable=True``); 0 for any other grant.
        self.wait_index: int = int(grant.get("wait_index") or 0)
        self.secret: str = grant["lease"]
        self.existing: bool = bool(grant.get("existing", False))
        #: The value published with the grant (an election's leader's), or "".
        self.value: str = grant.get("value", "")
        #: The session the grant lives under, or None.
        self.session = session
        #: "shared" for a lock's shared grant, "exclusive" otherwise.
        self.mode: str = grant.get("mode") or "exclusive"
        self.what = "%s %r token %d" % ("lock" if kind == "locks" else "semaphore", self.name, self.token)
        self._released = False

    @property
    def lost(self) -> threading.Event:
        """Set as soon as the lease may be lost."""
        return self._ended

    def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        return self._client.renew(self.name, self.token, self.secret, deadline=deadline, kind=self.kind,
                                  ttl_ms=self.ttl_ms, attempt_timeout=attempt_timeout)

    def _give_back(self) -> None:
        self._client.release(self.name, self.token, self.secret, kind=self.kind)

    def _confirm_grant(self, received: float) -> None:
        self._confirm_late(received)

    # A grant under a session reads its session's deadline: the session's
    # own check ends the session, and with it this grant, once it passes.

    @property
    def deadline(self) -> float:
        """The local deadline on the :func:`time.monotonic` clock (its
        session's, for a grant under one)."""
        if self.session is not None:
            return self.session.deadline
        return super().deadline

    def _check_deadline(self) -> None:
        if self.session is not None:
            self.session._check_deadline()
            return
        super()._check_deadline()

    def renew(self) -> None:
        """Renew now, bounded by the local deadline. A refusal ends the lease
        and raises LeaseLost; other failures leave it to the deadline. Under
        a session, this renews the session, and with it every grant under
        it."""
        if self.session is not None:
            self.session.renew()
            self.check()
            return
        super().renew()

    # ---- release and fencing ---------------------------------------------

    def release(self) -> None:
        """Stop renewing and give the lock back. Releasing a lease already
        lost is not an error."""
        self._halt()
        with self._mu:
            if self._released:
                return
            self._released = True
            was_lost = self._cause is not None
        self._lose(LeaseLost("%s: released" % self.what, code="lease_lost"))
        if self.session is not None:
            self.session._detach(self)
        try:
            self._give_back()
        except LeaseLost:
            if not was_lost:
                raise

    # ---- elections -------------------------------------------------------

    def proclaim(self, value: str) -> None:
        """Change the value this holder publishes (an election leader's
        address, say); the token, its term, does not change. Raises
        :class:`LeaseLost` when this caller no longer holds the lock."""
        resp = self._client.request("POST", calls.lock_path(self.name, "value"),
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
