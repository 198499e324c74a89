"""A session on an event loop: one lease, one keep-alive task, many grants
(the synchronous :mod:`fencer.session`'s rules). When it ends, every grant
under it is lost first (their ``lost`` set, their guarded tasks cancelled),
then ``done`` is set."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .. import calls
from ..errors import FencerError, LeaseLost, SessionExpired, SessionMismatch, UnknownSession
from .lease import KeptAlive, Lease

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Response
    from .client import Client


class Session(KeptAlive):
    """A session: ``id``, ``lease`` (its secret), ``done`` (an
    :class:`asyncio.Event` set as soon as it may have ended),
    :meth:`check`, :meth:`renew`, :meth:`close`, and :meth:`lock`,
    :meth:`acquire_permit` and :meth:`campaign`, whose leases live as long
    as it. ``async with`` closes it on leaving, and cancels the block if the
    session is lost."""

    _expired_code = "session_expired"
    _gave_back = "closed it"

    def __init__(self, client: "Client", created: Dict[str, Any], start: float) -> None:
        super().__init__(client, created["ttl_ms"], start)
        self.id: int = int(created["session"])
        self.lease: str = created["lease"]
        self.holder: str = created["holder"]
        self.existing: bool = bool(created.get("existing", False))
        self.lock_delay_ms = int(created.get("lock_delay_ms", 0))
        self.what = "session %d" % self.id
        self._grants: Dict[Tuple[int, str, str], Lease] = {}
        self._closed = False

    @property
    def done(self) -> asyncio.Event:
        """Set as soon as the session may have ended: at its local deadline,
        at a refused renewal, or at :meth:`close`."""
        return self._ended

    @property
    def grants(self) -> List[Lease]:
        """The grants this client holds under the session, by token."""
        return [self._grants[k] for k in sorted(self._grants)]

    async def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        return await self._client.renew_session(self.id, self.lease, ttl_ms=self.ttl_ms, deadline=deadline,
                                                attempt_timeout=attempt_timeout)

    def _ends(self, err: FencerError) -> bool:
        return isinstance(err, (LeaseLost, UnknownSession, SessionMismatch))

    async def _give_back(self) -> None:
        await self._client.close_session(self.id, self.lease)

    def _on_end(self, cause: FencerError) -> None:
        lost = cause if isinstance(cause, LeaseLost) else LeaseLost("%s ended: %s" % (self.what, cause), code=cause.code,
                                                                     status=cause.status, body=cause.body)
        asked = self._closed
        for g in list(self._grants.values()):
            g._lose(lost, asked=asked)

    def _attach(self, grant: Lease) -> None:
        if self._cause is not None:
            # The session ended while the acquire was out: the server ended
            # the grant with it (or will, at the same deadline).
            grant._lose(self._lost_error())
            return
        self._grants[_key(grant)] = grant

    def _detach(self, grant: Lease) -> None:
        self._grants.pop(_key(grant), None)

    async def close(self) -> List[Dict[str, Any]]:
        """Stop renewing and end the session and every grant under it, in
        one entry; return what the server released (``kind``, ``name``,
        ``token``). Closing a session already ended returns []."""
        await self._halt()
        if self._closed:
            return []
        self._closed = True
        was_lost = self._cause is not None
        held = [{"kind": "lock" if g.kind == "locks" else "semaphore", "name": g.name, "token": g.token}
                for _, g in sorted(self._grants.items())]
        self._lose(SessionExpired("%s: closed" % self.what, code="session_expired"), asked=True)
        try:
            return await self._client.close_session(self.id, self.lease)
        except (SessionExpired, UnknownSession) as e:
            if getattr(e, "lost_answers", 0):
                return held
            if not was_lost:
                raise
            return []

    async def status(self) -> Dict[str, Any]:
        """The server's view of the session."""
        return await self._client.get_session(self.id)

    # ---- grants under the session -----------------------------------------

    def _body(self, holder: Optional[str], wait: float, lock_delay: float) -> Dict[str, Any]:
        # An acquire under a session that may have ended would be refused,
        # or worse, granted for a moment the client could not trust.
        self.check()
        return calls.under_session_body(self.id, self.lease, holder or self.holder, wait, lock_delay=lock_delay)

    async def lock(self, name: str, wait: float = 0.0, *, holder: Optional[str] = None,
                   lock_delay: float = 0.0, value: Optional[str] = None, mode: str = "exclusive") -> Lease:
        """Take lock ``name`` under the session, queueing up to ``wait``
        seconds; the grant lives as long as the session."""
        body = self._body(holder, wait, lock_delay)
        if value is not None:
            body["value"] = value
        calls.set_mode(body, mode)
        return await self._client._acquire("locks", name, body, wait, False, session=self)

    async def acquire_permit(self, name: str, limit: int, wait: float = 0.0, *, holder: Optional[str] = None,
                             lock_delay: float = 0.0) -> Lease:
        """Take one of ``limit`` permits of semaphore ``name`` under the
        session."""
        body = self._body(holder, wait, lock_delay)
        body["limit"] = int(limit)
        return await self._client._acquire("semaphores", name, body, wait, False, session=self)

    async def campaign(self, name: str, value: str, *, timeout: Optional[float] = None,
                       holder: Optional[str] = None, lock_delay: float = 0.0) -> Lease:
        """Lead election ``name`` with ``value`` published, under the
        session."""
        from .client import campaign
        return await campaign(lambda wait: self.lock(name, wait, holder=holder, lock_delay=lock_delay, value=value), timeout)

    async def __aenter__(self) -> "Session":
        await self._enter()
        return self

    async def __aexit__(self, et: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc, self.close)

    def __repr__(self) -> str:
        return "Session(%d, grants=%d, done=%s)" % (self.id, len(self._grants), self._ended.is_set())


def _key(grant: Lease) -> Tuple[int, str, str]:
    return (grant.token, grant.kind, grant.name)
