"""fencer.sse, the event-stream reading both clients' watches share: an id
counts only once its event is complete, and a watch resumed after a cut in
the middle of an entry skips the events of it already delivered."""

from __future__ import annotations

import json
import unittest
from typing import List, Optional

from fencer import BadAnswer
from fencer.sse import EventLines, Lagged, Resume


def event(index: int, typ: str, id: Optional[int] = None, **fields: object) -> EventLines:
    ev = EventLines()
    lines = ["event: " + typ, "data: " + json.dumps(dict(fields, index=index, type=typ))]
    if id is not None:
        lines.append("id: %d" % id)
    for line in lines + [""]:
        done = ev.line(line)
    assert done
    return ev


class SSETest(unittest.TestCase):
    def test_fields(self) -> None:
        ev = EventLines()
        for line in [": keep-alive", "event: acquired", 'data: {"index":', "data: 7}", "id: 7", "retry: 250", "other: x"]:
            self.assertFalse(ev.line(line))
        self.assertTrue(ev.line(""))
        self.assertEqual((ev.type, ev.data, ev.id, ev.retry), ("acquired", ['{"index":', "7}"], "7", 0.25))
        bare = EventLines()
        for line in ["data: x", "retry: soon", "id: a\0b"]:
            bare.line(line)
        self.assertEqual((bare.id, bare.retry), (None, None))

    def test_resume_skips_what_a_cut_entry_delivered(self) -> None:
        # Entry 5 has three events; only the last carries the id. The
        # stream is cut after the second: the next connection resumes
        # after 4 and sends all three again; two are skipped.
        r = Resume(4)
        got: List[str] = []
        for ev in [event(5, "released", lock="a"), event(5, "acquired", lock="b")]:
            out = r.take(ev)
            assert out is not None
            got.append(out["lock"])
        self.assertEqual(r.last, 4, "an entry not delivered in full moved the resume point")
        r.reconnected()
        for ev in [event(5, "released", lock="a"), event(5, "acquired", lock="b"), event(5, "put", id=5, key="k"),
                   event(6, "put", id=6, key="k2")]:
            out = r.take(ev)
            if out is not None:
                got.append(out.get("lock") or out["key"])
        self.assertEqual(got, ["a", "b", "k", "k2"])
        self.assertEqual(r.last, 6)

    def test_lagged_and_malformed(self) -> None:
        r = Resume(0)
        with self.assertRaises(Lagged) as lagged:
            r.take(event(9, "lagged"))
        self.assertEqual((lagged.exception.index, r.last), (9, 9))
        with self.assertRaises(BadAnswer):
            r.take(_raw('{"index": "ten", "type": "put"}'))
        with self.assertRaises(BadAnswer):
            r.take(_raw("not json"))


def _raw(data: str) -> EventLines:
    ev = EventLines()
    ev.line("data: " + data)
    ev.line("")
    return ev


if __name__ == "__main__":
    unittest.main()
