"""Multi-locks in the Python client against real fencer nodes (bin/fencer):
every name held with one token and kept alive on one lease, another
multi-lock over one of its names refused naming it, a fenced write under any
name, one name's release refused, and the release freeing them all."""

from __future__ import annotations

import threading
import time
import unittest

from fencer import Client, InvalidRequest, LockHeld, MultiGrant

from .cluster import Cluster, poll

#: The log format whose entries hold multi-locks (fsm, issue 28).
LOCK_MODES_LOG_FORMAT = 9


class MultiLockClusterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)
        c = Client(cls.cluster.endpoints())
        poll("every member reads log format %d" % LOCK_MODES_LOG_FORMAT,
             lambda: c.cluster().get("log_format", 0) >= LOCK_MODES_LOG_FORMAT, 20)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    def test_every_name_or_none(self) -> None:
        c, other = Client(self.cluster.endpoints(), holder="py-mover"), Client(self.cluster.endpoints())
        with c.multi_lock(["py.m.b", "py.m.a"], ttl=1) as m:
            for n in m.names:
                st = other.status(n)
                self.assertEqual((st["held"], st["token"], st["holder"]), (True, m.token, "py-mover"))
            with self.assertRaises(LockHeld) as held:
                other.multi_lock(["py.m.x", "py.m.a"])
            self.assertEqual((held.exception.lock, held.exception.token), ("py.m.a", m.token))
            self.assertFalse(other.status("py.m.x")["held"])
            time.sleep(3)  # three TTLs: kept alive on its one lease
            m.check()
            self.assertGreater(m.put("py.m.ledger", b"moved", lock="py.m.b"), 0)
            with self.assertRaises(MultiGrant):
                other.release("py.m.a", m.token, m.secret)
        self.assertTrue(m.lost.is_set())
        poll("every name free", lambda: not any(other.status(n)["held"] for n in ("py.m.a", "py.m.b")), 5)
        with self.assertRaises(InvalidRequest):
            c.multi_lock(["py.m.a", "py.m.a"])

    def test_shared_multi_lock(self) -> None:
        """A shared multi-lock is held beside a single shared grant of a
        name, with one token for both names, and keeps exclusive acquires
        out until its release. Fails with calls.multi_body leaving the mode
        out: LockHeld by the single shared grant of py.s.a."""
        c, other = Client(self.cluster.endpoints(), holder="py-reader"), Client(self.cluster.endpoints())
        single = other.acquire("py.s.a", ttl=10, mode="shared")
        with c.multi_lock(["py.s.a", "py.s.b"], ttl=5, mode="shared") as m:
            self.assertTrue(m.shared)
            self.assertGreater(m.token, single.token)
            with self.assertRaises(LockHeld):
                other.acquire("py.s.b", ttl=1)
        single.release()
        other.acquire("py.s.b", ttl=1).release()

    def test_waiting_multi_locks_in_queue_order(self) -> None:
        """Two multi-locks waiting on crossing names are granted in the
        order they queued, each every name with one token, never deadlocked."""
        c = Client(self.cluster.endpoints(), holder="py-w")
        held = c.acquire("py.w.y", ttl=10)
        got: dict = {}

        def take(who: str, names: list) -> None:
            got[who] = c.multi_lock(names, ttl=10, wait=20, holder=who)

        # A status leaves out "waiters" while there are none (omitempty).
        first = threading.Thread(target=take, args=("A", ["py.w.x", "py.w.y"]))
        first.start()
        poll("A queued", lambda: c.status("py.w.y").get("waiters", 0) == 1, 5)
        second = threading.Thread(target=take, args=("B", ["py.w.y", "py.w.x"]))
        second.start()
        poll("B queued", lambda: c.status("py.w.y").get("waiters", 0) == 2, 5)
        held.release()
        first.join(10)
        a = got["A"]
        self.assertEqual([c.status(n)["token"] for n in ("py.w.x", "py.w.y")], [a.token, a.token])
        self.assertNotIn("B", got)
        a.release()
        second.join(10)
        self.assertGreater(got["B"].token, a.token)
        got["B"].release()


if __name__ == "__main__":
    unittest.main()
