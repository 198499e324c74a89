"""The client: endpoints, leader following, retries, locks and fenced keys.

What is retried, and why it is safe (the same rules as the Go client,
``api/client/doc.go``):

* Requests go to the leader, found with ``GET /v1/cluster`` on any endpoint.
  On a connection error or a 503 (no_leader, outcome_unknown) the client
  forgets the leader, moves to the next endpoint, waits (``Retry-After`` when
  the server sent one, else exponential backoff with jitter) and retries.
  A node that did not answer is left at once, without a wait and without
  asking who leads (the others still name it until they elect another): the
  next endpoint forwards the request, holding it while no leader is known,
  so a renewal outlives a leader's crash (test/conformance,
  leader_killed_during_hold, found it sleeping past the lease's deadline).
* Every acquire carries one random request id (32 characters) across all its
  attempts, so a retry after a lost answer gets the first grant back
  (``existing: true``) instead of a second token.
* Renewals and releases are retried freely. A fenced write is retried too,
  but a repeat of one that landed is refused as stale: after a lost answer
  :meth:`Client.put` raises :class:`~fencer.errors.OutcomeUnknown` rather
  than a misleading :class:`~fencer.errors.StaleToken`.

What is believed (issue 26 F5, F6): only a 2xx answer is a success, and a
redirect is never followed (a fencing client must not be sent elsewhere
silently); an error status is the error its code names; anything else, and
any answer that does not match what was asked (:mod:`fencer.answer`), is a
:class:`~fencer.errors.BadAnswer`, not retried. A call's ``timeout`` bounds
all of it: every attempt, the pauses between them, and the reading of each
answer, which goes on a deadline rather than a per-read socket timeout (a
server that drips one byte at a time cannot stretch it); an answer longer
than ``max_answer_bytes`` is refused while it is read.
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import os
import random
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import answer, calls, sse
from .calls import MAX_TTL, MAX_WAIT, MIN_TTL  # noqa: F401 (part of this module's API)
from .calls import Endpoint as _Endpoint
from .calls import lock_path as _lock_path
from .calls import path as _path
from .calls import quote as _quote
from .errors import (BadAnswer, FencerError, LockDelay, LockHeld, NoLeader,
                     NotFound, OutcomeUnknown, ServerTimeout, StaleToken,
                     Unavailable, from_response)
from .lease import Lease
from .multilock import MultiLock, multi_lock
from .session import Session

#: The longest answer the client reads unless told otherwise (4 MiB): a
#: lock list of some ten thousand locks, far below what would hurt.
MAX_ANSWER_BYTES = 4 << 20


@dataclass
class Response:
    """One answered request: status, headers, body, and the monotonic send
    times of the attempt that was answered and of the first attempt."""

    status: int
    headers: Dict[str, str]
    body: bytes
    sent: float
    first_sent: float
    lost_answers: int = 0

    def json(self) -> Dict[str, Any]:
        """The answer's JSON object; :class:`~fencer.errors.BadAnswer` for
        anything else (every fencer answer is one)."""
        return answer.obj(self.body, "HTTP %d answer" % self.status)


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read bounded by the time left before a
    deadline rather than by a fixed per-read timeout."""

    def __init__(self, sock: socket.socket, deadline: float, plain: Any) -> None:
        # plain is the socket's own makefile() reader, unused but kept open
        # until this one closes: http.client closes the socket itself as soon
        # as an answer ends with the connection, and the open reader is what
        # keeps the descriptor alive for the body.
        self._sock, self._deadline, self._plain = sock, deadline, plain

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._plain.close()
        super().close()

    def readinto(self, b: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the call's deadline passed while the answer was read")
        self._sock.settimeout(left)
        return self._sock.recv_into(b)


class _DeadlineResponse(http.client.HTTPResponse):
    """An HTTPResponse that reads its status line, headers and body through
    a _DeadlineReader."""

    def __init__(self, sock: socket.socket, *args: Any, deadline: float, **kw: Any) -> None:
        super().__init__(sock, *args, **kw)
        self.fp = io.BufferedReader(_DeadlineReader(sock, deadline, self.fp))


def _read_body(resp: http.client.HTTPResponse, limit: int, what: str) -> bytes:
    """The answer's body, refused (BadAnswer) once it passes limit bytes: a
    Content-Length above it before anything is read, else as it is read."""
    length = resp.getheader("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise BadAnswer("%s: the answer's Content-Length %s is above the client's limit of %d bytes (max_answer_bytes)"
                        % (what, length, limit), reason="too_large", status=resp.status)
    chunks: List[bytes] = []
    n = 0
    while True:
        chunk = resp.read(min(64 << 10, limit + 1 - n))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        n += len(chunk)
        if n > limit:
            raise BadAnswer("%s: the answer is longer than the client's limit of %d bytes (max_answer_bytes)"
                            % (what, limit), reason="too_large", status=resp.status)


class Client:
    """A client of a fencer cluster.

    :param endpoints: HTTP addresses of some members (``"127.0.0.1:7001"`` or
        ``"https://10.0.0.1:7001"``); the client finds and follows the leader.
    :param token: a bearer token from the cluster's ACL file.
    :param ca_file: the CA that signed the nodes' certificates (turns on https
        for endpoints given without a scheme).
    :param cert_file: a client certificate (with ``key_file``) for nodes that
        require one.
    :param timeout: seconds a call may take in all: its attempts across
        members, the pauses between them and the reading of each answer (an
        acquire's ``wait`` is added to it).
    :param attempts: attempts per request across endpoints and leader changes.
    :param holder: the holder name acquires use (default: host:pid).
    :param max_answer_bytes: the longest answer body read; a longer one is
        a :class:`~fencer.errors.BadAnswer` (default 4 MiB).
    """

    def __init__(self, endpoints: Sequence[str], *, token: Optional[str] = None,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, timeout: float = 5.0,
                 attempts: int = 10, holder: Optional[str] = None,
                 max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self._endpoints = calls.endpoints(endpoints, "https" if ca_file or cert_file else "http")
        self._ssl: Optional[ssl.SSLContext] = None
        if any(e.scheme == "https" for e in self._endpoints):
            self._ssl = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                self._ssl.load_cert_chain(cert_file, key_file)
        self._auth = "Bearer " + token if token else ""
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.max_answer_bytes = max_answer_bytes
        self.holder = holder or "%s:%d" % (socket.gethostname(), os.getpid())
        self._leader: Optional[_Endpoint] = None
        self._next = 0

    # ---- transport -------------------------------------------------------

    def _roundtrip(self, ep: _Endpoint, method: str, path: str, body: Optional[bytes],
                   headers: Mapping[str, str], deadline: float) -> Tuple[int, Dict[str, str], bytes]:
        """One HTTP exchange with one node, done by ``deadline`` (monotonic).
        Raises OSError (including socket.timeout and ssl errors) when no
        answer arrives in time, BadAnswer for a body over max_answer_bytes."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the call's deadline passed before %s %s was sent" % (method, path))
        if ep.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                ep.host, ep.port, timeout=left, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=left)
        # The answer, status line first, is read through a reader that
        # sets the socket timeout to the time left before every read, so a
        # server that drips a byte at a time cannot stretch the call.
        conn.response_class = functools.partial(_DeadlineResponse, deadline=deadline)  # type: ignore[assignment]
        resp: Optional[http.client.HTTPResponse] = None
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            data = _read_body(resp, self.max_answer_bytes, "%s %s via %s" % (method, path, ep.url))
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except http.client.HTTPException as e:
            raise ConnectionError(str(e)) from e
        finally:
            if resp is not None:
                resp.close()  # an answer left unread (too long, too slow) holds the socket
            conn.close()

    def _find_leader(self, deadline: float) -> Optional[_Endpoint]:
        for i in range(len(self._endpoints)):
            ep = self._endpoints[(self._next + i) % len(self._endpoints)]
            try:
                status, _, data = self._roundtrip(ep, "GET", "/v1/cluster", None, self._headers(),
                                                  min(deadline, time.monotonic() + 2.0))
                if status != 200:
                    continue
                leader = calls.leader_endpoint(answer.obj(data, "GET /v1/cluster"), ep)
                if leader is not None:
                    return leader
            except (OSError, FencerError, ValueError, AttributeError):
                continue  # no answer, or not one to follow: try the next
        return None

    def _headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if self._auth:
            h["Authorization"] = self._auth
        if extra:
            h.update(extra)
        return h

    def request(self, method: str, path: str, body: Any = None, *,
                headers: Optional[Mapping[str, str]] = None, raw: Optional[bytes] = None,
                extra_timeout: float = 0.0, deadline: Optional[float] = None,
                attempt_timeout: Optional[float] = None,
                retry_outcome_unknown: bool = True, until_deadline: bool = False) -> Response:
        """Send a request to the leader, following it and retrying as the
        module docstring says. ``body`` is sent as JSON (with Content-Type
        application/json), ``raw`` as bytes. The client's ``timeout`` plus
        ``extra_timeout`` bounds the whole call, and ``deadline``
        (monotonic), when given, too; ``attempt_timeout`` cuts each
        attempt shorter, so that a hung node leaves time for another;
        ``until_deadline`` retries until the deadline rather than the
        client's attempts (a durable acquire, through a leader's crash and
        election).
        Returns a 2xx answer, or raises the error for its code
        (:class:`~fencer.errors.BadAnswer` for a status that is neither)."""
        end = time.monotonic() + self.timeout + extra_timeout
        if deadline is not None:
            end = min(end, deadline)
        hdrs = self._headers(headers)
        data: Optional[bytes] = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        first_sent: Optional[float] = None
        lost = 0
        last_err: Optional[FencerError] = None
        backoff = 0.05
        # After a node did not answer, the next attempt goes at once to the
        # next endpoint, without asking who leads (the others name the node
        # that failed until they elect another) and without a pause: it
        # forwards the request, holding it while no leader is known.
        skipped = 0
        attempt = 0
        while until_deadline or attempt < self.attempts:
            attempt += 1
            if time.monotonic() >= end:
                break
            ep = self._leader
            if ep is None and skipped:
                ep = self._endpoints[self._next % len(self._endpoints)]
            elif ep is None:
                ep = self._find_leader(end) or self._endpoints[self._next % len(self._endpoints)]
                self._leader = ep
            sent = time.monotonic()
            if first_sent is None:
                first_sent = sent
            wait = backoff * (1 + random.random())
            try:
                status, rh, rb = self._roundtrip(ep, method, path, data, hdrs,
                                                 end if attempt_timeout is None else min(end, sent + attempt_timeout))
            except OSError as e:
                lost += 1
                last_err = Unavailable("%s %s via %s: %s" % (method, path, ep.url, e))
                self._forget()
                if skipped < len(self._endpoints) - 1:
                    skipped += 1
                    continue
            else:
                if 200 <= status < 300:
                    return Response(status, rh, rb, sent, first_sent, lost)
                err = answer.refusal(status, rh, rb, "%s %s via %s" % (method, path, ep.url))
                if isinstance(err, BadAnswer):
                    raise err
                retriable = isinstance(err, NoLeader) or (isinstance(err, OutcomeUnknown) and retry_outcome_unknown)
                if not retriable:
                    err.lost_answers = lost  # type: ignore[attr-defined]
                    raise err
                last_err = err
                self._forget()
                ra = rh.get("retry-after", "")
                if ra.isdigit():
                    wait = max(wait, float(ra))
            skipped = 0
            backoff = min(backoff * 2, 1.0)
            time.sleep(min(wait, max(0.0, end - time.monotonic())))
        raise last_err or Unavailable("%s %s: no attempt left before the deadline" % (method, path))

    def _forget(self) -> None:
        self._leader = None
        self._next += 1

    # ---- locks -----------------------------------------------------------

    def acquire(self, name: str, ttl: float = 10.0, wait: float = 0.0, *,
                holder: Optional[str] = None, keep_alive: bool = True,
                lock_delay: float = 0.0, value: Optional[str] = None, mode: str = "exclusive",
                durable: bool = False) -> Lease:
        """Take lock ``name`` for ``ttl`` seconds, queueing up to ``wait``
        seconds, and keep it alive in a background thread (unless
        ``keep_alive`` is false). Raises :class:`~fencer.errors.LockHeld`
        when it stays held.

        The lease is believed only until the send time of its last confirmed
        acquire or renewal plus TTL minus a margin. A grant that arrives more
        than TTL/3 after the request that got it was sent (a wait in the
        queue, slow retries) is confirmed by one renewal and measured from
        that renewal's send time; if the renewal fails, the grant is released
        and the error raised.

        ``lock_delay`` (seconds): if this grant ends by expiry rather than a
        release, nobody can take the lock for that long (409 lock_delay,
        :class:`~fencer.errors.LockDelay`).

        ``value`` (up to 4 KiB) is published with the grant, as an
        election's leader publishes its address: :meth:`status` and
        :meth:`locks` show it, :meth:`Lease.proclaim` changes it.

        ``mode`` is ``"exclusive"`` (one holder) or ``"shared"`` (many
        holders at once, none while it is held exclusively; the queue is
        FIFO across modes). A shared grant reads: its fenced writes under
        the lock are refused (:class:`~fencer.errors.NotLockHolder`), and it
        publishes no value.

        ``durable`` (with a ``wait``) keeps the waiter's place in the queue
        across a leader change: the server writes it to its log, and the
        acquire retries with its one request id through a leader's crash
        and election until it is granted or its wait ends. A new leader
        serves the queue in enqueue order; :attr:`Lease.wait_index` says
        where this one queued."""
        body = calls.lock_body(holder or self.holder, ttl, wait, lock_delay=lock_delay, value=value, mode=mode)
        calls.set_durable(body, durable, wait)
        return self._acquire("locks", name, body, wait, keep_alive)

    def _acquire(self, kind: str, name: str, body: Dict[str, Any], wait: float, keep_alive: bool,
                 session: Optional[Session] = None) -> Lease:
        resp = self.request("POST", _path(kind, name, "acquire"), body, extra_timeout=wait,
                            until_deadline=bool(body.get("durable")))
        # A grant that does not match the request is not used: the client
        # cannot tell what, if anything, it holds. One the server did make
        # expires after its TTL (or with its session).
        grant = answer.grant(resp.json(), kind=kind, name=name, holder=body["holder"],
                             ttl_ms=session.ttl_ms if session is not None else body["ttl_ms"],
                             request_id=body["request_id"], limit=body.get("limit"),
                             session=session.id if session is not None else None,
                             mode=body.get("mode", "") if kind == "locks" else None)
        # The server starts the lease after the request that asked for it was
        # sent: the attempt answered, or for a retry answered with an earlier
        # grant, the first attempt.
        start = calls.lease_start(grant, resp.sent, resp.first_sent)
        lease = Lease(self, grant, start, kind=kind, session=session)
        if session is not None:
            # The grant lives on the session's lease, whose deadline a late
            # grant does not move: nothing of its own to confirm or renew.
            session._attach(lease)
            return lease
        received = time.monotonic()
        if received - start > lease.ttl / 3:
            lease._confirm_grant(received)
        lease._start(keep_alive)
        return lease

    def acquire_permit(self, name: str, limit: int, ttl: float = 10.0, wait: float = 0.0, *,
                       holder: Optional[str] = None, keep_alive: bool = True,
                       lock_delay: float = 0.0, durable: bool = False) -> Lease:
        """Take one of ``limit`` permits of semaphore ``name``: the same
        rules as :meth:`acquire` (request id, deadline, late grants, keep
        alive, ``durable``). Raises :class:`~fencer.errors.SemaphoreFull` when every
        permit stays held, :class:`~fencer.errors.LimitMismatch` when the
        held permits were taken with another limit, and
        :class:`~fencer.errors.LockDelay` when the only free permits are in
        a lock-delay. ``lock_delay`` (seconds): if this permit ends by
        expiry, its slot cannot be granted again for that long."""
        body = calls.permit_body(holder or self.holder, limit, ttl, wait, lock_delay=lock_delay)
        calls.set_durable(body, durable, wait)
        return self._acquire("semaphores", name, body, wait, keep_alive)

    def semaphore(self, name: str, limit: int, ttl: float = 10.0, wait: float = 0.0, **kw: Any) -> Lease:
        """Like :meth:`acquire_permit`, for ``with client.semaphore("name",
        limit=3, ttl=10, wait=5) as permit:``."""
        return self.acquire_permit(name, limit, ttl, wait, **kw)

    def multi_lock(self, names: Sequence[str], ttl: float = 10.0, wait: float = 0.0, *,
                   holder: Optional[str] = None, keep_alive: bool = True, mode: str = "exclusive") -> MultiLock:
        """Take every lock of ``names`` or none, in one entry, with one token
        and one lease for all (at most 64 names, none twice), and keep the
        lease alive as :meth:`acquire` does. Without a ``wait`` a held name
        raises :class:`~fencer.errors.LockHeld`, whose ``lock`` names the
        first held one; with one, it queues in every name's FIFO for up to
        ``wait`` seconds and is granted all names at once when it heads each
        and all are free (two waiting multi-locks never deadlock).
        ``mode="shared"`` takes every name in shared mode (one token).
        ``with client.multi_lock(["a", "b"]) as m:`` releases every name on
        leaving."""
        return multi_lock(self, names, ttl, holder or self.holder, keep_alive, wait, mode)

    def semaphore_status(self, name: str) -> Dict[str, Any]:
        """The semaphore's limit, holders and waiters."""
        return self.request("GET", _path("semaphores", name, "")).json()

    def lock(self, name: str, ttl: float = 10.0, wait: float = 0.0, **kw: Any) -> Lease:
        """Like :meth:`acquire` (same arguments), for ``with client.lock("name",
        ttl=10, wait=5) as lease:``; leaving the block releases the lock."""
        return self.acquire(name, ttl, wait, **kw)

    def renew(self, name: str, token: int, secret: str, *, deadline: Optional[float] = None,
              kind: str = "locks", ttl_ms: Optional[int] = None,
              attempt_timeout: Optional[float] = None) -> Response:
        """Renew a grant (lower level than :class:`Lease`); ``kind`` is
        "locks" or "semaphores". The answer must name the grant renewed
        and, when ``ttl_ms`` is given, that TTL (renewals take none, so it
        is the grant's); else :class:`~fencer.errors.BadAnswer`."""
        resp = self.request("POST", _path(kind, name, "renew"), {"lease": secret, "token": token},
                            deadline=deadline, attempt_timeout=attempt_timeout)
        answer.renewal(resp.json(), kind=kind, name=name, token=token, ttl_ms=ttl_ms)
        return resp

    def release(self, name: str, token: int, secret: str, *, kind: str = "locks") -> None:
        """Release a grant. A retry that finds it gone counts as released,
        when an earlier attempt's answer was lost."""
        from .errors import LeaseLost
        try:
            self.request("POST", _path(kind, name, "release"), {"lease": secret, "token": token})
        except LeaseLost as e:
            if not getattr(e, "lost_answers", 0):
                raise

    def status(self, name: str, *, stale: bool = False) -> Dict[str, Any]:
        """The lock's status: held, holder, token, ttl_ms, remaining_ms."""
        return self.request("GET", _lock_path(name, "") + ("?stale=true" if stale else "")).json()

    def locks(self) -> List[Dict[str, Any]]:
        """The held locks."""
        return answer.objects(self.request("GET", "/v1/locks").json(), "locks", "GET /v1/locks")

    def check(self, name: str, token: int) -> bool:
        """Whether ``token`` is the lock's current grant."""
        return bool(self.request("GET", _lock_path(name, "check") + "?token=%d" % token).json().get("current"))

    def history(self, name: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The lock's last grants, newest first (``GET /v1/locks/{name}/history``):
        dicts with ``token``, ``lock``, ``holder``, ``granted_index``, ``ended``
        (released, expired, handed_off, voided, or held) and ``ended_index``.
        The cluster keeps each lock's last --grant-history-per-lock grants."""
        q = "?limit=%d" % limit if limit is not None else ""
        return answer.objects(self.request("GET", _lock_path(name, "history") + q).json(), "grants", "history of %r" % name)

    def token(self, token: int) -> Dict[str, Any]:
        """Which lock and holder got ``token``, and how the grant ended
        (``GET /v1/tokens/{token}``). Raises UnknownToken, whose ``reason`` is
        ``not_kept`` (older than the history kept), ``never_granted`` or
        ``no_history``."""
        return self.request("GET", "/v1/tokens/%d" % token).json()

    def wait_lock(self, name: str, index: int, wait: float = 300.0) -> Tuple[Dict[str, Any], int]:
        """A blocking read: the lock's status once an entry after ``index``
        changed it, or after ``wait`` seconds (at most 300), and the index it
        was read at (the next call's ``index``). A wake-up may be spurious."""
        wait = min(max(wait, 0.0), 300.0)
        path = _lock_path(name, "") + "?wait_index=%d&wait=%dms" % (index, int(wait * 1000))
        resp = self.request("GET", path, extra_timeout=wait)
        return resp.json(), answer.index_header(resp.headers.get("fencer-index"), "wait_lock %r" % name)

    # ---- sessions --------------------------------------------------------
    # One lease for many grants (fencer.session): the session is renewed,
    # never the grants under it, and they all end with it.

    def session(self, ttl: float = 10.0, *, holder: Optional[str] = None, lock_delay: float = 0.0,
                keep_alive: bool = True) -> Session:
        """Create a session of ``ttl`` seconds and keep it alive in a
        background thread (unless ``keep_alive`` is false); use it as
        ``with client.session(ttl=10) as s:``, which closes it on leaving.
        Locks, permits and elections taken with :meth:`Session.lock`,
        :meth:`Session.acquire_permit` and :meth:`Session.campaign` live as
        long as it. ``lock_delay`` (seconds) is the lock-delay of every
        grant under it that asks for none of its own, started if the
        session expires (not when it is closed).

        The session is believed, as a lease is, until the send time of its
        last confirmed creation or renewal plus TTL minus a margin; an
        answer that arrives more than TTL/3 after its request was sent (slow
        retries) is confirmed by one renewal, and the session closed and
        :class:`~fencer.errors.LeaseLost` raised if that fails."""
        body = calls.session_body(holder or self.holder, ttl, lock_delay=lock_delay)
        resp = self.request("POST", "/v1/sessions", body)
        created = answer.session(resp.json(), holder=body["holder"], ttl_ms=body["ttl_ms"],
                                 request_id=body["request_id"])
        start = calls.lease_start(created, resp.sent, resp.first_sent)
        s = Session(self, created, start)
        if time.monotonic() - start > s.ttl / 3:
            s._confirm_late(time.monotonic())
        s._start(keep_alive)
        return s

    def renew_session(self, session: int, secret: str, *, ttl_ms: Optional[int] = None,
                      deadline: Optional[float] = None, attempt_timeout: Optional[float] = None) -> Response:
        """Renew a session (lower level than :class:`Session`). The answer
        must name the session and, when ``ttl_ms`` is given, that TTL; else
        :class:`~fencer.errors.BadAnswer`."""
        resp = self.request("POST", "/v1/sessions/%d/renew" % session, {"lease": secret},
                            deadline=deadline, attempt_timeout=attempt_timeout)
        answer.session_renewal(resp.json(), session=session, ttl_ms=ttl_ms)
        return resp

    def close_session(self, session: int, secret: str) -> List[Dict[str, Any]]:
        """Close a session, ending every grant under it in one entry; return
        the grants released (``kind``, ``name``, ``token``)."""
        resp = self.request("POST", "/v1/sessions/%d/close" % session, {"lease": secret})
        return answer.session_close(resp.json(), session=session)

    def revoke(self, name: str, token: int, *, kind: str = "locks") -> Dict[str, Any]:
        """End another's grant with ``token`` now, as its expiry would
        (operators only): its lock-delay starts, or the next waiter gets
        it. Returns the answer (``holder``, ``token``, ``next_token``, ...).
        The holder's lease ends at its next renewal with :class:`Revoked`.
        A retry that finds it revoked, when an earlier attempt's answer was
        lost, counts as revoked."""
        from .errors import Revoked
        try:
            body = self.request("POST", _path(kind, name, "revoke"), {"token": token}).json()
        except Revoked as e:
            if not getattr(e, "lost_answers", 0):
                raise
            return {"lock" if kind == "locks" else "semaphore": name, "token": token}
        return answer.revoked(body, name=name, token=token)

    def revoke_permit(self, name: str, token: int) -> Dict[str, Any]:
        """:meth:`revoke` for a semaphore's permit."""
        return self.revoke(name, token, kind="semaphores")

    def revoke_session(self, session: int) -> List[Dict[str, Any]]:
        """End a session and every grant under it now, in one entry, as its
        expiry would (operators only); return the grants it ended. The
        session (and every lease under it) ends at its next renewal with
        :class:`Revoked`."""
        from .errors import Revoked
        try:
            resp = self.request("POST", "/v1/sessions/%d/revoke" % session, {})
        except Revoked as e:
            if not getattr(e, "lost_answers", 0):
                raise
            return []
        return answer.session_grants(resp.json(), "revoked", "revoke session %d" % session)

    def get_session(self, session: int) -> Dict[str, Any]:
        """``GET /v1/sessions/{id}``: the session's holder, ``ttl_ms``,
        ``remaining_ms`` (the leader's view) and ``grants`` (``kind``,
        ``name``, ``token``), never its secret. Raises
        :class:`~fencer.errors.UnknownSession`."""
        what = "GET session %d" % session
        st = self.request("GET", "/v1/sessions/%d" % session).json()
        if st.get("session") != session:
            raise BadAnswer("%s: the answer is of session %r" % (what, st.get("session")), reason="mismatch")
        answer.session_grants(st, "grants", what)
        return st

    def sessions(self) -> List[Dict[str, Any]]:
        """``GET /v1/sessions``: the sessions whose holder the caller may
        read, by id, each as :meth:`get_session` gives it."""
        return answer.objects(self.request("GET", "/v1/sessions").json(), "sessions", "GET /v1/sessions")

    # ---- elections -------------------------------------------------------
    # An election is a lock whose holder publishes a value; the grant's token
    # is the leader's term of office, so a resource fenced on it refuses a
    # deposed leader (docs/api.md, Elections; the Go client's Campaign).

    def campaign(self, name: str, value: str, ttl: float = 10.0, *,
                 timeout: Optional[float] = None, holder: Optional[str] = None,
                 keep_alive: bool = True, lock_delay: float = 0.0) -> Lease:
        """Block until this caller leads election ``name`` with ``value``
        published, queueing at the leader up to a minute at a time and
        waiting out a lock-delay, or until ``timeout`` seconds have passed
        (then :class:`~fencer.errors.LockHeld` or the last refusal). The
        :class:`Lease` is the term of office: ``token`` is the term,
        ``lost`` is set when leadership can no longer be trusted,
        :meth:`Lease.proclaim` changes the value and :meth:`Lease.resign`
        steps down."""
        return _campaign(lambda wait: self.acquire(name, ttl, wait, holder=holder, keep_alive=keep_alive,
                                                   lock_delay=lock_delay, value=value), timeout)

    def election_leader(self, name: str) -> Optional[Dict[str, Any]]:
        """The election's leader now: a dict with ``holder``, ``token`` (the
        term) and ``value``, or None when nobody leads."""
        return answer.leader(self.status(name), name)

    def observe(self, name: str, *, timeout: float = 60.0) -> Iterator[Dict[str, Any]]:
        """Yield the election's leader now (if any) and then each new leader
        or value, in term order, as dicts like :meth:`election_leader`'s.
        Built on the events stream: the lock list and the index it was read
        at, then the events after that index, so nothing is missed or seen
        twice. It ends as :meth:`events` does (``EventsLagged``: observe
        again); ``timeout`` is the stream's idle read timeout."""
        resp = self.request("GET", "/v1/locks")
        index = answer.index_header(resp.headers.get("fencer-index"), "GET /v1/locks")
        last: Optional[Dict[str, Any]] = None
        for st in answer.objects(resp.json(), "locks", "GET /v1/locks"):
            if st.get("lock") == name and st.get("held"):
                last = answer.leader(st, name)
                yield dict(last)
        with self.events(since=index, prefix=name, timeout=timeout) as stream:
            for ev in stream:
                if ev.get("lock") != name:
                    continue  # another lock with name as its prefix
                if ev.get("type") not in ("acquired", "handed_off", "value_set"):
                    continue
                now = answer.leader(ev, name)
                # A proclaim retried after a lost answer applies twice: the
                # same state again is no change.
                if now != last:
                    last = now
                    yield dict(now)

    def cluster(self) -> Dict[str, Any]:
        """GET /v1/cluster: the answering node's view of the cluster."""
        return self.request("GET", "/v1/cluster").json()

    def events(self, *, since: Optional[int] = None, prefix: Optional[str] = None,
               timeout: float = 60.0, last_event_id: Optional[int] = None) -> "EventStream":
        """Watch every change in log order (``GET /v1/events``, Server-Sent
        Events) from the first endpoint that answers. Iterate the returned
        stream for event dicts (``index``, ``type``, ``lock``, ``token``…);
        skip types you do not know. The stream is not retried: to resume,
        watch again with ``since`` the last index seen. A reader that fell
        behind gets :class:`EventsLagged`, whose ``body["index"]`` is where
        to resume: watch again with ``since`` set to it; an index the node
        no longer keeps,
        :class:`~fencer.errors.EventsCompacted`. ``last_event_id`` resumes
        after that index (``Last-Event-ID``, which wins over ``since``);
        :meth:`watch` resumes by itself."""
        path = "/v1/events" + calls.events_query(since, prefix)
        last: Optional[Exception] = None
        for ep in self._endpoints:
            if ep.scheme == "https":
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
            try:
                extra = {"Accept": "text/event-stream"}
                if last_event_id is not None:
                    extra["Last-Event-ID"] = str(last_event_id)
                conn.request("GET", path, headers=self._headers(extra))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                last = e
                continue
            if resp.status != 200:
                try:
                    body = _read_body(resp, self.max_answer_bytes, "GET " + path)
                finally:
                    conn.close()
                if 400 <= resp.status < 600:
                    try:
                        err = answer.obj(body, "GET " + path)
                    except BadAnswer:
                        err = {"error": body.decode("utf-8", "replace")[:200]}
                    raise from_response(resp.status, err)
                raise BadAnswer("GET %s via %s: HTTP %d is not an event stream" % (path, ep.url, resp.status),
                                reason="status", status=resp.status)
            return EventStream(conn, resp, self.max_answer_bytes)
        raise Unavailable("GET %s: no endpoint answered: %s" % (path, last))

    def watch(self, *, since: Optional[int] = None, prefix: Optional[str] = None,
              timeout: float = 60.0) -> "Watch":
        """:meth:`events`, resumed: iterate it for event dicts. When a stream
        breaks (its member went away, or it fell behind), the watch
        reconnects with ``Last-Event-ID`` set to the last index it
        delivered, so each event arrives once, in order, across members, as
        the Go client's Watch does. ``since`` None starts from the index the
        cluster has applied now. It ends on :meth:`Watch.close`, with
        :class:`~fencer.errors.EventsCompacted` (re-list, then watch from
        the list's index), with the error a node answered, or with
        :class:`~fencer.errors.Unavailable` after ``attempts`` connections
        in a row broke before an event."""
        if since is None:
            since = int(self.cluster().get("applied_index", 0))
        return Watch(self, since, prefix, timeout)

    # ---- fenced keys -----------------------------------------------------

    def put(self, key: str, value: bytes, token: int, *, lock: Optional[str] = None) -> int:
        """A fenced write: stored only if ``token`` is above the key's last
        token (and, with ``lock``, is that lock's current grant). Raises
        StaleToken, NotLockHolder, MissingToken…; OutcomeUnknown when an
        attempt's answer was lost and a retry found the write refused as
        stale (the first attempt may have landed)."""
        headers = {"Fencing-Token": str(token), "Content-Type": "application/octet-stream"}
        if lock:
            headers["Fencing-Lock"] = lock
        try:
            resp = self.request("PUT", "/v1/kv/" + _quote(key), raw=bytes(value), headers=headers,
                                retry_outcome_unknown=False)
        except StaleToken as e:
            if getattr(e, "lost_answers", 0):
                raise OutcomeUnknown("put %r with token %d: an attempt's answer was lost and the retry was refused as stale: the first may have landed" % (key, token),
                                     code="outcome_unknown", status=e.status, body=e.body) from e
            raise
        # Only an answer that names the key and token is a stored write.
        return answer.put(resp.json(), key=key, token=token)

    def get(self, key: str, *, stale: bool = False) -> Tuple[bytes, int]:
        """A fenced key's value and the token of the write that stored it.
        Raises NotFound for a key never written."""
        resp = self.request("GET", "/v1/kv/" + _quote(key) + ("?stale=true" if stale else ""))
        return resp.body, answer.token_header(resp.headers.get("fencing-token"), "GET /v1/kv/" + key)

    def delete(self, key: str) -> int:
        """Delete a key and its mark (operators only with an ACL); returns
        the mark it had."""
        got = self.request("DELETE", "/v1/kv/" + _quote(key)).json().get("last_token", 0)
        return 0 if got == 0 else answer.token(got, "delete %r" % key)


def _campaign(acquire: Callable[[float], Lease], timeout: Optional[float]) -> Lease:
    """Call ``acquire(wait)`` until it leads, queueing at most a minute at a
    time and waiting out a lock-delay, or until ``timeout`` seconds pass
    (then the last refusal): the campaign of a client and of a session."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = MAX_WAIT if end is None else max(0.0, min(MAX_WAIT, end - time.monotonic()))
        try:
            return acquire(wait)
        except LockDelay as e:
            pause = e.retry_after
            if end is not None and time.monotonic() + pause >= end:
                raise
            time.sleep(pause)
        except (LockHeld, ServerTimeout):
            if end is not None and time.monotonic() >= end:
                raise
            # The wait ended with somebody else leading: queue again.


class EventsLagged(FencerError):
    """The event stream fell behind and the server ended it; ``body["index"]``
    is the index to resume from (every event up to it was sent)."""


class EventStream:
    """An open ``GET /v1/events`` stream: iterate it for event dicts; close
    it (or use it as a context manager) when done."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                 max_line: int = MAX_ANSWER_BYTES) -> None:
        self._conn, self._resp, self._max_line = conn, resp, max_line

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Dict[str, Any]:
        ev = self.next_lines()
        payload = answer.obj("\n".join(ev.data).encode("utf-8"), "GET /v1/events")
        if ev.type == "lagged":
            self.close()
            raise EventsLagged("the event stream fell behind and was ended", body=payload if isinstance(payload, dict) else {})
        return payload

    def next_lines(self) -> sse.EventLines:
        """The next complete event with data, as its fields (its ``id:``
        too, which a resumed watch needs); StopIteration when the stream
        ends."""
        ev = sse.EventLines()
        while True:
            line = self._resp.readline(self._max_line + 1)
            if not line:
                self.close()
                raise StopIteration
            if len(line) > self._max_line:
                self.close()
                raise BadAnswer("GET /v1/events: a line longer than %d bytes" % self._max_line, reason="too_large")
            if ev.line(line.decode("utf-8", "replace").rstrip("\r\n")):
                if ev.data:
                    return ev
                ev = sse.EventLines()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Watch:
    """A resumed event stream (:meth:`Client.watch`): iterate it for event
    dicts; :meth:`close` ends it, from any thread."""

    def __init__(self, client: Client, since: int, prefix: Optional[str], timeout: float) -> None:
        self._client, self._since, self._prefix, self._timeout = client, since, prefix, timeout
        # Where it is (fencer.sse): the last entry delivered in full, and
        # the events of one cut in the middle, skipped when they come again.
        self._resume = sse.Resume(since)
        self._stream: Optional[EventStream] = None
        self._failures = 0
        self._closed = False

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Dict[str, Any]:
        while not self._closed:
            if self._stream is None:
                self._connect()
                continue
            try:
                ev = self._resume.take(self._stream.next_lines())
            except sse.Lagged:
                self._broken()
                continue
            except (StopIteration, OSError, http.client.HTTPException):
                self._broken()
                continue
            if ev is None:
                continue
            self._failures = 0
            return ev
        raise StopIteration

    def _connect(self) -> None:
        self._resume.reconnected()
        try:
            self._stream = self._client.events(since=self._since, prefix=self._prefix,
                                               timeout=self._timeout, last_event_id=self._resume.last)
        except Unavailable:
            self._broken()

    def _broken(self) -> None:
        """Drop the stream; the next connection, after a short pause that
        doubles with each break in a row, resumes after the last index."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._failures += 1
        if self._closed:
            return
        if self._failures >= self._client.attempts:
            raise Unavailable("watch: %d connections in a row broke before an event" % self._failures)
        time.sleep(min(0.05 * 2 ** self._failures, 1.0))

    def close(self) -> None:
        self._closed = True
        stream = self._stream
        if stream is not None:
            stream.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Client", "Response", "EventStream", "EventsLagged", "Watch"]
