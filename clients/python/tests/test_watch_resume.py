"""Client.watch resumes after the last entry delivered in full: a stream cut
in the middle of an entry's events reconnects with that entry's predecessor
as Last-Event-ID and skips the events of it already delivered (fencer.sse).
Fails when the watch resumes from the index of every event it delivered (as
it once did): the second connection asks after entry 5, and entry 5's last
event is never delivered."""

from __future__ import annotations

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, List, Optional

from fencer import Client


def _event(index: int, typ: str, id: Optional[int] = None, **fields: Any) -> bytes:
    out = "event: %s\ndata: %s\n" % (typ, json.dumps(dict(fields, index=index, type=typ)))
    if id is not None:
        out += "id: %d\n" % id
    return (out + "\n").encode()


class _Server:
    """A member whose first event stream is cut in the middle of entry 5;
    later ones send what comes after the Last-Event-ID asked for."""

    entries = {
        5: [_event(5, "released", lock="a"), _event(5, "acquired", lock="b"), _event(5, "put", id=5, key="k")],
        6: [_event(6, "put", id=6, key="k2")],
    }

    def __init__(self) -> None:
        self.asked: List[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                after = self.headers.get("Last-Event-ID", "")
                server.asked.append(after)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                if len(server.asked) == 1:
                    self.wfile.write(b"".join(self.server_entries()[5][:2]))
                    self.wfile.flush()
                    return  # cut: the connection closes mid-entry
                for index, events in sorted(self.server_entries().items()):
                    if index > int(after or "0"):
                        self.wfile.write(b"".join(events))
                self.wfile.flush()

            def server_entries(self) -> Any:
                return server.entries

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class WatchResumeTest(unittest.TestCase):
    def test_cut_entry_is_resumed_not_skipped(self) -> None:
        srv = _Server()
        self.addCleanup(srv.close)
        got: List[str] = []
        with Client([srv.url]).watch(since=4) as w:
            for ev in w:
                got.append(ev.get("lock") or ev["key"])
                if len(got) == 4:
                    break
        self.assertEqual(got, ["a", "b", "k", "k2"])
        self.assertEqual(srv.asked[:2], ["4", "4"], "the second connection must resume after entry 4")


if __name__ == "__main__":
    unittest.main()
