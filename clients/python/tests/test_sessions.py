"""Sessions in the Python client against real fencer nodes (bin/fencer):
one session holding three locks and a permit, a release that keeps the
rest, a close that ends them all, and a stalled session whose ``done`` is
set while the server still holds it, after which another client gets its
locks with higher tokens."""

from __future__ import annotations

import os
import re
import time
import unittest

from fencer import Client, LeaseExpired, LeaseLost, StaleToken
from fencer.errors import SessionExpired, SessionGrant, UnknownSession

from .cluster import REPO, Cluster, poll

#: The log format whose entries hold sessions (fsm, issue 27).
SESSIONS_LOG_FORMAT = 8


class SessionClusterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)
        c = Client(cls.cluster.endpoints())
        # Every member registers its log format before the leader takes a
        # session's entries.
        poll("every member reads log format %d" % SESSIONS_LOG_FORMAT,
             lambda: c.cluster().get("log_format", 0) >= SESSIONS_LOG_FORMAT, 20)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    def client(self, **kw) -> Client:
        return Client(self.cluster.endpoints(), **kw)

    def held_by(self, c: Client, name: str) -> int:
        st = c.status(name)
        return st["token"] if st.get("held") else 0

    def test_three_locks_and_a_permit(self) -> None:
        c, observer = self.client(holder="py-session"), self.client()
        with c.session(ttl=1) as s:
            a, b, d = s.lock("py.s.a"), s.lock("py.s.b"), s.lock("py.s.c")
            p = s.acquire_permit("py.s.sem", 2)
            grants = [a, b, d, p]
            self.assertEqual(len({g.token for g in grants}), 4)
            self.assertTrue(all(g.token > s.id for g in grants), "a grant's token is not above its session's id")
            self.assertEqual(s.grants, sorted(grants, key=lambda g: g.token))
            st = observer.get_session(s.id)
            self.assertEqual((st["holder"], st["ttl_ms"]), ("py-session", 1000))
            self.assertNotIn("lease", st, "a session's status shows its secret")
            self.assertGreater(st["remaining_ms"], 0)
            self.assertEqual([(g["kind"], g["name"], g["token"]) for g in st["grants"]],
                             [("lock", "py.s.a", a.token), ("lock", "py.s.b", b.token), ("lock", "py.s.c", d.token),
                              ("semaphore", "py.s.sem", p.token)])
            self.assertIn(s.id, [x["session"] for x in observer.sessions()])
            self.assertEqual(observer.status("py.s.a").get("session"), s.id)
            self.assertEqual([h.get("session") for h in observer.semaphore_status("py.s.sem")["holders"]], [s.id])

            # One keep-alive, the session's, keeps all four past their TTL;
            # the server refuses a renewal of a grant itself.
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                s.check()
                for g in grants:
                    g.check()
                time.sleep(0.05)
            self.assertEqual([self.held_by(observer, n) for n in ("py.s.a", "py.s.b", "py.s.c")], [a.token, b.token, d.token])
            with self.assertRaises(SessionGrant):
                c.renew(a.name, a.token, a.secret)

            # Releasing one grant keeps the session and its other grants.
            b.release()
            self.assertEqual(self.held_by(observer, "py.s.b"), 0)
            self.assertTrue(b.lost.is_set())
            self.assertEqual(s.grants, [a, d, p])
            self.assertEqual([self.held_by(observer, n) for n in ("py.s.a", "py.s.c")], [a.token, d.token],
                             "releasing one grant ended the others")
            self.assertEqual([g["token"] for g in observer.get_session(s.id)["grants"]], [a.token, d.token, p.token])
            s.renew()
            self.assertTrue(s.valid and a.valid and d.valid and p.valid, "releasing one grant ended the others")

            # Closing ends every grant left, in one entry.
            released = s.close()
        self.assertEqual(sorted((g["kind"], g["name"], g["token"]) for g in released),
                         sorted([("lock", "py.s.a", a.token), ("lock", "py.s.c", d.token), ("semaphore", "py.s.sem", p.token)]))
        self.assertTrue(s.done.is_set() and all(g.lost.is_set() for g in grants))
        self.assertEqual([self.held_by(observer, n) for n in ("py.s.a", "py.s.b", "py.s.c")], [0, 0, 0])
        self.assertEqual(observer.semaphore_status("py.s.sem")["holders"], [])
        with self.assertRaises((SessionExpired, UnknownSession)):
            observer.get_session(s.id)
        with self.assertRaises(LeaseLost):
            s.lock("py.s.d")

    def test_stalled_session(self) -> None:
        """Session renewals stop reaching the cluster: the client sets done,
        and loses every grant, while the server still holds the session;
        the server then ends them all in one entry, and another client
        takes the locks with higher tokens, after which the stalled
        holder's fenced writes are refused."""
        c, observer = self.client(holder="py-stalled"), self.client(holder="py-next")
        s = c.session(ttl=1.5)
        self.addCleanup(s.close)
        locks = [s.lock("py.st.%d" % i) for i in range(3)]
        permit = s.acquire_permit("py.st.sem", 1)
        real = c._roundtrip

        def stalled(ep, method, path, body, headers, timeout):
            if path.startswith("/v1/sessions/") and path.endswith("/renew"):
                raise ConnectionError("session renewals blocked by the test")
            return real(ep, method, path, body, headers, timeout)
        c._roundtrip = stalled  # type: ignore[assignment]
        self.assertTrue(s.done.wait(5), "the stalled session's done was never set")
        try:
            st = observer.get_session(s.id)
        except (SessionExpired, UnknownSession) as e:
            self.fail("done was set after the server had expired the session: %s" % e)
        self.assertGreater(st["remaining_ms"], 0, "the client noticed only at the server's deadline: %s" % st)
        self.assertEqual(len(st["grants"]), 4)
        self.assertTrue(all(g.lost.is_set() for g in locks + [permit]), "done was set with a grant still believed")
        with self.assertRaises(LeaseExpired):
            s.check()
        with self.assertRaises(LeaseExpired):
            locks[0].check()
        with self.assertRaises(LeaseLost):
            locks[0].put("py.st.out", b"late")

        # The server expires the session: every grant under it ends in one
        # entry, and the next holders get higher tokens.
        newer = [observer.acquire("py.st.%d" % i, ttl=5, wait=10) for i in range(3)]
        newer_permit = observer.acquire_permit("py.st.sem", 1, ttl=5, wait=10)
        for old, new in zip(locks + [permit], newer + [newer_permit]):
            self.assertGreater(new.token, old.token)
        with self.assertRaises((SessionExpired, UnknownSession)):
            observer.get_session(s.id)
        newer[0].put("py.st.out", b"new")
        with self.assertRaises(StaleToken):
            c.put("py.st.out", b"late", locks[0].token)
        for lease in newer + [newer_permit]:
            lease.release()

    def test_readme_session_block_runs(self) -> None:
        """clients/python/README.md's session block, as written."""
        with open(os.path.join(REPO, "clients", "python", "README.md")) as f:
            blocks = [b for b in re.findall(r"(?ms)^```python\n(.*?)^```$", f.read()) if "client.session(" in b]
        self.assertEqual(len(blocks), 1)
        c = self.client(holder="py-readme")
        exec(compile(blocks[0], "clients/python/README.md", "exec"), {"client": c})
        self.assertEqual(self.held_by(c, "partition-1"), 0, "the README's session was left open")


if __name__ == "__main__":
    unittest.main()
