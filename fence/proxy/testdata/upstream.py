"""A small HTTP service that knows nothing of fencing: the upstream the fence
proxy's tests put behind it. Standard library only.

  PUT/POST/PATCH PATH  stores the body under PATH (after a random pause of up
                       to MAX_DELAY_MS, so that writes let through together
                       really race) and logs the write with its
                       Fencing-Token header; 200 {"path", "token"}
  DELETE PATH          removes PATH, logged the same way
  GET PATH             the body stored under PATH, or 404
  GET /_writes         the log: every write applied, in the order applied
  GET /_arrivals       how many writes have arrived, applied or not

A write with "X-Upstream-Status: N" is answered N and not applied; one with
"X-Upstream-Hang: 1" is held for a minute before it is applied. It prints
"listening PORT" once it serves, and serves until killed.
"""
import json
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_DELAY_MS = int(sys.argv[1]) if len(sys.argv) > 1 else 0

lock = threading.Lock()
values = {}
writes = []
arrivals = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_writes":
            with lock:
                self.reply(200, list(writes))
            return
        if self.path == "/_arrivals":
            with lock:
                self.reply(200, arrivals[0])
            return
        with lock:
            value = values.get(self.path)
        if value is None:
            self.reply(404, {"error": "no value", "path": self.path})
        else:
            self.reply(200, value, "application/octet-stream")

    def write(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        with lock:
            arrivals[0] += 1
        status = self.headers.get("X-Upstream-Status")
        if status:
            self.reply(int(status), {"error": "refused by the upstream"})
            return
        if self.headers.get("X-Upstream-Hang"):
            time.sleep(60)
        if MAX_DELAY_MS:
            time.sleep(random.uniform(0, MAX_DELAY_MS) / 1000)
        token = self.headers.get("Fencing-Token")
        with lock:
            if self.command == "DELETE":
                values.pop(self.path, None)
            else:
                values[self.path] = body
            writes.append({"method": self.command, "path": self.path, "token": token,
                           "body": body.decode("utf-8", "replace")})
        self.reply(200, {"path": self.path, "token": token})

    do_PUT = do_POST = do_PATCH = do_DELETE = write


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("listening", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
