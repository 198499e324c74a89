"""The Python client against a fake node that answers what no fencer node
would (issue 26 F5, F6): one test per scenario of
clients/testdata/bad_server.json, the table the Go client's
badserver_test.go plays too."""

from __future__ import annotations

import time
import tracemalloc
import unittest
from typing import Any, Dict, Optional

from fencer import BadAnswer, Client, FencerError, LeaseExpired

from .badserver import BadServer, load

TABLE = load()


class BadServerTest(unittest.TestCase):
    def run_scenario(self, sc: Dict[str, Any]) -> None:
        srv = BadServer(TABLE, sc)
        self.addCleanup(srv.close)
        timeout = sc.get("timeout_ms", 2000) / 1000.0
        c = Client([srv.endpoint], timeout=timeout, holder="bad-server-test")
        getattr(self, "call_" + sc["call"])(sc, srv, c, timeout)

    def outcome(self, sc: Dict[str, Any], srv: BadServer, op: str, fn: Any, timeout: float) -> Any:
        """Run fn and hold its outcome to the scenario's expect; return
        fn's result when it is expected to succeed."""
        big = "pad_bytes" in sc.get("answer", {})
        if big:
            tracemalloc.start()
        start = time.monotonic()
        got: Optional[BaseException] = None
        result = None
        try:
            result = fn()
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

    def call_acquire(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        g = TABLE["grant"]
        lease = self.outcome(sc, srv, "acquire", lambda: c.acquire(g["name"], ttl=g["ttl_ms"] / 1000.0, keep_alive=False), timeout)
        if sc["expect"] == "ok":
            self.assertEqual((lease.name, lease.token, lease.ttl_ms, lease.secret),
                             (g["name"], 7, g["ttl_ms"], "0123456789abcdef0123456789abcdef"))
            lease.release()

    def call_put(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        p = TABLE["put"]
        stored = self.outcome(sc, srv, "put", lambda: c.put(p["key"], p["value"].encode(), p["token"]), timeout)
        if sc["expect"] == "ok":
            self.assertEqual(stored, p["token"])

    def call_renew(self, sc: Dict[str, Any], srv: BadServer, c: Client, timeout: float) -> None:
        g = TABLE["grant"]
        ttl = g["ttl_ms"] / 1000.0
        lease = c.acquire(g["name"], ttl=ttl, keep_alive=False)
        before = lease.deadline
        self.outcome(sc, srv, "renew", lease.renew, timeout)
        self.assertEqual(srv.counts.get("renew"), 1, "a renewal's bad answer was retried")
        if sc["expect"] == "ok":
            self.assertGreater(lease.deadline, before)
        else:
            self.assertEqual(lease.deadline, before, "a bad renewal answer moved the deadline")
        lease.release()

        # Kept alive: renewals that get bad answers confirm nothing, so the
        # lease stops being valid by its local deadline, within its TTL.
        sent = time.monotonic()
        kept = c.acquire(g["name"], ttl=ttl)
        self.addCleanup(kept.release)
        end = sent + 2 * ttl
        if sc["expect"] == "ok":
            while time.monotonic() < end:
                self.assertTrue(kept.valid, "renewed by good answers, the lease was lost: %r" % kept._cause)
                time.sleep(0.02)
            return
        while kept.valid:
            self.assertLess(time.monotonic(), end, "renewals answered %s: the lease is still valid %.1fs after its acquire" % (sc["name"], time.monotonic() - sent))
            time.sleep(0.01)
        lost_after = time.monotonic() - sent
        self.assertLessEqual(lost_after, ttl + 0.05, "the lease was valid %.3fs after its acquire, past its TTL" % lost_after)
        renewals = srv.counts.get("renew", 0) - 1
        self.assertGreaterEqual(renewals, 1, "the keep-alive never renewed: the scenario tested nothing")
        self.assertLessEqual(renewals, 20, "%d renewals in one TTL: failed ones are resent in a loop" % renewals)
        with self.assertRaises(LeaseExpired):
            kept.check()


for _sc in TABLE["scenarios"]:
    setattr(BadServerTest, "test_" + _sc["name"].replace("-", "_"), lambda self, sc=_sc: self.run_scenario(sc))


if __name__ == "__main__":
    unittest.main()
