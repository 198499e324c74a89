"""Real fencer nodes for the tests: ``fencer serve`` processes on free
loopback ports in a temporary directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from typing import Callable, Dict, List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ.get("FENCER_BIN", os.path.join(REPO, "bin", "fencer"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(what: str, cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """Call cond until it is true, or fail after timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class Node:
    def __init__(self, cluster: "Cluster", id: str, args: List[str]) -> None:
        self.cluster, self.id, self.args = cluster, id, args
        self.http = "127.0.0.1:%d" % free_port()
        self.raft = "127.0.0.1:%d" % free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log = os.path.join(cluster.dir, id + ".log")

    def start(self) -> None:
        cmd = [BIN, "serve", "--id", self.id, "--data-dir", os.path.join(self.cluster.dir, self.id),
               "--http-addr", self.http, "--raft-addr", self.raft, "--election-timeout", "500ms"] + self.args
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """n nodes started together with --initial-cluster (or one with
    --bootstrap), each with its own extra flags."""

    def __init__(self, n: int = 3, extra: Optional[Callable[[str], List[str]]] = None,
                 scheme: str = "http", ready_ctx=None) -> None:
        if not os.path.exists(BIN):
            raise RuntimeError("%s is missing: run make build (or set FENCER_BIN)" % BIN)
        self.dir = tempfile.mkdtemp(prefix="fencer-py-")
        self.scheme = scheme
        self.ctx = ready_ctx
        ids = ["n%d" % (i + 1) for i in range(n)]
        self.nodes: Dict[str, Node] = {}
        for id in ids:
            self.nodes[id] = Node(self, id, list(extra(id)) if extra else [])
        if n == 1:
            self.nodes["n1"].args.append("--bootstrap")
        else:
            initial = ",".join("%s=%s@%s" % (nd.id, nd.raft, nd.http) for nd in self.nodes.values())
            for nd in self.nodes.values():
                nd.args += ["--initial-cluster", initial]
        for nd in self.nodes.values():
            nd.start()
        try:
            poll("a leader every node knows", lambda: all(self.ready(nd) for nd in self.nodes.values()), 30)
        except AssertionError:
            self.close(keep=True)
            raise

    def endpoints(self) -> List[str]:
        return [nd.http for nd in self.nodes.values()]

    def _get(self, node: Node, path: str) -> Optional[dict]:
        try:
            with urllib.request.urlopen("%s://%s%s" % (self.scheme, node.http, path), timeout=2, context=self.ctx) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def ready(self, node: Node) -> bool:
        return node.running and self._get(node, "/readyz") is not None

    def leader(self) -> Node:
        found: List[Node] = []

        def cond() -> bool:
            for nd in self.nodes.values():
                if not nd.running:
                    continue
                st = self._get(nd, "/v1/cluster")
                if st and st.get("leader") in self.nodes and self.nodes[st["leader"]].running and self.ready(self.nodes[st["leader"]]):
                    found[:] = [self.nodes[st["leader"]]]
                    return True
            return False
        poll("a running leader", cond, 30)
        return found[0]

    def close(self, keep: bool = False) -> None:
        for nd in self.nodes.values():
            nd.kill()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
