"""The synchronous Python client's conformance agent (test/conformance/PROTOCOL.md).

It reads one JSON request a line on stdin, runs each on a thread of its own
through the ``fencer`` package's public API only, and writes answers and
events on stdout, one JSON object a line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Callable, Dict, Optional

import fencer
from fencer import Client, FencerError, InvalidRequest


class HarnessError(Exception):
    """A request the agent cannot run (an unknown handle or op): the
    harness's mistake, not the client's."""


_out = threading.Lock()


def emit(obj: Dict[str, Any]) -> None:
    line = json.dumps(obj, separators=(",", ":"))
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def classify(err: BaseException) -> "tuple[str, str]":
    """The protocol's code and class of an error the client raised."""
    cls = type(err).__name__
    if isinstance(err, HarnessError):
        return "harness", cls
    if isinstance(err, FencerError):
        if err.code:
            return err.code, cls
        for klass, code in ((fencer.LeaseLost, "lease_lost"), (fencer.BadAnswer, "bad_answer"),
                            (fencer.Unavailable, "unavailable"), (fencer.OutcomeUnknown, "outcome_unknown"),
                            (fencer.NotFound, "not_found")):
            if isinstance(err, klass):
                return code, cls
    return "unknown", cls


class Held:
    """A grant the agent holds: a Lease or a MultiLock. ``ended`` is set
    when the harness released it or closed its session: no lost event."""

    def __init__(self, grant: Any) -> None:
        self.grant = grant
        self.ended = False


