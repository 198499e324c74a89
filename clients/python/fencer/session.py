"""A session: one lease, kept alive in one background thread, for many
grants.

A process that holds many locks, permits or elections creates a session
and acquires them under it: the server ties each grant's life to the
session's, so one renewal per TTL/3 keeps them all, and when the session
ends (it expires, or is closed) every grant under it ends in that one log
entry. Each grant still has a token of its own, to fence writes with, and a
lease secret of its own, to release it alone.

The session's lease follows the grant lease's deadline rule (:mod:`fencer.lease`,
the same code): it is believed until the send time of its last confirmed
creation or renewal plus TTL minus a margin, and ``done`` is set then, or at
once when a renewal is refused (410 session_expired, 404 unknown_session,
409 session_mismatch), before the server can expire it. Every grant under
it is lost at that moment too (its ``lost`` is set before ``done``), and its
:meth:`~fencer.Lease.check` reads the session's clock, so a process paused
past the deadline sees the loss on its first look.
"""

from __future__ import annotations

import secrets
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import answer
from .errors import FencerError, LeaseLost, SessionExpired, SessionMismatch, UnknownSession
from .lease import KeptAlive, Lease

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, Response


class Session(KeptAlive):
    """A session of ``client``: ``id`` (the index of the entry that created
    it), ``lease`` (its secret), ``done`` (a :class:`threading.Event` set as
    soon as the session may have ended), :meth:`check`, :meth:`renew`,
    :meth:`close`, and :meth:`lock`, :meth:`acquire_permit` and
    :meth:`campaign`, which return :class:`~fencer.Lease` objects that live
    as long as the session. Use it as a context manager to close it on
    leaving the block."""

    _expired_code = "session_expired"
    _gave_back = "closed it"

    def __init__(self, client: "Client", created: Dict[str, Any], start: float) -> None:
        super().__init__(client, created["ttl_ms"], start)
        self.id: int = int(created["session"])
        #: The session's secret: renew, close and every acquire under it
        #: present it. Never shown by a status read.
        self.lease: str = created["lease"]
        self.holder: str = created["holder"]
        self.existing: bool = bool(created.get("existing", False))
        #: The lock-delay, in milliseconds, of every grant under the session
        #: that asks for none of its own, started if the session expires.
        self.lock_delay_ms = int(created.get("lock_delay_ms", 0))
        self.what = "session %d" % self.id
        # By token, then kind and name: tokens are one sequence, so the
        # token alone would do against a real server.
        self._grants: Dict[Tuple[int, str, str], Lease] = {}
        self._closed = False

    @property
    def done(self) -> threading.Event:
        """Set as soon as the session may have ended: at its local deadline,
        at a refused renewal, or at :meth:`close`."""
        return self._ended

    @property
    def grants(self) -> List[Lease]:
        """The grants this client holds under the session, by token."""
        with self._mu:
            return [self._grants[k] for k in sorted(self._grants)]

    # ---- the lease -------------------------------------------------------

    def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        return self._client.renew_session(self.id, self.lease, ttl_ms=self.ttl_ms, deadline=deadline,
                                          attempt_timeout=attempt_timeout)

    def _ends(self, err: FencerError) -> bool:
        # The session is gone, forgotten, or no longer ours: no later
        # renewal can succeed.
        return isinstance(err, (LeaseLost, UnknownSession, SessionMismatch))

    def _give_back(self) -> None:
        self._client.close_session(self.id, self.lease)

    def _on_end(self, cause: FencerError) -> None:
        # Every grant under the session is lost before done is set, so that
        # a caller woken by done finds them lost.
        lost = cause if isinstance(cause, LeaseLost) else LeaseLost("%s ended: %s" % (self.what, cause), code=cause.code,
                                                                     status=cause.status, body=cause.body)
        with self._mu:
            grants = list(self._grants.values())
        for g in grants:
            g._lose(lost)

    def _attach(self, grant: Lease) -> None:
        with self._mu:
            ended = self._cause
            if ended is None:
                self._grants[_key(grant)] = grant
        if ended is not None:
            # The session ended while the acquire was out: the server ended
            # the grant with it (or will, at the same deadline).
            grant._lose(ended if isinstance(ended, LeaseLost) else LeaseLost(str(ended), code=ended.code))

    def _detach(self, grant: Lease) -> None:
        with self._mu:
            self._grants.pop(_key(grant), None)

    def close(self) -> List[Dict[str, Any]]:
        """Stop renewing and end the session, and with it every grant under
        it, in one entry; return what the server released (dicts with
        ``kind``, ``name`` and ``token``). Closing a session already ended
        is not an error and returns []; a retry that finds the session gone
        after an earlier attempt's answer was lost returns the grants this
        client held under it."""
        self._halt()
        with self._mu:
            if self._closed:
                return []
            self._closed = True
            was_lost = self._cause is not None
            held = [{"kind": "lock" if g.kind == "locks" else "semaphore", "name": g.name, "token": g.token}
                    for _, g in sorted(self._grants.items())]
        self._lose(SessionExpired("%s: closed" % self.what, code="session_expired"))
        try:
            return self._client.close_session(self.id, self.lease)
        except (SessionExpired, UnknownSession) as e:
            if getattr(e, "lost_answers", 0):
                return held
            if not was_lost:
                raise
            return []

    def status(self) -> Dict[str, Any]:
        """The server's view of the session (:meth:`Client.get_session`)."""
        return self._client.get_session(self.id)

    # ---- grants under the session -----------------------------------------

    def _body(self, holder: Optional[str], wait: float, lock_delay: float) -> Dict[str, Any]:
        from .client import MAX_WAIT  # client imports this module
        from .errors import InvalidRequest
        if not 0 <= wait <= MAX_WAIT:
            raise InvalidRequest("wait %r: want 0 to %g seconds" % (wait, MAX_WAIT), code="invalid_wait", status=400)
        # An acquire under a session that may have ended would be refused,
        # or worse, granted for a moment the client could not trust.
        self.check()
        body: Dict[str, Any] = {"holder": holder or self.holder, "wait_ms": int(wait * 1000),
                                "request_id": secrets.token_hex(16),
                                "session": self.id, "session_lease": self.lease}
        if lock_delay:
            body["lock_delay_ms"] = int(lock_delay * 1000)
        return body

    def lock(self, name: str, wait: float = 0.0, *, holder: Optional[str] = None,
             lock_delay: float = 0.0, value: Optional[str] = None, mode: str = "exclusive") -> Lease:
        """Take lock ``name`` under the session, queueing up to ``wait``
        seconds (:meth:`Client.acquire`'s rules, without a TTL: the grant
        lives as long as the session). ``holder`` defaults to the
        session's; ``lock_delay`` to the session's; ``mode`` as
        :meth:`Client.acquire`'s."""
        from .client import _set_mode  # client imports this module
        body = self._body(holder, wait, lock_delay)
        if value is not None:
            body["value"] = value
        _set_mode(body, mode)
        return self._client._acquire("locks", name, body, wait, False, session=self)

    def acquire_permit(self, name: str, limit: int, wait: float = 0.0, *, holder: Optional[str] = None,
                       lock_delay: float = 0.0) -> Lease:
        """Take one of ``limit`` permits of semaphore ``name`` under the
        session (:meth:`Client.acquire_permit`'s rules, without a TTL)."""
        body = self._body(holder, wait, lock_delay)
        body["limit"] = int(limit)
        return self._client._acquire("semaphores", name, body, wait, False, session=self)

    def semaphore(self, name: str, limit: int, wait: float = 0.0, **kw: Any) -> Lease:
        """Like :meth:`acquire_permit`, for ``with session.semaphore(...) as permit:``."""
        return self.acquire_permit(name, limit, wait, **kw)

    def campaign(self, name: str, value: str, *, timeout: Optional[float] = None,
                 holder: Optional[str] = None, lock_delay: float = 0.0) -> Lease:
        """Lead election ``name`` with ``value`` published, under the
        session (:meth:`Client.campaign`'s rules): the term lasts as long as
        the session, or until :meth:`~fencer.Lease.resign`."""
        from .client import _campaign
        return _campaign(lambda wait: self.lock(name, wait, holder=holder, lock_delay=lock_delay, value=value), timeout)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        except LeaseLost:
            pass  # the body learns of a loss through done and check(); leaving is not the place

    def __repr__(self) -> str:
        return "Session(%d, grants=%d, done=%s)" % (self.id, len(self._grants), self._ended.is_set())


def _key(grant: Lease) -> Tuple[int, str, str]:
    return (grant.token, grant.kind, grant.name)
