"""fencer.aio against real fencer nodes (bin/fencer): locks, loss by
revoke, by a blocked event loop and by a stopped process, the cancellation
of the code running under a lost lease, sessions, permits, multi-locks,
elections, the fenced store and the errors of each."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import unittest
from typing import Any, List

from fencer import (Client as SyncClient, InvalidRequest, LeaseExpired, LeaseLost, LimitMismatch, LockHeld,
                    MultiGrant, NotLockHolder, Revoked, SemaphoreFull, StaleToken, Unavailable, UnknownSession,
                    UnknownToken)
from fencer.aio import Client

from .cluster import Cluster

HERE = os.path.dirname(os.path.abspath(__file__))


class AioClusterTest(unittest.IsolatedAsyncioTestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = Cluster(3)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()

    async def client(self, **kw: Any) -> Client:
        c = Client(self.cluster.endpoints(), **kw)
        self.addAsyncCleanup(c.close)
        return c

    async def test_lock_renew_release(self) -> None:
        c = await self.client(holder="aio-1")
        async with c.lock("aio.basic", ttl=0.6) as lease:
            self.assertGreater(lease.token, 0)
            before = lease.deadline
            await asyncio.sleep(1.5)  # more than two TTLs: kept alive
            lease.check()
            self.assertGreater(lease.deadline, before)
            st = await c.status("aio.basic")
            self.assertEqual((st["held"], st["holder"], st["token"]), (True, "aio-1", lease.token))
            self.assertTrue(await c.check("aio.basic", lease.token))
            self.assertEqual(await lease.put("aio.basic.k", b"v1"), lease.token)
            self.assertEqual(await c.get("aio.basic.k"), (b"v1", lease.token))
        self.assertFalse((await c.status("aio.basic"))["held"])
        self.assertTrue(lease.lost.is_set())
        hist = await c.history("aio.basic")
        self.assertEqual((hist[0]["token"], hist[0]["ended"]), (lease.token, "released"))
        self.assertEqual((await c.token(lease.token))["lock"], "aio.basic")
        with self.assertRaises(UnknownToken):
            await c.token(lease.token + 10 ** 9)

    async def test_held_and_waiting(self) -> None:
        a, b = await self.client(holder="aio-a"), await self.client(holder="aio-b")
        first = await a.acquire("aio.wait", ttl=5)
        with self.assertRaises(LockHeld) as held:
            await b.acquire("aio.wait", ttl=5)
        self.assertEqual((held.exception.holder, held.exception.token), ("aio-a", first.token))
        waiting = asyncio.ensure_future(b.acquire("aio.wait", ttl=5, wait=10))
        await asyncio.sleep(0.3)
        self.assertFalse(waiting.done())
        await first.release()
        second = await asyncio.wait_for(waiting, 10)
        self.assertGreater(second.token, first.token)
        # Each lease carries its own token: two tasks holding two leases at
        # once never see each other's (no task- or thread-local token).
        other = await a.acquire("aio.wait.other", ttl=5)
        self.assertNotEqual(other.token, second.token)
        self.assertEqual(second.headers()["Fencing-Token"], str(second.token))
        self.assertEqual(other.headers()["Fencing-Token"], str(other.token))
        await asyncio.gather(second.release(), other.release())

    async def test_revoke_cancels_the_block(self) -> None:
        c = await self.client()
        reached: List[str] = []
        with self.assertRaises(Revoked):
            async with c.lock("aio.revoked", ttl=3) as lease:
                await c.revoke("aio.revoked", lease.token)
                await asyncio.sleep(10)
                reached.append("after the sleep")
        self.assertEqual(reached, [], "the block ran on after its lease was revoked")
        self.assertTrue(lease.lost.is_set())

    async def test_run_locked_cancels_on_loss(self) -> None:
        c = await self.client()
        admin = SyncClient(self.cluster.endpoints())
        cancelled = asyncio.Event()

        async def work(lease: Any) -> str:
            try:
                admin.release("aio.run", lease.token, lease.secret)  # behind the lease's back
                await asyncio.sleep(10)
                return "finished"
            except asyncio.CancelledError:
                cancelled.set()
                raise

        start = time.monotonic()
        with self.assertRaises(LeaseLost):
            await c.run_locked("aio.run", work, ttl=1.5)
        self.assertTrue(cancelled.is_set())
        self.assertLess(time.monotonic() - start, 1.5, "the loss was noticed only after a TTL")
        self.assertEqual(await c.run_locked("aio.run", lambda lease: asyncio.sleep(0, "done"), ttl=1), "done")

    async def test_blocked_loop_sees_loss_and_is_fenced(self) -> None:
        c = await self.client(holder="aio-blocked")
        lease = await c.acquire("aio.blocked", ttl=1)
        await lease.put("aio.blocked.k", b"first")
        time.sleep(1.6)  # the event loop blocked past the TTL: no renewal ran
        self.assertFalse(lease.valid, "a lease past its deadline is valid on the first look")
        with self.assertRaises(LeaseExpired):
            lease.check()
        self.assertTrue(lease.lost.is_set())
        newer = SyncClient(self.cluster.endpoints()).acquire("aio.blocked", ttl=5, wait=5)
        self.addCleanup(newer.release)
        newer.put("aio.blocked.k", b"newer")
        with self.assertRaises(StaleToken):
            await c.put("aio.blocked.k", b"late", lease.token)
        self.assertEqual((await c.get("aio.blocked.k"))[0], b"newer")

    def test_stopped_holder_is_fenced(self) -> None:
        # A child process holding the lock with fencer.aio is stopped past
        # its TTL; another takes the lock and writes; continued, the child's
        # first look says lost and its late write is refused stale_token.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("FENCER_PY_SITE", ""), os.path.dirname(HERE)) if p)
        child = subprocess.Popen([sys.executable, "-m", "tests.aio_holder", ",".join(self.cluster.endpoints()),
                                  "aio.stopped", "1"], cwd=os.path.dirname(HERE), env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        for pipe in (child.stdin, child.stdout):
            self.addCleanup(pipe.close)  # type: ignore[union-attr]

        def ask(line: str) -> dict:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write(line + "\n")
            child.stdin.flush()
            return json.loads(child.stdout.readline())

        token = json.loads(child.stdout.readline())["token"]  # type: ignore[union-attr]
        self.assertEqual(ask("state"), {"valid": True, "lost_set": False})
        child.send_signal(signal.SIGSTOP)
        sync = SyncClient(self.cluster.endpoints(), holder="aio-newer")
        newer = sync.acquire("aio.stopped", ttl=5, wait=10)
        self.addCleanup(newer.release)
        self.assertGreater(newer.token, token)
        newer.put("aio.stopped.k", b"newer")
        child.send_signal(signal.SIGCONT)
        self.assertEqual(ask("state"), {"valid": False, "lost_set": True})
        self.assertEqual(ask("put aio.stopped.k"), {"error": "stale_token", "class": "StaleToken"})
        self.assertEqual(sync.get("aio.stopped.k")[0], b"newer")
        child.stdin.write("exit\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        self.assertEqual(child.wait(10), 0)

    async def test_closed_client_sends_nothing(self) -> None:
        # A lease left held when its client closes is not renewed through a
        # session reopened behind the caller's back: it ends at its deadline.
        c = Client(self.cluster.endpoints())
        lease = await c.acquire("aio.closed", ttl=1)
        await c.close()
        await asyncio.wait_for(lease.lost.wait(), 2)
        self.assertIsInstance(lease.cause, LeaseExpired)
        with self.assertRaises(Unavailable):
            await c.status("aio.closed")
        self.assertIsNone(c._tr._http)

    async def test_late_grant_is_confirmed(self) -> None:
        a, b = await self.client(holder="aio-late-a"), await self.client(holder="aio-late-b")
        first = await a.acquire("aio.late", ttl=5)
        waiting = asyncio.ensure_future(b.acquire("aio.late", ttl=1.5, wait=10))
        await asyncio.sleep(1.5)  # more than TTL/3 of the waiter's lease
        released = time.monotonic()
        await first.release()
        late = await asyncio.wait_for(waiting, 10)
        # Measured from the confirming renewal, sent after the grant came,
        # not from the acquire's send time, 1.5 s before.
        self.assertGreater(late.deadline, released + late.ttl - late.margin - 0.2)
        late.check()
        await late.release()

    async def test_session_ends_every_grant(self) -> None:
        c = await self.client(holder="aio-session")
        async with c.session(ttl=2) as s:
            lock = await s.lock("aio.s.lock")
            permit = await s.acquire_permit("aio.s.sem", 2)
            leader = await s.campaign("aio.s.election", "me")
            shared = [await s.lock("aio.s.shared", mode="shared"), await s.lock("aio.s.shared", mode="shared")]
            self.assertEqual(len(s.grants), 5)
            self.assertEqual((await c.election_leader("aio.s.election"))["value"], "me")
            await lock.release()  # the others stay
            self.assertFalse(permit.lost.is_set())
            self.assertEqual([g["name"] for g in (await s.status())["grants"]].count("aio.s.shared"), 2)
        for g in [lock, permit, leader] + shared:
            self.assertTrue(g.lost.is_set())
        self.assertTrue(s.done.is_set())
        with self.assertRaises(UnknownSession):
            await c.get_session(s.id + 10 ** 9)

        # A session revoked by an operator: every grant under it is lost,
        # and the block under the session is cancelled with Revoked.
        with self.assertRaises(LeaseLost):
            async with c.session(ttl=2) as s2:
                g = await s2.lock("aio.s.revoked")
                await c.revoke_session(s2.id)
                await asyncio.sleep(10)
        self.assertTrue(g.lost.is_set())

    async def test_permits_multi_locks_elections(self) -> None:
        c = await self.client(holder="aio-prims")
        p1 = await c.acquire_permit("aio.sem", 2, ttl=3)
        p2 = await c.acquire_permit("aio.sem", 2, ttl=3)
        with self.assertRaises(SemaphoreFull):
            await c.acquire_permit("aio.sem", 2, ttl=3)
        with self.assertRaises(LimitMismatch):
            await c.acquire_permit("aio.sem", 3, ttl=3)
        await p1.release()
        await p2.release()

        async with c.multi_lock(["aio.m.a", "aio.m.b"], ttl=3) as m:
            self.assertEqual((await c.status("aio.m.b"))["token"], m.token)
            self.assertEqual(await m.put("aio.m.k", b"x", lock="aio.m.b"), m.token)
            with self.assertRaises(MultiGrant):
                await c.release("aio.m.a", m.token, m.secret)
        with self.assertRaises(InvalidRequest):
            await c.acquire_multi(["aio.m.a", "aio.m.a"])

        observed: List[dict] = []

        async def observe() -> None:
            async for leader in c.observe("aio.election"):
                observed.append(leader)
                if len(observed) == 3:
                    return

        watching = asyncio.ensure_future(observe())
        first = await c.campaign("aio.election", "one", ttl=3)
        await first.proclaim("two")
        await first.resign()
        second = await c.campaign("aio.election", "three", ttl=3)
        await asyncio.wait_for(watching, 10)
        self.assertEqual([o["value"] for o in observed], ["one", "two", "three"])
        self.assertGreater(observed[2]["token"], observed[0]["token"])
        await second.resign()

    async def test_fenced_write_errors(self) -> None:
        c = await self.client()
        async with c.lock("aio.fence", ttl=3) as lease:
            await lease.put("aio.fence.k", b"1")
            with self.assertRaises(StaleToken):
                await c.put("aio.fence.k", b"old", lease.token - 1)
            with self.assertRaises(NotLockHolder):
                await c.put("aio.fence.other", b"x", lease.token - 1, lock="aio.fence")

    async def test_watch_from_an_index(self) -> None:
        c = await self.client(holder="aio-watch")
        lease = await c.acquire("aio.w.lock", ttl=3)
        await lease.put("aio.w.key", b"v")
        await lease.release()
        since = lease.token - 1
        got: List[dict] = []
        async with c.watch(prefix="aio.w.", since=since) as w:
            async for ev in w:
                got.append(ev)
                if len(got) == 3:
                    break
        self.assertEqual([(e["type"], e.get("lock") or e.get("key")) for e in got],
                         [("acquired", "aio.w.lock"), ("put", "aio.w.key"), ("released", "aio.w.lock")])
        self.assertEqual(got[0]["token"], lease.token)


class AioPackageTest(unittest.TestCase):
    def test_sync_client_needs_no_aiohttp(self) -> None:
        # The synchronous client imports, and runs, with aiohttp unimportable.
        code = ("import sys; sys.modules['aiohttp'] = None\n"
                "import fencer, fencer.client, fencer.session, fencer.multilock, fencer.sse, fencer.calls\n"
                "assert 'fencer.aio' not in sys.modules\n"
                "try:\n    import fencer.aio\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('fencer.aio imported without aiohttp')\n")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("FENCER_PY_SITE", ""), os.path.dirname(HERE)) if p)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_extra_declared(self) -> None:
        with open(os.path.join(os.path.dirname(HERE), "pyproject.toml")) as f:
            text = f.read()
        self.assertIn('aio = ["aiohttp>=3.8"]', text)
        self.assertIn('"fencer.aio"', text)


if __name__ == "__main__":
    unittest.main()
