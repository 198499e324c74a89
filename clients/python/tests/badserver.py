"""The fake fencer node of clients/testdata/bad_server.json: it plays one
scenario's answers as raw HTTP/1.1 bytes (the format is in that directory's
README.md). api/client/badserver_test.go plays the same table for the Go
client."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional

from .cluster import REPO

TABLE = os.path.join(REPO, "clients", "testdata", "bad_server.json")
_REASONS = {200: "OK", 204: "No Content", 302: "Found", 304: "Not Modified", 404: "Not Found"}


def load() -> Dict[str, Any]:
    with open(TABLE) as f:
        return json.load(f)


def op_of(method: str, path: str) -> str:
    """The operation a request is, by its path (and method)."""
    path = path.split("?", 1)[0]
    if path.startswith("/v1/kv/"):
        return "put" if method in ("PUT", "GET") else "other"
    for op in ("acquire", "renew", "release"):
        if re.match(r"^/v1/(locks|semaphores)/[^/]+/%s$" % op, path):
            return op
    return "other"


class BadServer:
    """One scenario's server on 127.0.0.1. ``counts`` counts the requests
    of each operation; ``sent`` the body bytes written per answer."""

    def __init__(self, table: Dict[str, Any], scenario: Dict[str, Any]) -> None:
        self.table, self.scenario = table, scenario
        self.counts: Dict[str, int] = {}
        self.grant: Dict[str, Any] = {"ttl_ms": table["grant"]["ttl_ms"], "token": 7}
        self._mu = threading.Lock()
        bad = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                bad.answer(self, body)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _any

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.endpoint = "127.0.0.1:%d" % self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        path = h.path
        redirected = path.startswith("/redirected/")
        if redirected:
            path = path[len("/redirected"):]
        op = op_of(h.command, path)
        with self._mu:
            self.counts[op] = self.counts.get(op, 0) + 1
        try:
            req = json.loads(body) if body else {}
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        name = path.split("?", 1)[0].split("/")[3] if path.count("/") >= 3 else ""
        if op == "acquire":
            self.grant["ttl_ms"] = req.get("ttl_ms", self.grant["ttl_ms"])
        values = {
            "name": name,
            "holder": req.get("holder", ""),
            "ttl_ms": self.grant["ttl_ms"],
            "request_id": req.get("request_id", ""),
            "token": req.get("token") or h.headers.get("Fencing-Token") or self.grant["token"],
            "key": path.split("?", 1)[0][len("/v1/kv/"):] if op == "put" else "",
        }
        spec = dict(self.table["defaults"][op])
        if op == self.scenario["call"] and "answer" in self.scenario and not redirected:
            spec.update(self.scenario["answer"])
            if "body" not in self.scenario["answer"]:
                spec["body"] = self.table["defaults"][op]["body"]
        self.write(h, spec, values)

    def write(self, h: BaseHTTPRequestHandler, spec: Dict[str, Any], values: Dict[str, Any]) -> None:
        text = re.sub(r"\$\{(\w+)\}", lambda m: str(values[m.group(1)]), spec.get("body", ""))
        body = text.encode("utf-8")
        pad = int(spec.get("pad_bytes", 0))
        status = int(spec["status"])
        head = "HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, "Status"))
        headers = dict(spec.get("headers", {}))
        headers.setdefault("Content-Type", "application/json")
        if not spec.get("no_length"):
            headers["Content-Length"] = str(max(len(body), pad))
        headers["Connection"] = "close"
        head += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
        out = h.wfile
        try:
            if spec.get("drip_ms"):
                for b in head.encode("latin-1") + body:
                    out.write(bytes([b]))
                    out.flush()
                    time.sleep(spec["drip_ms"] / 1000.0)
                return
            out.write(head.encode("latin-1") + body)
            left = pad - len(body)
            chunk = b" " * (64 << 10)
            while left > 0:
                out.write(chunk[:left])
                left -= min(left, len(chunk))
            out.flush()
        except OSError:
            pass  # the client went away: what it should do with most of these


def scenario(table: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    for s in table["scenarios"]:
        if s["name"] == name:
            return s
    return None
