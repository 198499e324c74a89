"""fencer.redis_fence against the private redis-server that make test starts
(scripts/with-redis.sh: FENCER_TEST_REDIS_ADDR, FENCER_TEST_REDIS_RESTART).
Skipped without it, unless FENCER_REQUIRE_REDIS=1 (make test), when its
absence (or python3-redis's) fails."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import unittest

from fencer import InvalidRequest, MissingToken, StaleToken
from fencer.redis_fence import Cmd, CorruptMark, RedisCommandFailed, RedisFence, mark_key

ADDR = os.environ.get("FENCER_TEST_REDIS_ADDR", "")
RESTART = os.environ.get("FENCER_TEST_REDIS_RESTART", "")
REQUIRE = os.environ.get("FENCER_REQUIRE_REDIS") == "1"

try:
    import redis
except ImportError:  # pragma: no cover
    redis = None


def connect() -> "redis.Redis":
    host, _, port = ADDR.rpartition(":")
    return redis.Redis(host=host, port=int(port), decode_responses=True)


class RedisFenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        missing = "FENCER_TEST_REDIS_ADDR unset" if not ADDR else ("python3-redis missing" if redis is None else "")
        if missing:
            if REQUIRE:
                raise AssertionError(missing + " with FENCER_REQUIRE_REDIS=1")
            raise unittest.SkipTest(missing)
        cls.r = connect()
        cls.r.ping()
        cls.fence = RedisFence(cls.r)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.r.close()

    def scope(self) -> str:
        # One server serves every test of the run: keep them apart.
        return "py/%s/%d" % (self.id(), time.time_ns())

    def test_late_older_writer_loses(self) -> None:
        key = self.scope()
        self.fence.set(key, 6, key, "six")
        with self.assertRaises(StaleToken) as cm:
            self.fence.set(key, 5, key, "five")
        self.assertEqual((cm.exception.code, cm.exception.last_token), ("stale_token", 6))
        with self.assertRaises(StaleToken):
            self.fence.set(key, 6, key, "six again")  # a replay
        self.assertEqual(self.r.get(key), "six")
        self.assertEqual(self.fence.high_water(key), (6, 0))

    def test_sequence(self) -> None:
        key = self.scope()
        steps = [(5, 1, True), (5, 2, True), (5, 2, False), (5, 1, False), (5, 0, False),
                 (4, 9, False), (6, 0, True), (6, 0, False), (6, 1, True)]
        for token, seq, ok in steps:
            try:
                self.fence.set(key, token, key, "%d/%d" % (token, seq), seq=seq)
                self.assertTrue(ok, "%d/%d admitted" % (token, seq))
            except StaleToken:
                self.assertFalse(ok, "%d/%d refused" % (token, seq))
        self.assertEqual((self.fence.high_water(key), self.r.get(key)), ((6, 1), "6/1"))

    def test_tokens_above_two_to_the_53(self) -> None:
        key = self.scope()
        big = 2**53
        self.fence.set(key, big, key, "a")
        self.fence.set(key, big + 1, key, "b")  # equal to big as a double
        with self.assertRaises(StaleToken):
            self.fence.set(key, big, key, "c")
        self.fence.set(key, 2**64 - 1, key, "max")
        self.assertEqual(self.fence.high_water(key), (2**64 - 1, 0))

    def test_refuses_missing_and_malformed(self) -> None:
        key = self.scope()
        for bad in (0, -1, 2**64, True, None, "7", 7.0):
            with self.assertRaises(MissingToken, msg=repr(bad)):
                self.fence.set(key, bad, key, "x")  # type: ignore[arg-type]
        with self.assertRaises(InvalidRequest) as cm:
            self.fence.set(key, 1, key, "x", seq=-1)
        self.assertEqual(cm.exception.code, "malformed_sequence")
        with self.assertRaises(InvalidRequest):
            self.fence.execute(key, 1, Cmd("SET", [mark_key(key)], ["1"]))
        with self.assertRaises(InvalidRequest):
            self.fence.execute(key, 1, Cmd("SET", [], ["1"]))
        self.assertEqual(self.r.exists(key, mark_key(key)), 0)

    def test_helpers_and_failed_command(self) -> None:
        scope = self.scope()
        user, kept, string = scope + ":user", scope + ":kept", scope + ":string"
        self.assertEqual(self.fence.hset(scope, 1, user, {"name": "ada"}), 1)
        self.r.set(kept, "before", ex=3600)
        self.r.set(string, "a string")
        with self.assertRaises(RedisCommandFailed) as cm:
            self.fence.execute(scope, 2, Cmd.set(kept, "after"), Cmd.hset(string, {"f": "v"}))
        self.assertEqual((cm.exception.index, cm.exception.name), (1, "HSET"))
        self.assertEqual(self.r.get(kept), "before")
        self.assertGreater(self.r.ttl(kept), 3500)
        self.assertEqual(self.fence.high_water(scope), (1, 0))
        self.assertEqual(self.fence.delete(scope, 2, user, scope + ":absent"), 1)
        self.assertEqual(self.fence.execute(scope, 3, Cmd("INCRBY", [scope + ":n"], [5])), [5])

    def test_corrupt_mark(self) -> None:
        scope = self.scope()
        self.r.hset(mark_key(scope), mapping={"token": "07", "seq": "0"})
        with self.assertRaises(CorruptMark):
            self.fence.set(scope, 9, scope, "nine")
        with self.assertRaises(CorruptMark):
            self.fence.high_water(scope)

    def test_racing_writers_greatest_wins(self) -> None:
        # Writer w sends w+1, w+1+W, ... each twice (a replay); every
        # admitted write appends its token to a log in the same script, so
        # the log is the order of admission and must strictly increase.
        scope = self.scope()
        log = scope + ":log"
        writers, each = 8, 20
        admitted, errors, lock = [0], [], threading.Lock()

        def writer(w: int) -> None:
            r = connect()
            fence = RedisFence(r)
            try:
                for k in range(each):
                    token = k * writers + w + 1
                    for _ in range(2):
                        try:
                            fence.execute(scope, token, Cmd.set(scope, str(token)), Cmd("RPUSH", [log], [token]))
                            with lock:
                                admitted[0] += 1
                        except StaleToken:
                            pass
            except Exception as e:  # pragma: no cover
                errors.append(e)
            finally:
                r.close()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        got = [int(x) for x in self.r.lrange(log, 0, -1)]
        self.assertEqual(len(got), admitted[0])
        self.assertTrue(all(a < b for a, b in zip(got, got[1:])), "admission order %s" % got)
        self.assertEqual((self.r.get(scope), self.fence.high_water(scope)), (str(writers * each), (writers * each, 0)))

    def test_mark_survives_server_crash(self) -> None:
        if not RESTART:
            if REQUIRE:
                self.fail("FENCER_TEST_REDIS_RESTART unset with FENCER_REQUIRE_REDIS=1")
            self.skipTest("FENCER_TEST_REDIS_RESTART unset")
        scope = self.scope()
        self.fence.set(scope, 34, scope, "thirty-four", seq=2)
        subprocess.run(["sh", "-c", RESTART], check=True, capture_output=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.assertEqual(self.fence.high_water(scope), (34, 2))
        for token, seq in ((33, 0), (34, 2)):
            with self.assertRaises(StaleToken):
                self.fence.set(scope, token, scope, "late", seq=seq)
        self.assertEqual(self.r.get(scope), "thirty-four")


if __name__ == "__main__":
    unittest.main()
