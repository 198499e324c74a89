#!/usr/bin/env python3
"""Take a fencer lock and write a row to PostgreSQL, fenced.

The row is written in the same transaction as a check-and-advance of the
scope's mark in ``fencer_high_water``: the table and rule of Go's
``fence/pgfence`` (``Migration`` and ``Advance`` with sequence 0), so Go and
Python writers can share one fenced table. A token is admitted only if it is
greater than the scope's mark; a writer paused past its lease, whose token a
newer holder has already written with, is refused and its transaction rolled
back, whatever it believes about its lease.

    python3 fenced_writer.py --endpoints 127.0.0.1:7001,127.0.0.1:7002 \\
        --dsn postgres://user:pass@127.0.0.1:5432/db --lock nightly-report \\
        --scope reports/nightly --value "done"

Needs Debian's python3-psycopg2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Optional

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fencer import Client, Lease  # noqa: E402

# The same statements as fence/pgfence (pgfence.Migration, advanceSQL).
MIGRATION = """CREATE TABLE IF NOT EXISTS fencer_high_water (
	scope text   PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	seq   bigint NOT NULL DEFAULT 0 CHECK (seq >= 0)
)"""
ADVANCE = """INSERT INTO fencer_high_water AS hw (scope, token, seq) VALUES (%s, %s, %s)
ON CONFLICT (scope) DO UPDATE SET token = EXCLUDED.token, seq = EXCLUDED.seq
WHERE (hw.token, hw.seq) < (EXCLUDED.token, EXCLUDED.seq)
RETURNING token"""
HIGH_WATER = "SELECT token, seq FROM fencer_high_water WHERE scope = %s"

ROWS = """CREATE TABLE IF NOT EXISTS fenced_writes (
	id          bigserial PRIMARY KEY,
	scope       text   NOT NULL,
	value       text   NOT NULL,
	fence_token bigint NOT NULL,
	written_at  timestamptz NOT NULL DEFAULT now()
)"""


class Stale(Exception):
    """The token is not above the scope's mark: a newer holder has written."""

    def __init__(self, scope: str, token: int, high_water: int) -> None:
        super().__init__("scope %r: token %d is not above the mark %d" % (scope, token, high_water))
        self.high_water = high_water


def migrate(conn: Any) -> None:
    with conn, conn.cursor() as cur:
        cur.execute(MIGRATION)
        cur.execute(ROWS)


def fenced(conn: Any, scope: str, token: int, write: Callable[[Any], None],
           before_commit: Optional[Callable[[], None]] = None) -> None:
    """Run ``write(cursor)`` in one transaction with the advance of
    ``scope``'s mark to ``token`` (pgfence.Exec): both commit, or neither."""
    if token <= 0 or token > 2**63 - 1:
        raise ValueError("token %d out of range" % token)
    with conn:  # commits on success, rolls back on any exception
        with conn.cursor() as cur:
            cur.execute(ADVANCE, (scope, token, 0))
            if cur.fetchone() is None:
                cur.execute(HIGH_WATER, (scope,))
                row = cur.fetchone()
                raise Stale(scope, token, row[0] if row else 0)
            write(cur)
            if before_commit is not None:
                before_commit()


def write_row(conn: Any, lease: Lease, scope: str, value: str) -> None:
    """Write one row under the lease: checked against the lease's local
    deadline just before the commit, fenced by its token in the database."""
    fenced(conn, scope, lease.token,
           lambda cur: cur.execute("INSERT INTO fenced_writes (scope, value, fence_token) VALUES (%s, %s, %s)",
                                   (scope, value, lease.token)),
           before_commit=lease.check)


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoints", default=os.environ.get("FENCER_ENDPOINTS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"))
    p.add_argument("--token", default=os.environ.get("FENCER_TOKEN"), help="bearer token")
    p.add_argument("--ca", default=os.environ.get("FENCER_CA"), help="CA file for https")
    p.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), required=os.environ.get("DATABASE_URL") is None)
    p.add_argument("--lock", default="fenced-writer")
    p.add_argument("--scope", default="fenced-writer")
    p.add_argument("--value", default="hello")
    p.add_argument("--ttl", type=float, default=10)
    p.add_argument("--wait", type=float, default=5)
    a = p.parse_args(argv)
    client = Client(a.endpoints, token=a.token, ca_file=a.ca)
    conn = psycopg2.connect(a.dsn)
    try:
        migrate(conn)
        with client.lock(a.lock, ttl=a.ttl, wait=a.wait) as lease:
            write_row(conn, lease, a.scope, a.value)
            print("wrote %r to %s with token %d" % (a.value, a.scope, lease.token))
    except Stale as e:
        print("refused: %s" % e, file=sys.stderr)
        return 2
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
