"""Sessions in the Python client against the contract (issue 27), played
by a fake node: one test per scenario of tests/session_server.json, which
extends clients/testdata/bad_server.json's format with the session
operations.

What a call does (``call``), and what ``expect`` asks of it beyond the
shared table's ``ok`` and ``bad_answer``:

- ``session``: create a session with the table's TTL; with ``ok``, take a
  lock and a permit under it (the acquires carry ``session`` and
  ``session_lease`` and no ``ttl_ms``), then close it.
- ``session_renew``: create, renew once; then create again with the
  keep-alive on and a lock under it, and watch it for two TTLs. ``ok``: it
  stays valid and the lock is never renewed on its own (the session is);
  ``bad_answer``: ``done`` is set, the lock lost first, at least half a
  margin before the TTL after the create was sent runs out; ``ended``: the
  renewal raises ``error``'s class and the session and its lock end at
  once, and so does a kept-alive one at its first renewal.
- ``session_lock``: create, lock under it; ``refused``: the acquire raises
  ``error``'s class and the session goes on.
- ``session_close``: create, lock under it, close: ``ok`` returns the
  released grants and leaves the lock lost.
"""

from __future__ import annotations

import time
import unittest
from typing import Any, Dict, Optional

import fencer
from fencer import BadAnswer, Client, LeaseExpired, LeaseLost
from fencer.errors import SessionGrant

from .badserver import BadServer, load_sessions

TABLE = load_sessions()
SESSION = TABLE["session"]
TTL = SESSION["ttl_ms"] / 1000.0
#: The operation whose answer each call's scenarios replace.
OPS = {"session": "session_create", "session_renew": "session_renew",
       "session_lock": "session_acquire", "session_close": "session_close"}


