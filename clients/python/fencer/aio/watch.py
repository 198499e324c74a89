"""``client.watch()``: the cluster's events as an async iterator that
reconnects across members and resumes with ``Last-Event-ID``
(:mod:`fencer.sse` says how), as the Go client's Watch does.

A connection that fails, goes silent for 45 s (members send a comment every
15 s) or is cut off as lagged is replaced by one to the next endpoint,
resuming after the last entry delivered in full. The watch ends with an
error only when a member refuses it (below 500: ``events_compacted``,
forbidden, invalid), when an event is malformed, or when ``attempts``
connections in a row fail (:class:`~fencer.errors.Unavailable`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Optional

import aiohttp

from .. import answer, calls, sse
from ..errors import BadAnswer, FencerError, Unavailable
from .transport import Unreached

if TYPE_CHECKING:  # pragma: no cover
    from .transport import Transport

#: As ``since``: start at the index the first member reached has applied.
FROM_NOW = -1

IDLE_TIMEOUT = 45.0


class Watch:
    """An open watch: ``async for event in watch``; ``last`` is the index
    of the last entry delivered in full. Close it with :meth:`aclose` (or
    ``async with``)."""

    def __init__(self, tr: "Transport", prefix: Optional[str], since: int) -> None:
        self._tr = tr
        self._prefix = prefix
        self._resume: Optional[sse.Resume] = None if since == FROM_NOW else sse.Resume(since)
        self._retry = 0.0
        self._gen = self._run()

    @property
    def last(self) -> Optional[int]:
        return None if self._resume is None else self._resume.last

    def __aiter__(self) -> "Watch":
        return self

    async def __anext__(self) -> Dict[str, Any]:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def __aenter__(self) -> "Watch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _run(self) -> AsyncIterator[Dict[str, Any]]:
        failures = 0
        attempt = 0
        while True:
            ep = self._tr.endpoints[attempt % len(self._tr.endpoints)]
            attempt += 1
            connected = False
            try:
                async for ev in self._stream(ep):
                    connected = True
                    if ev is not None:
                        yield ev
                failure: Exception = Unreached("GET /v1/events via %s: the stream ended" % ep.url, sent=True)
            except sse.Lagged:
                failures = 0
                continue  # resume at once, from where the member stopped
            except FencerError as e:
                if isinstance(e, BadAnswer) or e.status < 500:
                    raise
                failure = e
            except Unreached as e:
                failure = e
            if connected:
                failures = 0
            failures += 1
            if failures >= self._tr.attempts:
                raise Unavailable("watch %r after index %s: %d connections failed: %s"
                                  % (self._prefix or "", self.last, failures, failure))
            await asyncio.sleep(self._retry or min(0.05 * 2 ** failures, 1.0))

    async def _stream(self, ep: Any) -> AsyncIterator[Optional[Dict[str, Any]]]:
        """One connection's events; yields None once connected (so the
        caller knows it was) and then each event to deliver."""
        if self._resume is None:
            # Resolved once, so that a reconnection resumes from the same
            # place whatever member it reaches.
            try:
                st = await self._tr.cluster_status(ep, time.monotonic() + self._tr.timeout)
            except FencerError as e:
                raise Unreached("GET /v1/cluster via %s: %s" % (ep.url, e), sent=True) from None
            applied = st.get("applied_index")
            if isinstance(applied, bool) or not isinstance(applied, int) or applied < 0:
                raise BadAnswer("GET /v1/cluster via %s: applied_index %r is not an index" % (ep.url, applied))
            self._resume = sse.Resume(applied)
        resume = self._resume
        path = "/v1/events" + calls.events_query(resume.since, self._prefix)
        headers = self._tr.headers({"Accept": "text/event-stream", "Last-Event-ID": str(resume.last)})
        what = "GET %s via %s" % (path, ep.url)
        try:
            resp = await asyncio.wait_for(self._tr.session().get(ep.url + path, headers=headers, allow_redirects=False),
                                          self._tr.timeout)
        except asyncio.TimeoutError:
            raise Unreached("%s: no answer" % what, sent=True) from None
        except (aiohttp.ClientError, OSError) as e:
            raise Unreached("%s: %s" % (what, e), sent=True) from None
        async with resp:
            if resp.status != 200:
                try:
                    body = await asyncio.wait_for(resp.content.read(self._tr.max_answer_bytes), self._tr.timeout)
                except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as e:
                    raise Unreached("%s: HTTP %d, its body unread: %s" % (what, resp.status, e), sent=True) from None
                raise answer.refusal(resp.status, {k.lower(): v for k, v in resp.headers.items()}, body, what)
            resume.reconnected()
            yield None
            ev = sse.EventLines()
            while True:
                try:
                    raw = await asyncio.wait_for(resp.content.readline(), IDLE_TIMEOUT)
                except asyncio.TimeoutError:
                    raise Unreached("%s: silent for %gs" % (what, IDLE_TIMEOUT), sent=True) from None
                except ValueError:
                    raise BadAnswer("%s: a line longer than the client reads" % what, reason="too_large") from None
                except (aiohttp.ClientError, OSError) as e:
                    raise Unreached("%s: %s" % (what, e), sent=True) from None
                if not raw:
                    return  # the stream ended; an unfinished event is dropped
                if not ev.line(raw.decode("utf-8", "replace").rstrip("\r\n")):
                    continue
                if ev.retry is not None:
                    self._retry = ev.retry
                out = resume.take(ev)
                ev = sse.EventLines()
                if out is not None:
                    yield out
