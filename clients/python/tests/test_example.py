"""examples/fenced_writer.py against the loopback PostgreSQL that make test
starts (FENCER_TEST_PG_DSN) and a real cluster. Skipped without them, unless
FENCER_REQUIRE_PG=1 (make test), when their absence fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unittest

from fencer import Client, LeaseLost

from .cluster import Cluster

DSN = os.environ.get("FENCER_TEST_PG_DSN", "")
REQUIRE = os.environ.get("FENCER_REQUIRE_PG") == "1"
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")

try:
    import psycopg2
except ImportError:  # pragma: no cover
    psycopg2 = None


class FencedWriterTest(unittest.TestCase):
    cluster: Cluster

    @classmethod
    def setUpClass(cls) -> None:
        missing = "FENCER_TEST_PG_DSN unset" if not DSN else ("python3-psycopg2 missing" if psycopg2 is None else "")
        if missing:
            if REQUIRE:
                raise AssertionError(missing + " with FENCER_REQUIRE_PG=1")
            raise unittest.SkipTest(missing)
        sys.path.insert(0, EXAMPLES)
        import fenced_writer
        cls.fw = fenced_writer
        cls.cluster = Cluster(3)
        cls.conn = psycopg2.connect(DSN)
        fenced_writer.migrate(cls.conn)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.conn.close()
        cls.cluster.close()

    def rows(self, scope: str) -> list:
        with self.conn, self.conn.cursor() as cur:
            cur.execute("SELECT value, fence_token FROM fenced_writes WHERE scope = %s ORDER BY id", (scope,))
            return cur.fetchall()

    def mark(self, scope: str) -> int:
        with self.conn, self.conn.cursor() as cur:
            cur.execute("SELECT token FROM fencer_high_water WHERE scope = %s", (scope,))
            row = cur.fetchone()
            return row[0] if row else 0

    def test_runs_and_fences(self) -> None:
        scope = "py-example/%d-%d" % (os.getpid(), time.time_ns())
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "fenced_writer.py"),
                              "--endpoints", ",".join(self.cluster.endpoints()), "--dsn", DSN,
                              "--lock", "py.example", "--scope", scope, "--value", "first"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = self.rows(scope)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0][0], "first")
        self.assertEqual(self.mark(scope), rows[0][1])

        c = Client(self.cluster.endpoints())
        with c.lock("py.example", ttl=5) as newer:
            self.assertGreater(newer.token, rows[0][1])
            self.fw.write_row(self.conn, newer, scope, "second")
        # An older token (a writer paused past its lease) is refused and
        # writes nothing: the mark is the newer token.
        with self.assertRaises(self.fw.Stale) as stale:
            self.fw.fenced(self.conn, scope, rows[0][1],
                           lambda cur: cur.execute("INSERT INTO fenced_writes (scope, value, fence_token) VALUES (%s, 'late', %s)", (scope, rows[0][1])))
        self.assertEqual(stale.exception.high_water, newer.token)
        self.assertEqual([r[0] for r in self.rows(scope)], ["first", "second"])

    def test_lost_lease_rolls_back(self) -> None:
        scope = "py-example-lost/%d-%d" % (os.getpid(), time.time_ns())
        c = Client(self.cluster.endpoints())
        lease = c.acquire("py.example.lost", ttl=5)
        c.release(lease.name, lease.token, lease.secret)  # behind the lease's back
        self.assertTrue(lease.lost.wait(5))
        with self.assertRaises(LeaseLost):
            self.fw.write_row(self.conn, lease, scope, "lost")
        self.assertEqual(self.rows(scope), [])
        self.assertEqual(self.mark(scope), 0)


if __name__ == "__main__":
    unittest.main()
