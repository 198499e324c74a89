"""The fake fencer node of clients/testdata/bad_server.json: it plays one
scenario's answers as raw HTTP/1.1 bytes (the format is in that directory's
README.md). api/client/badserver_test.go plays the same table for the Go
client. tests/session_server.json, in the same format, adds the session
operations (:func:`op_of`)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

from .cluster import REPO

TABLE = os.path.join(REPO, "clients", "testdata", "bad_server.json")
_REASONS = {200: "OK", 204: "No Content", 302: "Found", 304: "Not Modified", 404: "Not Found"}


def load() -> Dict[str, Any]:
    with open(TABLE) as f:
        return json.load(f)


SESSION_TABLE = os.path.join(os.path.dirname(__file__), "session_server.json")


def load_sessions() -> Dict[str, Any]:
    """The session table, its defaults over the shared table's."""
    table = load()
    with open(SESSION_TABLE) as f:
        sessions = json.load(f)
    table["defaults"].update(sessions["defaults"])
    table["session"] = sessions["session"]
    table["scenarios"] = sessions["scenarios"]
    return table


def op_of(method: str, path: str, req: Optional[Dict[str, Any]] = None) -> str:
    """The operation a request is, by its path (and method, and for an
    acquire under a session its body): acquire, renew, release, put, and
    session_create, session_renew, session_close, session_acquire (a lock
    under a session), session_permit; else other."""
    path = path.split("?", 1)[0]
    if path.startswith("/v1/kv/"):
        return "put" if method in ("PUT", "GET") else "other"
    if path == "/v1/sessions" and method == "POST":
        return "session_create"
    m = re.match(r"^/v1/sessions/[^/]+/(renew|close)$", path)
    if m:
        return "session_" + m.group(1)
    for op in ("acquire", "renew", "release"):
        m = re.match(r"^/v1/(locks|semaphores)/[^/]+/%s$" % op, path)
        if m:
            if op == "acquire" and req and "session" in req:
                return "session_acquire" if m.group(1) == "locks" else "session_permit"
            return op
    return "other"


class BadServer:
    """One scenario's server on 127.0.0.1. ``counts`` counts the requests
    of each operation; ``bodies`` the JSON bodies of each operation's
    requests."""

    def __init__(self, table: Dict[str, Any], scenario: Dict[str, Any], op: Optional[str] = None) -> None:
        # op is the operation the scenario's answer replaces: its call's,
        # unless a call is named for more than one operation.
        self.table, self.scenario, self.op = table, scenario, op or scenario["call"]
        self.counts: Dict[str, int] = {}
        self.bodies: Dict[str, List[Dict[str, Any]]] = {}
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
        try:
            req = json.loads(body) if body else {}
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        op = op_of(h.command, path, req)
        with self._mu:
            self.counts[op] = self.counts.get(op, 0) + 1
            self.bodies.setdefault(op, []).append(req)
        name = path.split("?", 1)[0].split("/")[3] if path.count("/") >= 3 else ""
        if op in ("acquire", "session_create"):
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
        if op == self.op and "answer" in self.scenario and not redirected:
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
