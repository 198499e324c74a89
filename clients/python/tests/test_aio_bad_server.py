"""fencer.aio against the fake node of clients/testdata/bad_server.json,
the table the synchronous client and the Go client play too: answers no
fencer node would give (redirects, empty and HTML bodies, grants for
another lock or a longer TTL, malformed JSON, a drip, 60 MB) are
BadAnswer, not retried, or bounded by the call's deadline."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
import unittest
from typing import Any, Awaitable, Callable, Dict, Optional

from fencer import BadAnswer, FencerError, LeaseExpired
from fencer.aio import Client

from .badserver import BadServer, load

TABLE = load()


class AioBadServerTest(unittest.IsolatedAsyncioTestCase):
    async def run_scenario(self, sc: Dict[str, Any]) -> None:
        srv = BadServer(TABLE, sc)
        self.addCleanup(srv.close)
        timeout = sc.get("timeout_ms", 2000) / 1000.0
        c = Client([srv.endpoint], timeout=timeout, holder="bad-server-test")
        self.addAsyncCleanup(c.close)
        await getattr(self, "call_" + sc["call"])(sc, srv, c, timeout)

    async def outcome(self, sc: Dict[str, Any], srv: BadServer, op: str, fn: Callable[[], Awaitable[Any]], timeout: float) -> Any:
        big = "pad_bytes" in sc.get("answer", {})
        if big:
            tracemalloc.start()
        start = time.monotonic()
        got: Optional[BaseException] = None
        result = None
        try:
            result = await fn()
        except Exception as e:  # held to the expectation below
            got = e
        elapsed = time.monotonic() - start
        if big:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            self.assertLess(peak, 16 << 20, "reading a %d-byte answer took %d bytes: it was read whole" % (sc["answer"]["pad_bytes"], peak))
        expect = sc["expect"]
        if expect == "ok":
            self.assertIsNone(got, "%s: %r" % (sc["name"], got))
        elif expect == "bad_answer":
            self.assertIsInstance(got, BadAnswer, "%s: want BadAnswer, got %r (result %r)" % (sc["name"], got, result))
            self.assertEqual(srv.counts.get(op), 1, "%s: a bad answer was retried" % sc["name"])
        elif expect == "deadline":
            self.assertIsInstance(got, FencerError, "%s: want a FencerError, got %r" % (sc["name"], got))
            self.assertLess(elapsed, timeout + 1.0, "%s: a %gs call ran %.1fs" % (sc["name"], timeout, elapsed))
        else:
            self.fail("unknown expect %r" % expect)
        return result

    async def call_acquire(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        g = TABLE["grant"]
        lease = await self.outcome(sc, srv, "acquire", lambda: c.acquire(g["name"], ttl=g["ttl_ms"] / 1000.0, keep_alive=False), timeout)
        if sc["expect"] == "ok":
            self.assertEqual((lease.name, lease.token, lease.ttl_ms, lease.secret),
                             (g["name"], 7, g["ttl_ms"], "0123456789abcdef0123456789abcdef"))
            await lease.release()

    async def call_put(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        p = TABLE["put"]
        stored = await self.outcome(sc, srv, "put", lambda: c.put(p["key"], p["value"].encode(), p["token"]), timeout)
        if sc["expect"] == "ok":
            self.assertEqual(stored, p["token"])

    async def call_renew(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        g = TABLE["grant"]
        ttl = g["ttl_ms"] / 1000.0
        lease = await c.acquire(g["name"], ttl=ttl, keep_alive=False)
        before = lease.deadline
        await self.outcome(sc, srv, "renew", lease.renew, timeout)
        self.assertEqual(srv.counts.get("renew"), 1, "a renewal's bad answer was retried")
        if sc["expect"] == "ok":
            self.assertGreater(lease.deadline, before)
        else:
            self.assertEqual(lease.deadline, before, "a bad renewal answer moved the deadline")
        await lease.release()

        # Kept alive: renewals that get bad answers confirm nothing, so the
        # lease ends at its local deadline, within its TTL.
        sent = time.monotonic()
        kept = await c.acquire(g["name"], ttl=ttl)
        self.addAsyncCleanup(kept.release)
        end = sent + 2 * ttl
        if sc["expect"] == "ok":
            while time.monotonic() < end:
                self.assertTrue(kept.valid, "renewed by good answers, the lease was lost: %r" % kept.cause)
                await asyncio.sleep(0.02)
            return
        try:
            await asyncio.wait_for(kept.lost.wait(), end - time.monotonic())
        except asyncio.TimeoutError:
            self.fail("renewals answered %s: the lease is still held %.1fs after its acquire" % (sc["name"], time.monotonic() - sent))
        lost_after = time.monotonic() - sent
        self.assertLessEqual(lost_after, ttl + 0.05, "lost was set %.3fs after the acquire, past its TTL" % lost_after)
        renewals = srv.counts.get("renew", 0) - 1
        self.assertGreaterEqual(renewals, 1, "the keep-alive never renewed: the scenario tested nothing")
        self.assertLessEqual(renewals, 20, "%d renewals in one TTL: failed ones are resent in a loop" % renewals)
        with self.assertRaises(LeaseExpired):
            kept.check()


def _test(sc: Dict[str, Any]) -> Callable[[AioBadServerTest], Awaitable[None]]:
    async def test(self: AioBadServerTest) -> None:
        await self.run_scenario(sc)
    return test


for _sc in TABLE["scenarios"]:
    setattr(AioBadServerTest, "test_" + _sc["name"].replace("-", "_"), _test(_sc))


if __name__ == "__main__":
    unittest.main()
