"""The asyncio client: the synchronous :class:`fencer.Client`'s surface,
every call a coroutine, on one aiohttp session (:mod:`.transport` says
what is retried and believed). Requests, answers and errors are checked by
the same code as the synchronous client's (:mod:`fencer.calls`,
:mod:`fencer.answer`, :mod:`fencer.errors`)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from typing import (Any, AsyncIterator, Awaitable, Callable, Dict, Generator, Generic, List, Optional,
                    Sequence, Tuple, TypeVar)

from .. import answer, calls
from ..client import MAX_ANSWER_BYTES, Response
from ..errors import BadAnswer, LeaseLost, LockDelay, LockHeld, OutcomeUnknown, Revoked, ServerTimeout, StaleToken
from .lease import Lease, MultiLock
from .session import Session
from .transport import Transport
from .watch import FROM_NOW, Watch

T = TypeVar("T")
H = TypeVar("H", Lease, MultiLock, Session)


class Pending(Generic[H]):
    """A grant (or session) being taken: ``await`` it for the handle, or
    ``async with`` it to hold the handle for the block, which releases it
    on leaving and is cancelled (with :class:`~fencer.errors.LeaseLost`
    raised) if it is lost first."""

    def __init__(self, make: Callable[[], Awaitable[H]]) -> None:
        self._make = make
        self._held: Optional[H] = None

    def __await__(self) -> Generator[Any, None, H]:
        return self._make().__await__()

    async def __aenter__(self) -> H:
        self._held = await self._make()
        try:
            return await self._held.__aenter__()
        except LeaseLost:
            # Lost between the grant and the block: give it back all the same.
            await self._held.__aexit__(None, None, None)
            raise

    async def __aexit__(self, et: Any, exc: Optional[BaseException], tb: Any) -> None:
        assert self._held is not None
        await self._held.__aexit__(et, exc, tb)


class Client:
    """An asyncio client of a fencer cluster (the arguments of
    :class:`fencer.Client`). Use it inside one event loop, and close it
    (``await client.close()`` or ``async with Client(...) as client:``)."""

    def __init__(self, endpoints: Sequence[str], *, token: Optional[str] = None,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, timeout: float = 5.0,
                 attempts: int = 10, holder: Optional[str] = None,
                 max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        eps = calls.endpoints(endpoints, "https" if ca_file or cert_file else "http")
        ctx: Optional[ssl.SSLContext] = None
        if any(e.scheme == "https" for e in eps):
            ctx = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                ctx.load_cert_chain(cert_file, key_file)
        self._tr = Transport(eps, auth="Bearer " + token if token else "", ssl_context=ctx,
                             timeout=timeout, attempts=attempts, max_answer_bytes=max_answer_bytes)
        self.holder = holder or "%s:%d" % (socket.gethostname(), os.getpid())

    @property
    def timeout(self) -> float:
        return self._tr.timeout

    async def close(self) -> None:
        """Close the HTTP session (leases still held are not released)."""
        await self._tr.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Response:
        """Any endpoint, with the leader following, retries and checks of
        every call (:meth:`.transport.Transport.request`)."""
        return await self._tr.request(method, path, body, **kw)

    # ---- locks and permits ---------------------------------------------------

    async def acquire(self, name: str, ttl: float = 10.0, wait: float = 0.0, *,
                      holder: Optional[str] = None, keep_alive: bool = True,
                      lock_delay: float = 0.0, value: Optional[str] = None, mode: str = "exclusive") -> Lease:
        """Take lock ``name`` (:meth:`fencer.Client.acquire`'s arguments and
        rules) and keep it alive in a task of its own."""
        body = calls.lock_body(holder or self.holder, ttl, wait, lock_delay=lock_delay, value=value, mode=mode)
        return await self._acquire("locks", name, body, wait, keep_alive)

    def lock(self, name: str, ttl: float = 10.0, wait: float = 0.0, **kw: Any) -> "Pending[Lease]":
        """``async with client.lock(name, ttl=10, wait=5) as lease:``"""
        return Pending(lambda: self.acquire(name, ttl, wait, **kw))

    async def acquire_permit(self, name: str, limit: int, ttl: float = 10.0, wait: float = 0.0, *,
                             holder: Optional[str] = None, keep_alive: bool = True,
                             lock_delay: float = 0.0) -> Lease:
        """Take one of ``limit`` permits of semaphore ``name``."""
        body = calls.permit_body(holder or self.holder, limit, ttl, wait, lock_delay=lock_delay)
        return await self._acquire("semaphores", name, body, wait, keep_alive)

    def semaphore(self, name: str, limit: int, ttl: float = 10.0, wait: float = 0.0, **kw: Any) -> "Pending[Lease]":
        """``async with client.semaphore(name, limit=3) as permit:``"""
        return Pending(lambda: self.acquire_permit(name, limit, ttl, wait, **kw))

    async def _acquire(self, kind: str, name: str, body: Dict[str, Any], wait: float, keep_alive: bool,
                       session: Optional[Session] = None) -> Lease:
        resp = await self.request("POST", calls.path(kind, name, "acquire"), body, extra_timeout=wait)
        grant = answer.grant(resp.json(), kind=kind, name=name, holder=body["holder"],
                             ttl_ms=session.ttl_ms if session is not None else body["ttl_ms"],
                             request_id=body["request_id"], limit=body.get("limit"),
                             session=session.id if session is not None else None,
                             mode=body.get("mode", "") if kind == "locks" else None)
        lease = Lease(self, grant, calls.lease_start(grant, resp.sent, resp.first_sent), kind=kind, session=session)
        if session is not None:
            session._attach(lease)
            return lease
        await _confirm_if_late(lease)
        lease._start(keep_alive)
        return lease

    async def acquire_multi(self, names: Sequence[str], ttl: float = 10.0, *, holder: Optional[str] = None,
                            keep_alive: bool = True, mode: str = "exclusive") -> MultiLock:
        """Take every lock of ``names`` or none, with one token and one
        lease (it does not wait: a held name raises LockHeld); ``mode="shared"``
        takes every name in shared mode."""
        body = calls.multi_body(names, holder or self.holder, ttl, mode=mode)
        resp = await self.request("POST", "/v1/locks/acquire", body)
        grant = answer.multi_grant(resp.json(), names=body["names"], holder=body["holder"], ttl_ms=body["ttl_ms"],
                                   request_id=body["request_id"])
        m = MultiLock(self, grant, calls.lease_start(grant, resp.sent, resp.first_sent))
        await _confirm_if_late(m)
        m._start(keep_alive)
        return m

    def multi_lock(self, names: Sequence[str], ttl: float = 10.0, **kw: Any) -> "Pending[MultiLock]":
        """``async with client.multi_lock(["a", "b"]) as m:``"""
        return Pending(lambda: self.acquire_multi(names, ttl, **kw))

    async def run_locked(self, name: str, fn: Callable[[Lease], Awaitable[T]], *, ttl: float = 10.0,
                         wait: float = 0.0, **kw: Any) -> T:
        """Take lock ``name``, run ``fn(lease)`` in a task of its own and
        release the lock when it returns. If the lease is lost first, the
        task is cancelled and :class:`~fencer.errors.LeaseLost` raised."""
        lease = await self.acquire(name, ttl, wait, **kw)
        try:
            return await lease.run(fn, lease)
        finally:
            try:
                await lease.release()
            except LeaseLost:
                pass

    async def renew(self, name: str, token: int, secret: str, *, deadline: Optional[float] = None,
                    kind: str = "locks", ttl_ms: Optional[int] = None,
                    attempt_timeout: Optional[float] = None) -> Response:
        """Renew a grant (lower level than :class:`Lease`)."""
        resp = await self.request("POST", calls.path(kind, name, "renew"), {"lease": secret, "token": token},
                                  deadline=deadline, attempt_timeout=attempt_timeout)
        answer.renewal(resp.json(), kind=kind, name=name, token=token, ttl_ms=ttl_ms)
        return resp

    async def release(self, name: str, token: int, secret: str, *, kind: str = "locks") -> None:
        """Release a grant; a retry that finds it gone, after an attempt
        whose answer was lost, counts as released."""
        try:
            await self.request("POST", calls.path(kind, name, "release"), {"lease": secret, "token": token})
        except LeaseLost as e:
            if not getattr(e, "lost_answers", 0):
                raise

    async def revoke(self, name: str, token: int, *, kind: str = "locks") -> Dict[str, Any]:
        """End another's grant now, as its expiry would (operators only)."""
        try:
            body = (await self.request("POST", calls.path(kind, name, "revoke"), {"token": token})).json()
        except Revoked as e:
            if not getattr(e, "lost_answers", 0):
                raise
            return {"lock" if kind == "locks" else "semaphore": name, "token": token}
        return answer.revoked(body, name=name, token=token)

    async def revoke_permit(self, name: str, token: int) -> Dict[str, Any]:
        return await self.revoke(name, token, kind="semaphores")

    async def status(self, name: str, *, stale: bool = False) -> Dict[str, Any]:
        """The lock's status: held, holder, token, ttl_ms, remaining_ms."""
        return (await self.request("GET", calls.lock_path(name, "") + ("?stale=true" if stale else ""))).json()

    async def locks(self) -> List[Dict[str, Any]]:
        """The held locks."""
        return answer.objects((await self.request("GET", "/v1/locks")).json(), "locks", "GET /v1/locks")

    async def semaphore_status(self, name: str) -> Dict[str, Any]:
        return (await self.request("GET", calls.path("semaphores", name, ""))).json()

    async def check(self, name: str, token: int) -> bool:
        """Whether ``token`` is the lock's current grant."""
        resp = await self.request("GET", calls.lock_path(name, "check") + "?token=%d" % token)
        return bool(resp.json().get("current"))

    async def history(self, name: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The lock's last grants, newest first."""
        q = "?limit=%d" % limit if limit is not None else ""
        resp = await self.request("GET", calls.lock_path(name, "history") + q)
        return answer.objects(resp.json(), "grants", "history of %r" % name)

    async def token(self, token: int) -> Dict[str, Any]:
        """Which grant ``token`` was, and how it ended (UnknownToken)."""
        return (await self.request("GET", "/v1/tokens/%d" % token)).json()

    async def wait_lock(self, name: str, index: int, wait: float = 300.0) -> Tuple[Dict[str, Any], int]:
        """A blocking read: the lock's status once an entry after ``index``
        changed it, or after ``wait`` seconds, and the index it was read at."""
        wait = min(max(wait, 0.0), 300.0)
        resp = await self.request("GET", calls.lock_path(name, "") + "?wait_index=%d&wait=%dms" % (index, int(wait * 1000)),
                                  extra_timeout=wait)
        return resp.json(), answer.index_header(resp.headers.get("fencer-index"), "wait_lock %r" % name)

    async def cluster(self) -> Dict[str, Any]:
        return (await self.request("GET", "/v1/cluster")).json()

    # ---- sessions ----------------------------------------------------------

    async def open_session(self, ttl: float = 10.0, *, holder: Optional[str] = None, lock_delay: float = 0.0,
                           keep_alive: bool = True) -> Session:
        """Create a session and keep it alive in a task of its own."""
        body = calls.session_body(holder or self.holder, ttl, lock_delay=lock_delay)
        resp = await self.request("POST", "/v1/sessions", body)
        created = answer.session(resp.json(), holder=body["holder"], ttl_ms=body["ttl_ms"], request_id=body["request_id"])
        s = Session(self, created, calls.lease_start(created, resp.sent, resp.first_sent))
        await _confirm_if_late(s)
        s._start(keep_alive)
        return s

    def session(self, ttl: float = 10.0, **kw: Any) -> "Pending[Session]":
        """``async with client.session(ttl=10) as s:`` (closed on leaving),
        or ``s = await client.session(ttl=10)``."""
        return Pending(lambda: self.open_session(ttl, **kw))

    async def renew_session(self, session: int, secret: str, *, ttl_ms: Optional[int] = None,
                            deadline: Optional[float] = None, attempt_timeout: Optional[float] = None) -> Response:
        resp = await self.request("POST", "/v1/sessions/%d/renew" % session, {"lease": secret},
                                  deadline=deadline, attempt_timeout=attempt_timeout)
        answer.session_renewal(resp.json(), session=session, ttl_ms=ttl_ms)
        return resp

    async def close_session(self, session: int, secret: str) -> List[Dict[str, Any]]:
        resp = await self.request("POST", "/v1/sessions/%d/close" % session, {"lease": secret})
        return answer.session_close(resp.json(), session=session)

    async def revoke_session(self, session: int) -> List[Dict[str, Any]]:
        """End a session and every grant under it now (operators only)."""
        try:
            resp = await self.request("POST", "/v1/sessions/%d/revoke" % session, {})
        except Revoked as e:
            if not getattr(e, "lost_answers", 0):
                raise
            return []
        return answer.session_grants(resp.json(), "revoked", "revoke session %d" % session)

    async def get_session(self, session: int) -> Dict[str, Any]:
        what = "GET session %d" % session
        st = (await self.request("GET", "/v1/sessions/%d" % session)).json()
        if st.get("session") != session:
            raise BadAnswer("%s: the answer is of session %r" % (what, st.get("session")), reason="mismatch")
        answer.session_grants(st, "grants", what)
        return st

    async def sessions(self) -> List[Dict[str, Any]]:
        return answer.objects((await self.request("GET", "/v1/sessions")).json(), "sessions", "GET /v1/sessions")

    # ---- elections ---------------------------------------------------------

    async def campaign(self, name: str, value: str, ttl: float = 10.0, *, timeout: Optional[float] = None,
                       holder: Optional[str] = None, keep_alive: bool = True, lock_delay: float = 0.0) -> Lease:
        """Lead election ``name`` with ``value`` published: the lease's
        token is the term of office."""
        return await campaign(lambda wait: self.acquire(name, ttl, wait, holder=holder, keep_alive=keep_alive,
                                                        lock_delay=lock_delay, value=value), timeout)

    async def election_leader(self, name: str) -> Optional[Dict[str, Any]]:
        """The leader now (``holder``, ``token``, ``value``) or None."""
        return answer.leader(await self.status(name), name)

    async def observe(self, name: str) -> AsyncIterator[Dict[str, Any]]:
        """The election's leader now (if any), then each new leader or
        value in term order: the lock list and its index, then a watch
        from that index."""
        resp = await self.request("GET", "/v1/locks")
        index = answer.index_header(resp.headers.get("fencer-index"), "GET /v1/locks")
        last: Optional[Dict[str, Any]] = None
        for st in answer.objects(resp.json(), "locks", "GET /v1/locks"):
            if st.get("lock") == name and st.get("held"):
                last = answer.leader(st, name)
                yield dict(last or {})
        async with self.watch(prefix=name, since=index) as w:
            async for ev in w:
                if ev.get("lock") != name or ev.get("type") not in ("acquired", "handed_off", "value_set"):
                    continue
                now = answer.leader(ev, name)
                if now != last:  # a proclaim retried after a lost answer applies twice
                    last = now
                    yield dict(now or {})

    # ---- events --------------------------------------------------------------

    def watch(self, *, prefix: Optional[str] = None, since: int = FROM_NOW) -> Watch:
        """Every change after index ``since`` (default: from now), in log
        order, as an async iterator of event dicts, resumed across members
        with Last-Event-ID."""
        return Watch(self._tr, prefix, since)

    # ---- fenced keys -------------------------------------------------------

    async def put(self, key: str, value: bytes, token: int, *, lock: Optional[str] = None) -> int:
        """A fenced write; OutcomeUnknown when an attempt's answer was lost
        and a retry was refused as stale."""
        headers = {"Fencing-Token": str(token), "Content-Type": "application/octet-stream"}
        if lock:
            headers["Fencing-Lock"] = lock
        try:
            resp = await self.request("PUT", "/v1/kv/" + calls.quote(key), raw=bytes(value), headers=headers,
                                      retry_outcome_unknown=False)
        except StaleToken as e:
            if getattr(e, "lost_answers", 0):
                raise OutcomeUnknown("put %r with token %d: an attempt's answer was lost and the retry was refused as stale: the first may have landed" % (key, token),
                                     code="outcome_unknown", status=e.status, body=e.body) from e
            raise
        return answer.put(resp.json(), key=key, token=token)

    async def get(self, key: str, *, stale: bool = False) -> Tuple[bytes, int]:
        """A fenced key's value and the token of the write that stored it."""
        resp = await self.request("GET", "/v1/kv/" + calls.quote(key) + ("?stale=true" if stale else ""))
        return resp.body, answer.token_header(resp.headers.get("fencing-token"), "GET /v1/kv/" + key)

    async def delete(self, key: str) -> int:
        got = (await self.request("DELETE", "/v1/kv/" + calls.quote(key))).json().get("last_token", 0)
        return 0 if got == 0 else answer.token(got, "delete %r" % key)


async def _confirm_if_late(kept: Any) -> None:
    """A grant (or session) whose request went out more than TTL/3 before
    its answer arrived is confirmed by one renewal first."""
    received = time.monotonic()
    if kept._clock.late(received):
        await kept._confirm_late(received)


async def campaign(acquire: Callable[[float], Awaitable[Lease]], timeout: Optional[float]) -> Lease:
    """Call ``acquire(wait)`` until it leads, queueing at most a minute at
    a time and waiting out a lock-delay, or until ``timeout`` passes."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = calls.MAX_WAIT if end is None else max(0.0, min(calls.MAX_WAIT, end - time.monotonic()))
        try:
            return await acquire(wait)
        except LockDelay as e:
            if end is not None and time.monotonic() + e.retry_after >= end:
                raise
            await asyncio.sleep(e.retry_after)
        except (LockHeld, ServerTimeout):
            if end is not None and time.monotonic() >= end:
                raise