class Agent:
    def __init__(self, client: Client) -> None:
        self.c = client
        self.mu = threading.Lock()
        self.next = 0
        self.handles: Dict[str, Held] = {}
        self.sessions: Dict[str, fencer.Session] = {}
        self.watches: Dict[str, Any] = {}

    def name(self, prefix: str) -> str:
        with self.mu:
            self.next += 1
            return "%s%d" % (prefix, self.next)

    def hold(self, grant: Any) -> str:
        """Name a grant, and print its lost event when it ends while held."""
        handle = self.name("h")
        h = Held(grant)
        with self.mu:
            self.handles[handle] = h

        def watch() -> None:
            grant.lost.wait()
            with self.mu:
                if h.ended:
                    return
            try:
                grant.check()
            except FencerError as e:
                code, cls = classify(e)
                emit({"event": "lost", "handle": handle, "code": code, "class": cls})
        threading.Thread(target=watch, daemon=True).start()
        return handle

    def handle(self, name: str) -> Held:
        with self.mu:
            if name not in self.handles:
                raise HarnessError("no handle %r" % name)
            return self.handles[name]

    def session(self, name: str) -> fencer.Session:
        with self.mu:
            if name not in self.sessions:
                raise HarnessError("no session %r" % name)
            return self.sessions[name]

    # ---- ops -------------------------------------------------------------

    def op_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        wait = a.get("wait_ms", 0) / 1000.0
        mode = a.get("mode") or "exclusive"
        if a.get("session"):
            lease = self.session(a["session"]).lock(a["name"], wait, holder=a["holder"], mode=mode)
        else:
            lease = self.c.acquire(a["name"], ttl_of(a), wait, holder=a["holder"], mode=mode)
        return {"handle": self.hold(lease), "token": lease.token, "ttl_ms": lease.ttl_ms}

    def op_multi_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        m = self.c.multi_lock(a["names"], ttl_of(a), holder=a["holder"])
        return {"handle": self.hold(m), "token": m.token}

    def op_sem_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        wait = a.get("wait_ms", 0) / 1000.0
        if a.get("session"):
            lease = self.session(a["session"]).acquire_permit(a["name"], a["limit"], wait, holder=a["holder"])
        else:
            lease = self.c.acquire_permit(a["name"], a["limit"], ttl_of(a), wait, holder=a["holder"])
        return {"handle": self.hold(lease), "token": lease.token, "ttl_ms": lease.ttl_ms}

    def op_campaign(self, a: Dict[str, Any]) -> Dict[str, Any]:
        timeout = a["wait_ms"] / 1000.0 if a.get("wait_ms") else None
        if a.get("session"):
            lease = self.session(a["session"]).campaign(a["name"], a["value"], timeout=timeout, holder=a["holder"])
        else:
            lease = self.c.campaign(a["name"], a["value"], ttl_of(a), timeout=timeout, holder=a["holder"])
        return {"handle": self.hold(lease), "token": lease.token, "ttl_ms": lease.ttl_ms}

    def op_proclaim(self, a: Dict[str, Any]) -> Dict[str, Any]:
        self.handle(a["handle"]).grant.proclaim(a["value"])
        return {}

    def op_leader(self, a: Dict[str, Any]) -> Dict[str, Any]:
        st = self.c.election_leader(a["name"])
        if st is None:
            raise fencer.NotFound("election %r has no leader" % a["name"], code="not_found")
        return {"holder": st["holder"], "value": st["value"], "token": st["token"]}

    def op_release(self, a: Dict[str, Any]) -> Dict[str, Any]:
        h = self.handle(a["handle"])
        if a.get("name"):
            # One name of a multi-lock, through the lock's own release.
            self.c.release(a["name"], h.grant.token, h.grant.secret)
            return {}
        with self.mu:
            h.ended = True
        h.grant.release()
        return {}

    def op_lease_state(self, a: Dict[str, Any]) -> Dict[str, Any]:
        g = self.handle(a["handle"]).grant
        return {"lost": not g.valid, "token": g.token}

    def op_session_open(self, a: Dict[str, Any]) -> Dict[str, Any]:
        s = self.c.session(ttl_of(a), holder=a["holder"])
        name = self.name("s")
        with self.mu:
            self.sessions[name] = s
        return {"session": name, "id": s.id}

    def op_session_close(self, a: Dict[str, Any]) -> Dict[str, Any]:
        s = self.session(a["session"])
        with self.mu:
            for h in self.handles.values():
                if getattr(h.grant, "session", None) is s:
                    h.ended = True
        s.close()
        return {}

    def op_put(self, a: Dict[str, Any]) -> Dict[str, Any]:
        if a.get("token") is None:
            raise InvalidRequest("the Python client writes fenced only: a put needs a token", code="invalid_token", status=400)
        return {"token": self.c.put(a["key"], a["value"].encode(), a["token"], lock=a.get("lock") or None)}

    def op_get(self, a: Dict[str, Any]) -> Dict[str, Any]:
        value, token = self.c.get(a["key"])
        return {"value": value.decode(), "token": token}

    def op_check(self, a: Dict[str, Any]) -> Dict[str, Any]:
        return {"current": self.c.check(a["name"], a["token"])}

    def op_token_info(self, a: Dict[str, Any]) -> Dict[str, Any]:
        g = self.c.token(a["token"])
        out = {"kind": "lock", "name": g.get("lock", ""), "holder": g.get("holder", "")}
        if g.get("semaphore"):
            out["kind"], out["name"] = "semaphore", g["semaphore"]
        if g.get("mode"):
            out["mode"] = g["mode"]
        return out

    def op_history(self, a: Dict[str, Any]) -> Dict[str, Any]:
        return {"grants": [{"token": g["token"], "holder": g.get("holder", ""), "ended": g.get("ended", "")}
                           for g in self.c.history(a["name"])]}

    def op_revoke(self, a: Dict[str, Any]) -> Dict[str, Any]:
        kind = a["kind"]
        if kind == "lock":
            self.c.revoke(a["name"], a["token"])
        elif kind == "semaphore":
            self.c.revoke_permit(a["name"], a["token"])
        elif kind == "session":
            with self.mu:
                s = self.sessions.get(a["name"])
            self.c.revoke_session(s.id if s is not None else int(a["name"]))
        else:
            raise HarnessError("revoke kind %r" % kind)
        return {}

    def op_watch(self, a: Dict[str, Any]) -> Dict[str, Any]:
        name = self.name("w")
        w = self.c.watch(since=a.get("from"), prefix=a.get("prefix"))
        with self.mu:
            self.watches[name] = w
        threading.Thread(target=self.run_watch, args=(name, w), daemon=True).start()
        return {"watch": name}

    def run_watch(self, name: str, w: fencer.Watch) -> None:
        try:
            for ev in w:
                emit({"event": "watch", "watch": name, "index": int(ev["index"]), "type": ev.get("type", ""),
                      "key": ev.get("key", ""), "name": ev.get("lock") or ev.get("semaphore", ""),
                      "token": ev.get("token", 0)})
        except FencerError as e:
            emit({"event": "watch_error", "watch": name, "code": classify(e)[0]})

    def op_watch_stop(self, a: Dict[str, Any]) -> Dict[str, Any]:
        with self.mu:
            w = self.watches.pop(a["watch"], None)
        if w is None:
            raise HarnessError("no watch %r" % a["watch"])
        w.close()
        return {}


def ttl_of(a: Dict[str, Any]) -> float:
    """An op's ttl_ms in seconds, the client's default when absent."""
    return a["ttl_ms"] / 1000.0 if a.get("ttl_ms") is not None else 10.0


def serve(agent: Agent, req: Dict[str, Any]) -> None:
    op: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = getattr(agent, "op_" + str(req.get("op")), None)
    try:
        if op is None:
            emit({"id": req["id"], "ok": False, "error": {"code": "unsupported", "class": "HarnessError", "message": "op %r" % req.get("op")}})
            return
        result = op(req.get("args") or {})
    except Exception as e:
        code, cls = classify(e)
        emit({"id": req["id"], "ok": False, "error": {"code": code, "class": cls, "message": str(e)}})
        return
    emit({"id": req["id"], "ok": True, "result": result})


def main() -> None:
    agent = Agent(Client(os.environ["FENCER_ADDRS"].split(",")))
    emit({"event": "ready", "client": "python", "version": fencer.__version__})
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            print("agent: bad request line %r" % line, file=sys.stderr)
            continue
        if req.get("op") == "exit":
            emit({"id": req["id"], "ok": True, "result": {}})
            break
        threading.Thread(target=serve, args=(agent, req), daemon=True).start()
    # Stdin closed: exit at once, abandoning what runs (the harness decides
    # what is released); keep-alive threads must not hold the exit.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
