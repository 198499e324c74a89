"""The Python client against real fencer nodes (bin/fencer, built by make)."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import threading
import time
import unittest
import urllib.request

from fencer import (CODE_ERRORS, Client, LeaseExpired, LeaseLost, LockHeld,
                    NotLockHolder, StaleToken, Forbidden, Unauthorized)
from fencer.errors import InvalidRequest, LimitMismatch, LockDelay, MissingToken, SemaphoreFull, UnknownToken

from .cluster import BIN, REPO, Cluster, poll


def openapi_codes() -> list:
    """The ErrorCode enum of api/openapi.yaml (which a Go test holds equal to
    api/wire's codes), read without a YAML parser."""
    with open(os.path.join(REPO, "api", "openapi.yaml")) as f:
        text = f.read()
    block = text[text.index("    ErrorCode:"):]
    block = block[block.index("enum:") + len("enum:"):]
    codes = []
    for line in block.splitlines()[1:]:
        m = re.match(r"^\s+- ([a-z_]+)\s*$", line)
        if not m:
            break
        codes.append(m.group(1))
    return codes


class ErrorCodesTest(unittest.TestCase):
    def test_one_exception_per_code(self) -> None:
        codes = openapi_codes()
        self.assertGreater(len(codes), 30)
        self.assertEqual(sorted(CODE_ERRORS), sorted(codes),
                         "fencer.errors.CODE_ERRORS and api/openapi.yaml's ErrorCode enum differ: "
                         "give each new code an exception in clients/python/fencer/errors.py")


class ClusterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    def client(self, **kw) -> Client:
        return Client(self.cluster.endpoints(), **kw)

    def test_acquire_renew_release(self) -> None:
        c = self.client(holder="py-1")
        with c.lock("py.basic", ttl=5) as lease:
            self.assertGreater(lease.token, 0)
            lease.check()
            before = lease.deadline
            lease.renew()
            self.assertGreater(lease.deadline, before)
            st = c.status("py.basic")
            self.assertEqual((st["held"], st["holder"], st["token"]), (True, "py-1", lease.token))
            self.assertTrue(c.check("py.basic", lease.token))
        self.assertFalse(c.status("py.basic")["held"])
        self.assertTrue(lease.lost.is_set())

    def test_keep_alive_outlives_ttl(self) -> None:
        c = self.client()
        with c.lock("py.keepalive", ttl=0.6) as lease:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                lease.check()
                time.sleep(0.05)
            self.assertEqual(c.status("py.keepalive")["token"], lease.token)

    def test_held_then_wait(self) -> None:
        c = self.client()
        first = c.acquire("py.wait", ttl=5, holder="first")
        with self.assertRaises(LockHeld) as held:
            c.acquire("py.wait", ttl=5, holder="second")
        self.assertEqual((held.exception.holder, held.exception.token), ("first", first.token))
        threading.Timer(0.5, first.release).start()
        with c.lock("py.wait", ttl=5, wait=10, holder="second") as second:
            self.assertGreater(second.token, first.token)
            second.check()

    def test_late_grant_confirmed_by_a_renewal(self) -> None:
        """A grant that arrives more than TTL/3 after its request was sent is
        measured from a renewal sent after it arrived, not from the acquire's
        send time (which would leave almost nothing of a 1s lease)."""
        c = self.client()
        first = c.acquire("py.late", ttl=5, holder="first")
        threading.Timer(0.8, first.release).start()
        with c.lock("py.late", ttl=1, wait=5, holder="second") as second:
            self.assertGreater(second.deadline - time.monotonic(), 0.5)

    def test_unconfirmable_grant_released(self) -> None:
        """A late grant whose confirming renewal fails is released, not
        handed out or left held by nobody."""
        c = self.client()
        first = c.acquire("py.unconfirmed", ttl=5, holder="first")
        real = c._roundtrip

        def no_renewals(ep, method, path, body, headers, timeout):
            if path.endswith("/renew"):
                raise ConnectionError("renewals blocked by the test")
            return real(ep, method, path, body, headers, timeout)
        c._roundtrip = no_renewals  # type: ignore[assignment]
        threading.Timer(0.8, first.release).start()
        with self.assertRaises(LeaseLost) as lost:
            c.acquire("py.unconfirmed", ttl=1, wait=5, holder="second")
        self.assertIn("could not be confirmed", str(lost.exception))
        self.assertFalse(self.client().status("py.unconfirmed")["held"])

    def test_fenced_kv(self) -> None:
        c = self.client()
        with c.lock("py.kv", ttl=5) as lease:
            lease.put("py.kv.report", b"v1")
            self.assertEqual(c.get("py.kv.report"), (b"v1", lease.token))
            req = lease.fence(urllib.request.Request("http://127.0.0.1/"))
            self.assertEqual(req.get_header("Fencing-token"), str(lease.token))
            self.assertEqual(lease.headers({"X": "1"}), {"X": "1", "Fencing-Token": str(lease.token), "Fencing-Lock": "py.kv"})
            with self.assertRaises(StaleToken) as stale:
                c.put("py.kv.report", b"old", lease.token - 1)
            self.assertEqual(stale.exception.last_token, lease.token)
            with self.assertRaises(NotLockHolder):
                c.put("py.kv.other", b"x", lease.token, lock="py.kv.free")
        with self.assertRaises(MissingToken):
            c.request("PUT", "/v1/kv/py.kv.report", raw=b"x")

    def test_lease_lost_when_renewals_blocked(self) -> None:
        """Renewals stop reaching the cluster: the client gives the lease up
        at its own deadline, while the server still holds it, and its fenced
        writes are refused once another holder has written."""
        c = self.client()
        lease = c.acquire("py.blocked", ttl=1.5)
        real = c._roundtrip

        def blocked(ep, method, path, body, headers, timeout):
            if path.endswith("/renew"):
                raise ConnectionError("renewals blocked by the test")
            return real(ep, method, path, body, headers, timeout)
        c._roundtrip = blocked  # type: ignore[assignment]
        self.assertTrue(lease.lost.wait(5), "the lease was never declared lost")
        observer = self.client()
        st = observer.status("py.blocked")
        self.assertTrue(st["held"] and st["token"] == lease.token and st["remaining_ms"] > 0,
                        "the client noticed only after the server's deadline: %s" % st)
        with self.assertRaises(LeaseExpired):
            lease.check()
        with self.assertRaises(LeaseLost):
            lease.put("py.blocked.out", b"late")
        with observer.lock("py.blocked", ttl=5, wait=5) as newer:
            newer.put("py.blocked.out", b"new")
            with self.assertRaises(StaleToken):
                c.put("py.blocked.out", b"late", lease.token)
            with self.assertRaises(NotLockHolder):
                c.put("py.blocked.out2", b"late", lease.token, lock="py.blocked")
        lease.release()

    def test_refused_renewal_ends_lease(self) -> None:
        c = self.client()
        lease = c.acquire("py.refused", ttl=5)
        c.release(lease.name, lease.token, lease.secret)  # behind the lease's back
        # The next renewal (about TTL/3) is refused: lost long before the
        # local deadline (TTL - margin = 4.5s).
        self.assertTrue(lease.lost.wait(3), "a refused renewal did not end the lease")
        self.assertNotIsInstance(lease._cause, LeaseExpired)
        with self.assertRaises(LeaseLost):
            lease.check()

    def test_semaphore(self) -> None:
        c = self.client()
        with c.semaphore("py.sem", limit=2, ttl=0.6) as a, c.semaphore("py.sem", limit=2, ttl=5) as b:
            self.assertNotEqual(a.token, b.token)
            with self.assertRaises(SemaphoreFull):
                c.acquire_permit("py.sem", 2, ttl=5)
            with self.assertRaises(LimitMismatch):
                c.acquire_permit("py.sem", 3, ttl=5)
            end = time.monotonic() + 1.5  # a's keep-alive outlives its TTL
            while time.monotonic() < end:
                a.check()
                time.sleep(0.05)
            self.assertEqual(sorted(h["token"] for h in c.semaphore_status("py.sem")["holders"]), sorted([a.token, b.token]))
        self.assertEqual(c.semaphore_status("py.sem")["holders"], [])

    def test_permit_lock_delay(self) -> None:
        # A permit that expires with a lock-delay keeps its slot: the next
        # acquire gets LockDelay, the status lists the delay.
        c = self.client()
        end = time.monotonic() + 10  # every member registers its log format (5)
        while c.request("GET", "/v1/cluster").json()["log_format"] < 5:
            self.assertLess(time.monotonic(), end, "the members never read log format 5")
            time.sleep(0.05)
        c.acquire_permit("py.delayed", 1, ttl=0.2, keep_alive=False, lock_delay=3)
        end = time.monotonic() + 5
        while not c.semaphore_status("py.delayed").get("delays"):
            self.assertLess(time.monotonic(), end, "the permit did not expire into its lock-delay")
            time.sleep(0.05)
        with self.assertRaises(LockDelay):
            c.acquire_permit("py.delayed", 1, ttl=1)

    def wait_log_format(self, c: Client) -> None:
        end = time.monotonic() + 10  # every member registers its log format (5)
        while c.request("GET", "/v1/cluster").json()["log_format"] < 5:
            self.assertLess(time.monotonic(), end, "the members never read log format 5")
            time.sleep(0.05)

    def test_election(self) -> None:
        # Campaign with a value, proclaim, observe, resign: a second
        # candidate queued meanwhile leads next with a greater term.
        a, b = self.client(holder="py-a"), self.client(holder="py-b")
        self.wait_log_format(a)
        self.assertIsNone(a.election_leader("py.elect"))
        lead = a.campaign("py.elect", "10.0.0.7:8080", ttl=5)
        self.assertEqual(lead.value, "10.0.0.7:8080")
        self.assertEqual(a.election_leader("py.elect"), {"holder": "py-a", "token": lead.token, "value": "10.0.0.7:8080"})
        self.assertEqual([l["value"] for l in a.locks() if l["lock"] == "py.elect"], ["10.0.0.7:8080"])

        seen: list = []
        done = threading.Event()

        def watch() -> None:
            for l in b.observe("py.elect", timeout=15):
                seen.append(l)
                if l["holder"] == "py-b":
                    break
            done.set()
        threading.Thread(target=watch, daemon=True).start()
        poll("the observer sees the first leader", lambda: len(seen) >= 1, 10)

        lead.proclaim("10.0.0.7:9090")
        self.assertEqual(lead.value, "10.0.0.7:9090")
        self.assertEqual(a.election_leader("py.elect")["value"], "10.0.0.7:9090")

        got: list = []
        threading.Thread(target=lambda: got.append(b.campaign("py.elect", "10.0.0.8:8080", ttl=5, timeout=20)), daemon=True).start()
        poll("the second candidate queues", lambda: a.status("py.elect").get("waiters", 0) >= 1 or bool(got), 10)
        lead.resign()
        with self.assertRaises(LeaseLost):
            lead.proclaim("10.0.0.7:1")
        poll("the second candidate leads", lambda: bool(got), 20)
        second = got[0]
        self.assertGreater(second.token, lead.token)
        self.assertTrue(done.wait(15), "the observer did not see the second leader: %r" % seen)
        self.assertEqual(seen, [
            {"holder": "py-a", "token": lead.token, "value": "10.0.0.7:8080"},
            {"holder": "py-a", "token": lead.token, "value": "10.0.0.7:9090"},
            {"holder": "py-b", "token": second.token, "value": "10.0.0.8:8080"},
        ])
        with self.assertRaises(LockHeld):
            a.campaign("py.elect", "x", ttl=5, timeout=0.5)
        second.resign()

    def test_events(self) -> None:
        c = self.client()
        with c.events(prefix="py.events") as stream:
            with c.lock("py.events.a", ttl=5) as lease:
                pass
            seen = []
            for ev in stream:
                seen.append((ev["type"], ev.get("lock"), ev.get("token")))
                if ev["type"] == "released":
                    break
        self.assertEqual(seen, [("acquired", "py.events.a", lease.token), ("released", "py.events.a", lease.token)])

    def test_history_token_and_wait_lock(self) -> None:
        c = self.client()
        # The leader sets the cluster's history once every member reads it.
        deadline = time.monotonic() + 15
        while True:
            with c.lock("py.hist.probe", ttl=5) as probe:
                pass
            try:
                c.token(probe.token)
                break
            except UnknownToken:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with c.lock("py.hist", ttl=5) as first:
            pass
        status, index = c.wait_lock("py.hist", 0, wait=1)
        self.assertFalse(status["held"])
        self.assertGreater(index, first.token)
        second = c.acquire("py.hist", ttl=30, keep_alive=False)
        status, _ = c.wait_lock("py.hist", index, wait=10)
        self.assertTrue(status["held"])
        self.assertEqual(status["token"], second.token)
        hist = c.history("py.hist")
        self.assertEqual([(g["token"], g["ended"]) for g in hist], [(second.token, "held"), (first.token, "released")])
        self.assertEqual(len(c.history("py.hist", limit=1)), 1)
        got = c.token(first.token)
        self.assertEqual((got["lock"], got["ended"]), ("py.hist", "released"))
        with self.assertRaises(UnknownToken) as cm:
            c.token(second.token + 10**9)
        self.assertEqual(cm.exception.reason, "never_granted")
        with self.assertRaises(InvalidRequest):
            c.history("py.hist", limit=0)
        second.release()

    def test_readme_example_runs(self) -> None:
        """The README's Python block, as written, against this cluster."""
        with open(os.path.join(REPO, "README.md")) as f:
            blocks = re.findall(r"(?ms)^```python\n(.*?)^```$", f.read())
        self.assertEqual(len(blocks), 1)
        code = re.sub(r"Client\(\[[^]]*\]\)", "Client(%r)" % self.cluster.endpoints(), blocks[0])
        self.assertNotEqual(code, blocks[0])
        exec(compile(code, "README.md", "exec"), {})
        self.assertEqual(self.client().get("report")[0], b"done")

    def test_zz_idempotent_retry_across_killed_leader(self) -> None:
        """The acquire's answer is lost and its leader killed: the retry, on
        the new leader, gets the same grant back (existing), not a second
        token."""
        c = self.client()
        leader = self.cluster.leader()
        real = c._roundtrip
        seen = []

        def lose_answer(ep, method, path, body, headers, timeout):
            out = real(ep, method, path, body, headers, timeout)
            if path.endswith("/acquire") and not seen:
                seen.append(json.loads(out[2]))
                leader.kill()
                raise ConnectionError("answer lost and leader killed by the test")
            return out
        c._roundtrip = lose_answer  # type: ignore[assignment]
        c.attempts = 40
        try:
            lease = c.acquire("py.failover", ttl=10)
            self.assertTrue(seen and seen[0]["token"] == lease.token, "first answer %s, lease token %d" % (seen, lease.token))
            self.assertTrue(lease.existing)
            self.assertEqual(c.status("py.failover")["token"], lease.token)
            lease.release()
        finally:
            leader.start()
            poll("the killed node back", lambda: self.cluster.ready(leader), 30)


class SecurityTest(unittest.TestCase):
    """TLS with a client certificate and bearer tokens on one node."""

    def test_tls_and_acl(self) -> None:
        import shutil
        import tempfile
        # The CA's and the client's private keys: removed however the test ends.
        pki = tempfile.mkdtemp(prefix="fencer-py-pki-")
        self.addCleanup(shutil.rmtree, pki, True)
        subprocess.run([BIN, "tls", "init", pki, "--nodes", "n1"], check=True, capture_output=True)
        acl = os.path.join(pki, "acl.json")
        with open(acl, "w") as f:
            json.dump({"tokens": [
                {"name": "jobs", "secret": "py-client-secret-0123456789", "role": "client", "locks": ["jobs."], "keys": ["jobs."]},
            ]}, f)
        os.chmod(acl, 0o600)
        ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        ctx.load_cert_chain(os.path.join(pki, "client.pem"), os.path.join(pki, "client-key.pem"))
        cl = Cluster(1, extra=lambda id: ["--tls-cert", os.path.join(pki, id + ".pem"), "--tls-key", os.path.join(pki, id + "-key.pem"),
                                          "--tls-ca", os.path.join(pki, "ca.pem"), "--tls-client-auth", "--acl-file", acl],
                     scheme="https", ready_ctx=ctx)
        try:
            tls = dict(ca_file=os.path.join(pki, "ca.pem"), cert_file=os.path.join(pki, "client.pem"), key_file=os.path.join(pki, "client-key.pem"))
            c = Client(cl.endpoints(), token="py-client-secret-0123456789", **tls)
            with c.lock("jobs.secure", ttl=5) as lease:
                self.assertGreater(c.put("jobs.secure.out", b"x", lease.token, lock=lease.name), 0)
            with self.assertRaises(Forbidden):
                c.acquire("other.lock", ttl=5)
            with self.assertRaises(Unauthorized):
                Client(cl.endpoints(), token="wrong-secret-0123456789", **tls).acquire("jobs.secure")
            with self.assertRaises(Exception):  # no client certificate: the handshake fails
                Client(cl.endpoints(), token="py-client-secret-0123456789", ca_file=tls["ca_file"], attempts=1).acquire("jobs.secure")
        finally:
            cl.close()


if __name__ == "__main__":
    unittest.main()
