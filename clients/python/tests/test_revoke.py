"""Revoke in the Python client against real fencer nodes (bin/fencer): an
operator's revoke hands a lock to its waiter, the holder's keep-alive lease
ends at its next renewal with Revoked (a LeaseLost), well before its
deadline, and its lock-bound write is refused; a session's revoke ends the
session and the lease under it alike; a permit's frees its slot."""

from __future__ import annotations

import threading
import time
import unittest

from fencer import Client, LeaseLost, NotLockHolder
from fencer.errors import Revoked

from .cluster import Cluster, poll

#: The log format whose entries hold revokes (fsm, issue 28).
REVOKE_LOG_FORMAT = 9


class RevokeClusterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)
        c = Client(cls.cluster.endpoints())
        poll("every member reads log format %d" % REVOKE_LOG_FORMAT,
             lambda: c.cluster().get("log_format", 0) >= REVOKE_LOG_FORMAT, 20)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    def client(self, **kw) -> Client:
        return Client(self.cluster.endpoints(), **kw)

    def test_revoke_a_lock(self) -> None:
        holder, ops, waiter = self.client(holder="py-victim"), self.client(), self.client(holder="py-next")
        ttl = 6.0
        lease = holder.acquire("py.rv.a", ttl=ttl)
        holder.put("py.rv.out", b"before", lease.token, lock="py.rv.a")
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("next", waiter.acquire("py.rv.a", ttl=ttl, wait=20, keep_alive=False)))
        t.start()
        poll("the waiter queued", lambda: ops.status("py.rv.a").get("waiters") == 1)
        revoked_at = time.monotonic()
        answer = ops.revoke("py.rv.a", lease.token)
        t.join(10)
        nxt = got["next"]
        self.assertEqual((answer["holder"], answer["next_token"]), ("py-victim", nxt.token))
        self.assertGreater(nxt.token, lease.token)
        self.assertTrue(lease.lost.wait(ttl), "the revoked lease still held after its TTL")
        self.assertLess(time.monotonic() - revoked_at, ttl / 2, "the lease ended at its deadline, not at its next renewal")
        with self.assertRaises(Revoked):
            lease.check()
        with self.assertRaises(NotLockHolder):
            holder.put("py.rv.out", b"late", lease.token, lock="py.rv.a")
        with self.assertRaises(Revoked):
            ops.revoke("py.rv.a", lease.token)
        self.assertEqual(ops.token(lease.token)["ended"], "revoked")
        nxt.release()

    def test_revoke_a_session(self) -> None:
        c, ops = self.client(holder="py-svc"), self.client()
        s = c.session(ttl=4)
        a = s.lock("py.rv.s")
        ended = ops.revoke_session(s.id)
        self.assertEqual([(g["kind"], g["name"], g["token"]) for g in ended], [("lock", "py.rv.s", a.token)])
        self.assertTrue(s.done.wait(4) and a.lost.wait(1), "the revoked session still held")
        with self.assertRaises(Revoked):
            s.check()
        with self.assertRaises(LeaseLost):
            a.check()

    def test_revoke_a_permit(self) -> None:
        c, ops = self.client(holder="py-w"), self.client()
        p = c.acquire_permit("py.rv.pool", 1, ttl=5, keep_alive=False)
        self.assertEqual(ops.revoke_permit("py.rv.pool", p.token)["semaphore"], "py.rv.pool")
        with self.assertRaises(Revoked):
            p.renew()
        self.assertEqual(ops.semaphore_status("py.rv.pool")["holders"], [])


if __name__ == "__main__":
    unittest.main()
