"""Durable waiters in the Python client against real fencer nodes
(bin/fencer): two waiters with ``durable=True`` queue behind a holder
nobody renews, the leader is killed, and both are granted on the new
leader in enqueue order, each grant saying where it queued; durable
without a wait is refused before anything is sent."""

from __future__ import annotations

import queue
import threading
import unittest

from fencer import Client
from fencer.errors import InvalidRequest

from .cluster import Cluster, poll

#: The log format whose entries hold durable waiters (fsm, issue 28).
DURABLE_LOG_FORMAT = 10


class DurableWaiterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)
        c = Client(cls.cluster.endpoints())
        poll("every member reads log format %d" % DURABLE_LOG_FORMAT,
             lambda: c.cluster().get("log_format", 0) >= DURABLE_LOG_FORMAT, 20)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    def test_durable_needs_a_wait(self) -> None:
        c = Client(self.cluster.endpoints())
        with self.assertRaises(InvalidRequest):
            c.acquire("py.durable.nowait", durable=True)

    def test_zz_waiters_keep_their_order_across_a_killed_leader(self) -> None:
        c = Client(self.cluster.endpoints(), holder="py-durable", timeout=60)
        holder = c.acquire("py.durable", ttl=3, keep_alive=False, holder="holder")
        granted: "queue.Queue[object]" = queue.Queue()

        def wait(who: str) -> None:
            try:
                granted.put(c.acquire("py.durable", ttl=20, wait=40, durable=True, keep_alive=False, holder=who))
            except Exception as e:  # the test reads it
                granted.put(e)

        for i, who in enumerate(["d1", "d2"]):
            threading.Thread(target=wait, args=(who,), daemon=True).start()
            poll(who + " queued", lambda: c.status("py.durable").get("waiters") == i + 1, 10)
        self.cluster.leader().kill()
        first = granted.get(timeout=40)
        self.assertNotIsInstance(first, Exception, first)
        self.assertEqual(first.holder, "d1")  # type: ignore[union-attr]
        first.release()  # type: ignore[union-attr]
        second = granted.get(timeout=40)
        self.assertNotIsInstance(second, Exception, second)
        self.assertEqual(second.holder, "d2")  # type: ignore[union-attr]
        self.assertGreater(first.token, holder.token)  # type: ignore[union-attr]
        self.assertGreater(second.token, first.token)  # type: ignore[union-attr]
        self.assertGreater(second.wait_index, first.wait_index)  # type: ignore[union-attr]
        self.assertGreater(first.wait_index, holder.token)  # type: ignore[union-attr]
        second.release()  # type: ignore[union-attr]


if __name__ == "__main__":
    unittest.main()
