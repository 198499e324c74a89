"""Shared locks in the Python client against real fencer nodes
(bin/fencer): two shared holders at once, one under a session; a queued
writer that a later shared acquire does not pass; a shared grant's fenced
write refused; the writer served with a greater token once both release."""

from __future__ import annotations

import threading
import unittest

from fencer import Client, LockHeld
from fencer.errors import InvalidRequest, NotLockHolder

from .cluster import Cluster, poll

#: The log format whose entries hold a lock's mode (fsm, issue 28).
LOCK_MODES_LOG_FORMAT = 9


class SharedLockTest(unittest.TestCase):
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

    def test_shared_readers_then_the_writer(self) -> None:
        c = Client(self.cluster.endpoints(), holder="py-shared")
        r1 = c.acquire("py.shared", mode="shared", holder="r1")
        with c.session(ttl=5) as s:
            r2 = s.lock("py.shared", mode="shared", holder="r2")
            self.assertEqual((r1.mode, r2.mode), ("shared", "shared"))
            self.assertGreater(r2.token, r1.token)
            st = c.status("py.shared")
            self.assertFalse(st["held"])
            self.assertEqual([h["holder"] for h in st["shared_holders"]], ["r1", "r2"])
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("w", c.acquire("py.shared", wait=20, holder="w")))
            t.start()
            poll("the writer queued", lambda: c.status("py.shared").get("waiters", 0) == 1)
            with self.assertRaises(LockHeld):
                c.acquire("py.shared", mode="shared", holder="late")
            with self.assertRaises(NotLockHolder) as e:
                c.put("py.shared.k", b"v", r1.token, lock="py.shared")
            self.assertIn("shared grant cannot write", str(e.exception))
            self.assertTrue(c.check("py.shared", r2.token))
            self.assertEqual(c.token(r1.token).get("mode"), "shared")
            r1.release()
            r2.release()
            t.join(20)
            w = got["w"]
            self.assertEqual(w.mode, "exclusive")
            self.assertGreater(w.token, r2.token)
            c.put("py.shared.k", b"v", w.token, lock="py.shared")
            w.release()
        with self.assertRaises(InvalidRequest):
            c.acquire("py.shared", mode="read")


if __name__ == "__main__":
    unittest.main()
