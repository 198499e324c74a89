"""Sending a request to the leader over aiohttp, and what is retried: the
Go client's rules (``api/client/doc.go``), on one event loop.

* The leader is found with ``GET /v1/cluster`` and cached; an answer a
  follower forwarded names the leader (``Fencer-Leader``), and the next
  request goes there.
* An attempt that could not reach its member (refused, reset, timed out)
  goes at once to another endpoint, which forwards it, without asking who
  leads (the members may still name the dead leader); only a round of
  endpoints none of which answered, and answers that say to retry
  (``no_leader``, ``outcome_unknown``), cost a backoff (``Retry-After`` when
  sent, else exponential with jitter).
* An attempt at the leader unanswered after a second asks the other
  members who leads, again at doubling intervals up to 8 s; once they name
  another, the attempt is given up as one whose answer was lost and sent
  there: a frozen leader holds a request only until the cluster elected
  another.
* Only a 2xx is a success, and no redirect is followed; any other answer is
  the error its code names, or :class:`~fencer.errors.BadAnswer`
  (:func:`fencer.answer.refusal`). The whole call, every attempt, pause and
  the reading of each answer, is bounded by its deadline on the monotonic
  clock; an answer longer than ``max_answer_bytes`` is refused as it is
  read.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import aiohttp

from .. import answer, calls
from ..calls import Endpoint
from ..client import Response
from ..errors import BadAnswer, FencerError, NoLeader, OutcomeUnknown, Unavailable

#: How long an attempt at the leader runs before the other members are
#: asked who leads, and the longest interval between such checks.
LEADER_CHECK_AFTER = 1.0
LEADER_CHECK_EVERY = 8.0


class Unreached(Exception):
    """An attempt got no answer. ``sent`` is False when nothing was sent
    (the connection was refused), so the request surely did nothing."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Transport:
    """Endpoints, the cached leader and one aiohttp session."""

    def __init__(self, endpoints: List[Endpoint], *, auth: str, ssl_context: Optional[ssl.SSLContext],
                 timeout: float, attempts: int, max_answer_bytes: int) -> None:
        self.endpoints = endpoints
        self._auth = auth
        self._ssl = ssl_context
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.max_answer_bytes = max_answer_bytes
        self._leader: Optional[Endpoint] = None
        self._next = 0
        self._http: Optional[aiohttp.ClientSession] = None
        self._discovering: Optional[asyncio.Lock] = None
        self._closed = False

    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session, made on first use (inside the event loop).
        After :meth:`close` every request fails (Unreached), so a lease
        still held ends at its deadline rather than reopening a session."""
        if self._closed:
            raise Unreached("the client is closed", sent=False)
        if self._http is None:
            # No cookies (a fencing client keeps no state a server could
            # plant), no timeout of aiohttp's own (every call brings its
            # deadline), and a fresh connection per request, as the
            # synchronous client's: a pooled one that the member closed
            # while this process was paused fails on reuse in a way that
            # cannot tell "never arrived" from "answer lost", and would turn
            # a refused write into OutcomeUnknown.
            self._http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                               timeout=aiohttp.ClientTimeout(total=None),
                                               connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl else False,
                                                                              force_close=True))
        return self._http

    async def close(self) -> None:
        self._closed = True
        if self._http is not None:
            await self._http.close()
            self._http = None

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if self._auth:
            h["Authorization"] = self._auth
        if extra:
            h.update(extra)
        return h

    # ---- one attempt -------------------------------------------------------

    async def send(self, ep: Endpoint, method: str, path: str, data: Optional[bytes],
                   headers: Mapping[str, str], deadline: float) -> Tuple[int, Dict[str, str], bytes]:
        """One exchange with one member, done by ``deadline`` (monotonic):
        the status, the headers (lower-case names) and the body. Raises
        Unreached when no answer arrives in time, BadAnswer for a body over
        max_answer_bytes."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unreached("the call's deadline passed before %s %s was sent" % (method, path), sent=False)
        try:
            return await asyncio.wait_for(self._exchange(ep, method, path, data, headers), left)
        except asyncio.TimeoutError:
            raise Unreached("%s %s via %s: no answer before the deadline" % (method, path, ep.url), sent=True) from None
        except aiohttp.ClientConnectorError as e:
            raise Unreached("%s %s via %s: %s" % (method, path, ep.url, e), sent=False) from None
        except (aiohttp.ClientError, OSError) as e:
            raise Unreached("%s %s via %s: %s" % (method, path, ep.url, e or type(e).__name__), sent=True) from None

    async def _exchange(self, ep: Endpoint, method: str, path: str, data: Optional[bytes],
                        headers: Mapping[str, str]) -> Tuple[int, Dict[str, str], bytes]:
        what = "%s %s via %s" % (method, path, ep.url)
        async with self.session().request(method, ep.url + path, data=data, headers=dict(headers),
                                          allow_redirects=False) as resp:
            rh = {k.lower(): v for k, v in resp.headers.items()}
            return resp.status, rh, await read_body(resp, self.max_answer_bytes, what)

    # ---- the leader --------------------------------------------------------

    async def cluster_status(self, ep: Endpoint, deadline: float) -> Dict[str, Any]:
        """``GET /v1/cluster`` from ``ep`` alone, in at most 2 s."""
        status, rh, body = await self.send(ep, "GET", "/v1/cluster", None, self.headers(),
                                           min(deadline, time.monotonic() + 2.0))
        if status != 200:
            raise answer.refusal(status, rh, body, "GET /v1/cluster via %s" % ep.url)
        return answer.obj(body, "GET /v1/cluster via %s" % ep.url)

    async def _discover(self, deadline: float) -> Optional[Endpoint]:
        if self._discovering is None:
            self._discovering = asyncio.Lock()
        async with self._discovering:
            if self._leader is not None:
                return self._leader  # found while this one waited
            start = self._next
            for i in range(len(self.endpoints)):
                ep = self.endpoints[(start + i) % len(self.endpoints)]
                try:
                    leader = calls.leader_endpoint(await self.cluster_status(ep, deadline), ep)
                except (Unreached, FencerError):
                    continue
                if leader is not None:
                    self._leader, self._next = leader, start + i
                    return leader
            return None

    async def _target(self, deadline: float, unanswered: Optional[Endpoint]) -> Endpoint:
        """Where the next attempt goes: the cached leader, a discovered
        one, or, after an attempt that reached nobody (``unanswered``), at
        once the next endpoint but that one."""
        if self._leader is not None and self._leader != unanswered:
            return self._leader
        if unanswered is None:
            found = await self._discover(deadline)
            if found is not None:
                return found
        for _ in self.endpoints:
            ep = self.endpoints[self._next % len(self.endpoints)]
            if ep != unanswered:
                return ep
            self._next += 1
        return self.endpoints[self._next % len(self.endpoints)]

    def _follow(self, leader: Optional[str], via: Endpoint) -> None:
        if leader:
            ep = calls.header_endpoint(leader, via)
            if ep is not None:
                self._leader = ep

    def _forget(self, ep: Endpoint) -> None:
        if self._leader == ep:
            self._leader = None
        self._next += 1

    async def _other_leader(self, base: Endpoint, deadline: float) -> Optional[Endpoint]:
        """The leader the first other member names, if it is not ``base``."""
        for ep in self.endpoints:
            if ep == base:
                continue
            try:
                leader = calls.leader_endpoint(await self.cluster_status(ep, deadline), ep)
            except (Unreached, FencerError):
                continue
            if leader is not None:
                return leader if leader != base else None
        return None

    async def _send_watched(self, ep: Endpoint, method: str, path: str, data: Optional[bytes],
                            headers: Mapping[str, str], deadline: float) -> Tuple[int, Dict[str, str], bytes]:
        """send, giving up on the leader once the others name another."""
        if ep != self._leader or len(self.endpoints) < 2:
            return await self.send(ep, method, path, data, headers, deadline)
        attempt = asyncio.ensure_future(self.send(ep, method, path, data, headers, deadline))
        every = LEADER_CHECK_AFTER
        try:
            while True:
                done, _ = await asyncio.wait({attempt}, timeout=every)
                if done:
                    return attempt.result()
                other = await self._other_leader(ep, deadline)
                if other is not None and not attempt.done():
                    self._leader = other
                    raise Unreached("%s %s via %s: no answer, and the other members name %s the leader"
                                    % (method, path, ep.url, other.url), sent=True)
                every = min(2 * every, LEADER_CHECK_EVERY)
        finally:
            if not attempt.done():
                attempt.cancel()

    # ---- a request ---------------------------------------------------------

    async def request(self, method: str, path: str, body: Any = None, *,
                      headers: Optional[Mapping[str, str]] = None, raw: Optional[bytes] = None,
                      extra_timeout: float = 0.0, deadline: Optional[float] = None,
                      attempt_timeout: Optional[float] = None,
                      retry_outcome_unknown: bool = True) -> Response:
        """Send a request to the leader, following it and retrying as the
        module says; ``body`` goes as JSON, ``raw`` as bytes. Returns a 2xx
        answer or raises the error its code names. An error raised after an
        attempt whose answer was lost carries ``lost_answers``."""
        end = time.monotonic() + self.timeout + extra_timeout
        if deadline is not None:
            end = min(end, deadline)
        hdrs = self.headers(headers)
        data = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        first_sent: Optional[float] = None
        lost, pauses, skipped = 0, 0, 0
        unanswered: Optional[Endpoint] = None
        last_err: Optional[FencerError] = None
        for _ in range(self.attempts):
            if time.monotonic() >= end:
                break
            ep = await self._target(end, unanswered)
            sent = time.monotonic()
            first_sent = sent if first_sent is None else first_sent
            limit = end if attempt_timeout is None else min(end, sent + attempt_timeout)
            unanswered, retry_after = None, 0.0
            try:
                status, rh, rb = await self._send_watched(ep, method, path, data, hdrs, limit)
            except Unreached as e:
                lost += 1 if e.sent else 0
                last_err = Unavailable(str(e))
                self._forget(ep)
                unanswered = ep
            else:
                self._follow(rh.get("fencer-leader"), ep)
                if 200 <= status < 300:
                    return Response(status, rh, rb, sent, first_sent, lost)
                err = answer.refusal(status, rh, rb, "%s %s via %s" % (method, path, ep.url))
                if isinstance(err, BadAnswer):
                    raise err
                if not (isinstance(err, NoLeader) or (isinstance(err, OutcomeUnknown) and retry_outcome_unknown)):
                    err.lost_answers = lost  # type: ignore[attr-defined]
                    raise err
                # A forwarding member answers no_leader also when the leader
                # vanished mid-request: the write may have landed.
                lost += 1
                last_err = err
                self._forget(ep)
                ra = rh.get("retry-after", "")
                retry_after = float(ra) if ra.isdigit() else 0.0
            if unanswered is not None and skipped < len(self.endpoints) - 1:
                skipped += 1
                continue  # no pause: another member answers now
            skipped = 0
            pauses += 1
            pause = max(retry_after, min(0.05 * 2 ** (pauses - 1), 1.0) * (1 + random.random()))
            await asyncio.sleep(min(pause, max(0.0, end - time.monotonic())))
        if last_err is not None:
            last_err.lost_answers = lost  # type: ignore[attr-defined]
            raise last_err
        raise Unavailable("%s %s: no attempt left before the deadline" % (method, path))


async def read_body(resp: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The answer's body, refused (BadAnswer) once it passes ``limit``
    bytes: a Content-Length above it before anything is read, else as it is
    read."""
    if resp.content_length is not None and resp.content_length > limit:
        raise BadAnswer("%s: the answer's Content-Length %d is above the client's limit of %d bytes (max_answer_bytes)"
                        % (what, resp.content_length, limit), reason="too_large", status=resp.status)
    chunks: List[bytes] = []
    n = 0
    while True:
        chunk = await resp.content.read(min(64 << 10, limit + 1 - n))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        n += len(chunk)
        if n > limit:
            raise BadAnswer("%s: the answer is longer than the client's limit of %d bytes (max_answer_bytes)"
                            % (what, limit), reason="too_large", status=resp.status)