class SessionContractTest(unittest.TestCase):
    def run_scenario(self, sc: Dict[str, Any]) -> None:
        srv = BadServer(TABLE, sc, OPS[sc["call"]])
        self.addCleanup(srv.close)
        timeout = sc.get("timeout_ms", 2000) / 1000.0
        c = Client([srv.endpoint], timeout=timeout, holder="bad-server-test")
        getattr(self, "call_" + sc["call"])(sc, srv, c)

    def outcome(self, sc: Dict[str, Any], srv: BadServer, op: str, fn: Any) -> Any:
        got: Optional[BaseException] = None
        result = None
        try:
            result = fn()
        except Exception as e:  # held to the expectation below
            got = e
        expect = sc["expect"]
        if expect == "ok":
            self.assertIsNone(got, "%s: %r" % (sc["name"], got))
        elif expect == "bad_answer":
            self.assertIsInstance(got, BadAnswer, "%s: want BadAnswer, got %r (result %r)" % (sc["name"], got, result))
            self.assertEqual(srv.counts.get(op), 1, "%s: a bad answer was retried" % sc["name"])
        elif expect in ("ended", "refused"):
            self.assertIsInstance(got, getattr(fencer, sc["error"]), "%s: want %s, got %r" % (sc["name"], sc["error"], got))
        else:
            self.fail("unknown expect %r" % expect)
        return result

    def session(self, c: Client, **kw: Any) -> fencer.Session:
        s = c.session(ttl=TTL, **kw)
        self.addCleanup(s.close)
        return s

    def call_session(self, sc: Dict[str, Any], srv: BadServer, c: Client) -> None:
        s = self.outcome(sc, srv, "session_create", lambda: self.session(c, keep_alive=False))
        if sc["expect"] != "ok":
            return
        self.assertEqual((s.id, s.lease, s.ttl_ms, s.holder), (SESSION["id"], SESSION["lease"], SESSION["ttl_ms"], "bad-server-test"))
        lock = s.lock("a")
        permit = s.acquire_permit("s", 2)
        self.assertEqual((lock.name, lock.token, lock.session, permit.name, permit.limit), ("a", 7, s, "s", 2))
        for op in ("session_acquire", "session_permit"):
            body = srv.bodies[op][0]
            self.assertEqual((body["session"], body["session_lease"], body["holder"]), (SESSION["id"], SESSION["lease"], "bad-server-test"))
            self.assertNotIn("ttl_ms", body, "an acquire under a session asked for a TTL of its own")
        self.assertEqual(s.grants, [lock, permit], "the session's grants, by token then kind")
        released = s.close()
        self.assertEqual(released, [{"kind": "lock", "name": "a", "token": 7}, {"kind": "semaphore", "name": "s", "token": 7}])
        self.assertTrue(s.done.is_set() and lock.lost.is_set() and permit.lost.is_set())
        with self.assertRaises(LeaseLost):
            lock.check()
        self.assertEqual(s.close(), [], "a second close sent another")
        self.assertEqual(srv.counts.get("session_close"), 1)

    def call_session_renew(self, sc: Dict[str, Any], srv: BadServer, c: Client) -> None:
        s = self.session(c, keep_alive=False)
        lock = s.lock("a")
        before = s.deadline
        self.outcome(sc, srv, "session_renew", s.renew)
        self.assertEqual(srv.counts.get("session_renew"), 1, "a session renewal's answer was retried")
        if sc["expect"] == "ok":
            self.assertGreater(s.deadline, before)
            self.assertEqual(lock.deadline, s.deadline, "a grant under the session has a deadline of its own")
        elif sc["expect"] == "bad_answer":
            self.assertEqual(s.deadline, before, "a bad renewal answer moved the deadline")
        else:
            # A refusal ends the session and its grants at once, long
            # before the deadline.
            self.assertTrue(s.done.is_set() and lock.lost.is_set(), "a refused renewal left the session or its lock standing")
            self.assertNotIsInstance(s._cause, LeaseExpired)
            with self.assertRaises(LeaseLost):
                lock.check()
            with self.assertRaises(getattr(fencer, sc["error"])):
                s.check()
        s.close()

        # Kept alive, with a lock under it.
        renews, grant_renews = srv.counts.get("session_renew", 0), srv.counts.get("renew", 0)
        sent = time.monotonic()
        kept = self.session(c)
        held = kept.lock("b")
        end = sent + 2 * TTL
        if sc["expect"] == "ok":
            while time.monotonic() < end:
                self.assertTrue(kept.valid and held.valid, "renewed by good answers, the session was lost: %r" % kept._cause)
                time.sleep(0.02)
            self.assertGreaterEqual(srv.counts.get("session_renew", 0) - renews, 3, "the session was not renewed every TTL/3")
            self.assertEqual(srv.counts.get("renew", 0), grant_renews, "a grant under a session was renewed on its own")
            # Renewing the grant renews its session: the server refuses a
            # renewal of the grant itself (409 session_grant).
            n = srv.counts.get("session_renew", 0)
            held.renew()
            self.assertEqual((srv.counts.get("session_renew", 0), srv.counts.get("renew", 0)), (n + 1, grant_renews))
            with self.assertRaises(SessionGrant):
                c.renew(held.name, held.token, held.secret)
            return
        if sc["expect"] == "ended":
            self.assertTrue(kept.done.wait(TTL - kept.margin), "a refused renewal did not end the kept-alive session")
            self.assertNotIsInstance(kept._cause, LeaseExpired)
            self.assertTrue(held.lost.is_set())
            return
        self.assertTrue(kept.done.wait(2 * TTL), "renewals answered %s: the session is still believed 2 TTLs on" % sc["name"])
        done_after = time.monotonic() - sent
        self.assertTrue(held.lost.is_set(), "done was set before the lock under the session was lost")
        # The server's TTL starts after the create was sent: done must
        # come well inside it (the margin is TTL/10).
        self.assertLessEqual(done_after, TTL - kept.margin / 2,
                             "done was set %.3fs after the create was sent: too close to the server's TTL of %gs" % (done_after, TTL))
        self.assertGreaterEqual(done_after, TTL - kept.margin - 0.05, "done was set %.3fs after the create, before its deadline" % done_after)
        renewals = srv.counts.get("session_renew", 0) - renews
        self.assertGreaterEqual(renewals, 1, "the keep-alive never renewed: the scenario tested nothing")
        self.assertLessEqual(renewals, 20, "%d renewals in one TTL: failed ones are resent in a loop" % renewals)
        with self.assertRaises(LeaseExpired):
            held.check()

    def call_session_lock(self, sc: Dict[str, Any], srv: BadServer, c: Client) -> None:
        s = self.session(c, keep_alive=False)
        lock = self.outcome(sc, srv, "session_acquire", lambda: s.lock("a"))
        if sc["expect"] == "ok":
            self.assertEqual((lock.token, lock.session, s.grants), (7, s, [lock]))
            lock.release()
            self.assertEqual(s.grants, [], "a released grant stayed on its session")
            self.assertTrue(lock.lost.is_set() and not s.done.is_set(), "releasing a grant ended its session")
            return
        self.assertEqual(s.grants, [], "a grant not believed was attached to the session")
        self.assertTrue(s.valid, "a refused or bad acquire ended the session")

    def call_session_close(self, sc: Dict[str, Any], srv: BadServer, c: Client) -> None:
        s = self.session(c, keep_alive=False)
        lock = s.lock("a")
        released = self.outcome(sc, srv, "session_close", s.close)
        # Whatever the answer, the client stopped believing first.
        self.assertTrue(s.done.is_set() and lock.lost.is_set())
        if sc["expect"] == "ok":
            self.assertEqual([(g["kind"], g["name"]) for g in released], [("lock", "a"), ("semaphore", "s")])


for _sc in TABLE["scenarios"]:
    setattr(SessionContractTest, "test_" + _sc["name"].replace("-", "_"), lambda self, sc=_sc: self.run_scenario(sc))


class SessionLocalTest(unittest.TestCase):
    """What needs no server: bad arguments, and a paused process."""

    def test_ttl_bounds(self) -> None:
        c = Client(["127.0.0.1:1"], timeout=0.2, attempts=1)
        for ttl in (0.05, 86401):
            with self.assertRaises(fencer.InvalidRequest):
                c.session(ttl=ttl)

    def test_paused_past_the_deadline(self) -> None:
        """check() reads the clock: a process paused past the session's
        deadline (no thread has run) sees the session and its grants lost on
        the first look."""
        srv = BadServer(TABLE, {"name": "paused", "call": "none", "expect": "ok"})
        self.addCleanup(srv.close)
        c = Client([srv.endpoint], timeout=2, holder="bad-server-test")
        s = c.session(ttl=TTL, keep_alive=False)
        lock = s.lock("a")
        s._halt()  # no thread will look: as if the process were paused
        with s._mu:
            s._confirmed -= TTL
        with self.assertRaises(LeaseExpired):
            lock.check()
        self.assertTrue(s.done.is_set() and lock.lost.is_set())
        with self.assertRaises(LeaseLost):
            s.lock("b")


if __name__ == "__main__":
    unittest.main()
