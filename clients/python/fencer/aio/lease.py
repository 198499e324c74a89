"""A held grant on an event loop: its local deadline, its keep-alive task,
and how its loss reaches the code running under it.

The deadline rule is the synchronous client's and the Go client's, from
one copy (:class:`fencer.deadline.LeaseClock`): a lease is measured from the monotonic send time of
its last confirmed acquire or renewal and given up at that time + TTL −
margin (TTL/10, at least 50 ms), before the server could expire it.
Renewals go out at about TTL/3 with jitter, each bounded by the deadline; a
refused one (410 lease_lost, revoked) ends the lease at once.
:meth:`KeptAlive.check` reads the clock itself, so a loop that was blocked
(or a process that was stopped) past the deadline sees the loss on its
first look, before the keep-alive task runs.

Loss is signalled two ways: ``lost`` (an :class:`asyncio.Event`) is set,
and every task guarded by the lease (the body of ``async with``,
:meth:`Lease.run`) is cancelled; the guarded code then sees
:class:`~fencer.errors.LeaseLost`, not a bare ``CancelledError``. The token
belongs to the lease object and nothing else: no task-local or
thread-local state, so tasks holding different leases never see each
other's tokens.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Set,
                    TypeVar)

from .. import answer, calls
from ..deadline import LeaseClock
from ..errors import FencerError, InvalidRequest, LeaseLost

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Response
    from .client import Client
    from .session import Session

T = TypeVar("T")


class KeptAlive:
    """The local deadline and keep-alive of one lease on the server, a
    grant's, a multi-lock's or a session's. Subclasses say how to renew it
    (:meth:`_send_renewal`), which refusals end it (:meth:`_ends`) and how
    to give it back (:meth:`_give_back`)."""

    what = "lease"
    _gave_back = "released it"
    _expired_code = "lease_lost"

    def __init__(self, client: "Client", ttl_ms: int, start: float) -> None:
        self._client = client
        self._clock = LeaseClock(ttl_ms, start)
        #: The TTL as granted, in milliseconds: every renewal must report it.
        self.ttl_ms: int = self._clock.ttl_ms
        self.ttl: float = self._clock.ttl
        self.margin = self._clock.margin
        self._ended = asyncio.Event()
        self._cause: Optional[FencerError] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._guarded: Set["asyncio.Task[Any]"] = set()
        self._cancelled: Set["asyncio.Task[Any]"] = set()

    # ---- what a subclass says ----------------------------------------------

    async def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        raise NotImplementedError

    def _ends(self, err: FencerError) -> bool:
        """Whether a refused renewal means the lease is gone."""
        return isinstance(err, LeaseLost)

    async def _give_back(self) -> None:
        raise NotImplementedError

    def _on_end(self, cause: FencerError) -> None:
        """Called once, as the lease ends, before ``_ended`` is set."""

    # ---- the deadline ------------------------------------------------------

    @property
    def deadline(self) -> float:
        """The local deadline on the :func:`time.monotonic` clock."""
        return self._clock.deadline

    @property
    def cause(self) -> Optional[FencerError]:
        """Why the lease ended (a :class:`LeaseLost`, :class:`LeaseExpired`
        for the local deadline, :class:`~fencer.errors.Revoked`…), or None."""
        return self._cause

    def _confirm(self, sent: float) -> None:
        if self._cause is None:
            self._clock.confirm(sent)

    def _lose(self, cause: FencerError, *, asked: bool = False) -> None:
        """End the lease with ``cause``: ``lost`` is set and the guarded
        tasks are cancelled, unless the caller ``asked`` for the end (a
        release or close is not a loss)."""
        if self._cause is not None:
            return
        self._cause = cause
        self._on_end(cause)
        self._ended.set()
        if asked:
            self._guarded.clear()
            return
        for task in list(self._guarded):
            if not task.done():
                self._cancelled.add(task)
                task.cancel()

    def _check_deadline(self) -> None:
        now = time.monotonic()
        if self._cause is None and self._clock.expired(now):
            self._lose(self._clock.expiry(now, self.what, self._expired_code))

    def check(self) -> None:
        """Raise the cause (a :class:`LeaseLost`) if the lease may be lost;
        return otherwise."""
        self._check_deadline()
        if self._cause is not None:
            raise self._cause

    @property
    def valid(self) -> bool:
        """True while the lease is believed held."""
        self._check_deadline()
        return self._cause is None

    # ---- renewals ----------------------------------------------------------

    async def renew(self) -> None:
        """Renew now, bounded by the local deadline. A refusal ends the
        lease and is raised; other failures leave it to the deadline."""
        try:
            resp = await self._send_renewal(self.deadline, self._attempt_timeout())
        except FencerError as e:
            if self._ends(e):
                self._lose(e)
            raise
        self._confirm(resp.sent)
        self.check()

    async def _confirm_late(self, received: float) -> None:
        """Confirm a late grant by one renewal before handing it out; give
        it back if that fails. The renewal is bounded by a TTL after the
        grant arrived, not by the stale deadline: the server started the
        lease before it answered."""
        try:
            resp = await self._send_renewal(received + self.ttl, self._attempt_timeout())
            self._confirm(resp.sent)
            self.check()
        except FencerError as cause:
            self._lose(cause if isinstance(cause, LeaseLost) else LeaseLost(str(cause), code=cause.code))
            try:
                await self._give_back()
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
        self._task = asyncio.ensure_future(self._keep(keep_alive))

    async def _keep(self, keep_alive: bool) -> None:
        """The keep-alive task: wakes at the next renewal or the deadline,
        whichever is first."""
        while True:
            await asyncio.sleep(max(0.0, self._clock.wake(keep_alive) - time.monotonic()))
            self._check_deadline()
            if self._cause is not None:
                return
            if keep_alive and time.monotonic() >= self._clock.due:
                try:
                    await self.renew()
                except FencerError:
                    if self._cause is not None:
                        return
                    self._clock.failed(time.monotonic())

    async def _halt(self) -> None:
        """Stop the keep-alive task (unless it is the caller)."""
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if task.cancelled() and _cancelling(asyncio.current_task()):
                    raise

    # ---- guarding the code that runs under it ------------------------------

    def _guard(self, task: "asyncio.Task[Any]") -> None:
        if self._cause is not None:
            raise self._cause
        self._guarded.add(task)

    def _unguard(self, task: "asyncio.Task[Any]") -> bool:
        """Stop guarding ``task``; True if it was cancelled for a loss."""
        self._guarded.discard(task)
        if task in self._cancelled:
            self._cancelled.discard(task)
            return True
        return False

    def _lost_error(self) -> LeaseLost:
        cause = self._cause
        if isinstance(cause, LeaseLost):
            return cause
        return LeaseLost("%s: %s" % (self.what, cause), code=getattr(cause, "code", "lease_lost") or "lease_lost")

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in a task of its own and return its result; if
        the lease is lost first, cancel it and raise
        :class:`~fencer.errors.LeaseLost` (the cause)."""
        self.check()
        task = asyncio.ensure_future(fn(*args))
        self._guard(task)
        try:
            return await task
        except asyncio.CancelledError:
            if self._unguard(task) and not _cancelling(asyncio.current_task()):
                raise self._lost_error() from None
            raise
        finally:
            self._unguard(task)

    async def _enter(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._guard(task)

    async def _exit(self, exc: Optional[BaseException], give_back: Callable[[], Awaitable[Any]]) -> None:
        """Leave an ``async with`` block: stop guarding the task, give the
        lease back, and turn a cancellation made for a loss into
        LeaseLost. A loss found after the body ended (the cancel not yet
        delivered) still comes out as LeaseLost."""
        task = asyncio.current_task()
        for_loss = task is not None and self._unguard(task)
        try:
            await asyncio.shield(_quietly(give_back))
        except (asyncio.CancelledError, FencerError):
            if not for_loss:
                raise
        if for_loss:
            if task is not None and sys.version_info >= (3, 11):
                task.uncancel()
                if task.cancelling():
                    raise asyncio.CancelledError()  # cancelled from outside too
            raise self._lost_error() from exc


async def _quietly(fn: Callable[[], Awaitable[Any]]) -> None:
    try:
        await fn()
    except LeaseLost:
        pass  # the body learns of a loss through lost, check() and cancellation; leaving is not the place


def _cancelling(task: "Optional[asyncio.Task[Any]]") -> bool:
    """Whether ``task`` itself is being cancelled (Python 3.11+ can tell)."""
    return task is not None and sys.version_info >= (3, 11) and task.cancelling() > 0


class Lease(KeptAlive):
    """A grant of a lock or a semaphore's permit: ``token`` (send it with
    every write the lock protects), ``lost`` (an :class:`asyncio.Event`
    set as soon as the lease may be lost) and :meth:`check`. Under a
    :class:`~fencer.aio.Session` (``session`` set) it has no deadline or
    keep-alive of its own: it is believed while its session is."""

    def __init__(self, client: "Client", grant: Dict[str, Any], start: float, kind: str = "locks",
                 session: "Optional[Session]" = None) -> None:
        super().__init__(client, grant["ttl_ms"], start)
        #: "locks" or "semaphores" (a permit: ``limit`` is the semaphore's).
        self.kind = kind
        self.name: str = grant["lock"] if kind == "locks" else grant["semaphore"]
        self.limit: int = int(grant.get("limit", 1))
        self.holder: str = grant.get("holder", "")
        self.token: int = int(grant["token"])
        self.secret: str = grant["lease"]
        self.existing: bool = bool(grant.get("existing", False))
        #: The value published with the grant (an election leader's), or "".
        self.value: str = grant.get("value", "")
        self.session = session
        #: "shared" for a lock's shared grant, "exclusive" otherwise.
        self.mode: str = grant.get("mode") or "exclusive"
        self.what = "%s %r token %d" % ("lock" if kind == "locks" else "semaphore", self.name, self.token)
        self._released = False

    @property
    def lost(self) -> asyncio.Event:
        """Set as soon as the lease may be lost."""
        return self._ended

    async def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        return await self._client.renew(self.name, self.token, self.secret, deadline=deadline, kind=self.kind,
                                        ttl_ms=self.ttl_ms, attempt_timeout=attempt_timeout)

    async def _give_back(self) -> None:
        await self._client.release(self.name, self.token, self.secret, kind=self.kind)

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

    async def renew(self) -> None:
        """Renew now (the session, for a grant under one)."""
        if self.session is not None:
            await self.session.renew()
            self.check()
            return
        await super().renew()

    async def release(self) -> None:
        """Stop renewing and give the grant back. Releasing a lease already
        lost is not an error."""
        await self._halt()
        if self._released:
            return
        self._released = True
        was_lost = self._cause is not None
        self._lose(LeaseLost("%s: released" % self.what, code="lease_lost"), asked=True)
        if self.session is not None:
            self.session._detach(self)
        try:
            await self._give_back()
        except LeaseLost:
            if not was_lost:
                raise

    async def proclaim(self, value: str) -> None:
        """Change the value this holder publishes (an election leader's
        address); the token, its term, stays. LeaseLost once it no longer
        holds."""
        self.check()
        resp = await self._client.request("POST", calls.lock_path(self.name, "value"),
                                          {"lease": self.secret, "token": self.token, "value": value})
        self.value = resp.json().get("value", value)

    async def resign(self) -> None:
        """Step down from leading an election: :meth:`release`."""
        await self.release()

    async def __aenter__(self) -> "Lease":
        await self._enter()
        return self

    async def __aexit__(self, et: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc, self.release)

    def headers(self, headers: Optional[MutableMapping[str, str]] = None, *, lock: bool = True) -> MutableMapping[str, str]:
        """``Fencing-Token`` (and, for a lock, ``Fencing-Lock``) added to
        ``headers`` (a new dict if None): pass it to any HTTP call the lock
        protects."""
        h: MutableMapping[str, str] = {} if headers is None else headers
        h["Fencing-Token"] = str(self.token)
        if lock and self.kind == "locks":
            h["Fencing-Lock"] = self.name
        return h

    async def put(self, key: str, value: bytes) -> int:
        """A fenced write of ``key`` with this lease's token and lock;
        checks the lease first."""
        self.check()
        return await self._client.put(key, value, self.token, lock=self.name if self.kind == "locks" else None)

    def __repr__(self) -> str:
        return "Lease(%r, token=%d, lost=%s)" % (self.name, self.token, self._ended.is_set())


class MultiLock(KeptAlive):
    """A held multi-lock: every lock of ``names`` with the one ``token`` and
    one lease, kept alive as a :class:`Lease`'s; :meth:`release` frees every
    name at once."""

    def __init__(self, client: "Client", grant: Dict[str, Any], start: float) -> None:
        super().__init__(client, grant["ttl_ms"], start)
        self.names: List[str] = list(grant["names"])
        self.holder: str = grant.get("holder", "")
        self.token: int = int(grant["token"])
        self.secret: str = grant["lease"]
        self.existing: bool = bool(grant.get("existing", False))
        self.what = "multi-lock %s token %d" % (",".join(self.names), self.token)
        self._released = False

    @property
    def lost(self) -> asyncio.Event:
        """Set as soon as the multi-lock may be lost."""
        return self._ended

    async def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        resp = await self._client.request("POST", "/v1/locks/renew", {"lease": self.secret, "token": self.token},
                                          deadline=deadline, attempt_timeout=attempt_timeout)
        answer.multi_renewal(resp.json(), what=self.what, token=self.token, ttl_ms=self.ttl_ms)
        return resp

    async def _give_back(self) -> None:
        try:
            await self._client.request("POST", "/v1/locks/release", {"lease": self.secret, "token": self.token})
        except LeaseLost as e:
            if not getattr(e, "lost_answers", 0):
                raise

    async def release(self) -> None:
        """Stop renewing and free every name, in one entry."""
        await self._halt()
        if self._released:
            return
        self._released = True
        was_lost = self._cause is not None
        self._lose(LeaseLost("%s: released" % self.what, code="lease_lost"), asked=True)
        try:
            await self._give_back()
        except LeaseLost:
            if not was_lost:
                raise

    async def __aenter__(self) -> "MultiLock":
        await self._enter()
        return self

    async def __aexit__(self, et: Any, exc: Optional[BaseException], tb: Any) -> None:
        await self._exit(exc, self.release)

    def headers(self, name: str, headers: Optional[MutableMapping[str, str]] = None) -> MutableMapping[str, str]:
        """``Fencing-Token`` and ``Fencing-Lock: name`` (one of ``names``)."""
        if name not in self.names:
            raise InvalidRequest("%r is not a lock of %s" % (name, self.what))
        h: MutableMapping[str, str] = {} if headers is None else headers
        h["Fencing-Token"] = str(self.token)
        h["Fencing-Lock"] = name
        return h

    async def put(self, key: str, value: bytes, *, lock: Optional[str] = None) -> int:
        """A fenced write of ``key`` with the token, checked against lock
        ``lock`` (one of ``names``; the first when None)."""
        self.check()
        return await self._client.put(key, value, self.token, lock=lock or self.names[0])

    def __repr__(self) -> str:
        return "MultiLock(%r, token=%d, lost=%s)" % (self.names, self.token, self._ended.is_set())
