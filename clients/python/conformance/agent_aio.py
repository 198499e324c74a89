"""The conformance agent of fencer.aio (test/conformance/PROTOCOL.md): it
reads one JSON request a line on stdin, runs each as a task of its own on
the public fencer.aio API only, and prints answers (by id, in any order)
and events (a handle's loss, a watch's events) as JSON lines on stdout.
Diagnostics go to stderr. Run by the conformance-agent-aio wrapper."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Dict, Set, Union

import fencer
from fencer import (BadAnswer, FencerError, InvalidRequest, LeaseLost, NotFound, OutcomeUnknown, Revoked,
                    Unavailable)
from fencer.aio import Client, Lease, MultiLock, Session, Watch

Handle = Union[Lease, MultiLock]


def say(obj: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def code_of(e: FencerError) -> str:
    """The code an error carries: the server's, unchanged, or the client's
    own for the errors it makes itself."""
    if e.code:
        return e.code
    if isinstance(e, BadAnswer):
        return "bad_answer"
    if isinstance(e, OutcomeUnknown):
        return "outcome_unknown"
    if isinstance(e, Unavailable):
        return "unavailable"
    if isinstance(e, LeaseLost):
        return "lease_lost"
    return ""


class Agent:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.handles: Dict[str, Handle] = {}
        self.sessions: Dict[str, Session] = {}
        self.watches: Dict[str, "asyncio.Task[None]"] = {}
        self.asked: Set[str] = set()  # handles released or closed on request: no lost event
        self.tasks: Set["asyncio.Future[Any]"] = set()
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return "%s%d" % (prefix, self.n)

    def keep(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def hold(self, h: Handle, prefix: str = "h") -> str:
        handle = self.name(prefix)
        self.handles[handle] = h
        self.keep(self.report_loss(handle, h))
        return handle

    async def report_loss(self, handle: str, h: Union[Handle, Session]) -> None:
        await h.lost.wait() if not isinstance(h, Session) else await h.done.wait()
        if handle in self.asked:
            return
        say({"event": "lost", "handle": handle, "code": "revoked" if isinstance(h.cause, Revoked) else "lease_lost",
             "class": type(h.cause).__name__})

    def handle(self, args: Dict[str, Any]) -> Handle:
        h = self.handles.get(args.get("handle", ""))
        if h is None:
            raise InvalidRequest("no handle %r" % args.get("handle"), code="invalid_request")
        return h

    def session(self, ref: Any) -> Session:
        s = self.sessions.get(str(ref))
        if s is None:
            raise InvalidRequest("no session handle %r" % ref, code="invalid_request")
        return s

    async def serve(self, req: Dict[str, Any]) -> None:
        rid = req.get("id")
        try:
            op = getattr(self, "op_" + str(req.get("op")), None)
            if op is None:
                say({"id": rid, "ok": False, "error": {"code": "unsupported", "class": "Unsupported", "message": "no op %r" % req.get("op")}})
                return
            result = await op(req.get("args") or {})
        except FencerError as e:
            say({"id": rid, "ok": False, "error": {"code": code_of(e), "class": type(e).__name__, "message": str(e)}})
        except Exception as e:  # a bug of the agent's: said, not hidden
            print("agent: op %r: %r" % (req.get("op"), e), file=sys.stderr)
            say({"id": rid, "ok": False, "error": {"code": "agent_error", "class": type(e).__name__, "message": str(e)}})
        else:
            say({"id": rid, "ok": True, "result": result})

    # ---- grants ------------------------------------------------------------

    async def op_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        wait = a.get("wait_ms", 0) / 1000.0
        mode = a.get("mode") or "exclusive"
        if a.get("session"):
            lease = await self.session(a["session"]).lock(a["name"], wait, holder=a.get("holder"), mode=mode)
        else:
            lease = await self.client.acquire(a["name"], a["ttl_ms"] / 1000.0, wait, holder=a.get("holder"), mode=mode)
        return {"handle": self.hold(lease), "token": lease.token, "ttl_ms": lease.ttl_ms}

    async def op_multi_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        m = await self.client.acquire_multi(a["names"], a["ttl_ms"] / 1000.0, holder=a.get("holder"))
        return {"handle": self.hold(m), "token": m.token}

    async def op_sem_acquire(self, a: Dict[str, Any]) -> Dict[str, Any]:
        wait = a.get("wait_ms", 0) / 1000.0
        if a.get("session"):
            p = await self.session(a["session"]).acquire_permit(a["name"], a["limit"], wait, holder=a.get("holder"))
        else:
            p = await self.client.acquire_permit(a["name"], a["limit"], a["ttl_ms"] / 1000.0, wait, holder=a.get("holder"))
        return {"handle": self.hold(p), "token": p.token}

    async def op_campaign(self, a: Dict[str, Any]) -> Dict[str, Any]:
        timeout = a.get("wait_ms", 0) / 1000.0
        if a.get("session"):
            lease = await self.session(a["session"]).campaign(a["name"], a["value"], timeout=timeout, holder=a.get("holder"))
        else:
            lease = await self.client.campaign(a["name"], a["value"], a["ttl_ms"] / 1000.0, timeout=timeout,
                                               holder=a.get("holder"))
        return {"handle": self.hold(lease), "token": lease.token}

    async def op_proclaim(self, a: Dict[str, Any]) -> Dict[str, Any]:
        h = self.handle(a)
        if not isinstance(h, Lease):
            raise InvalidRequest("%s is not an election's lease" % a["handle"], code="invalid_request")
        await h.proclaim(a["value"])
        return {}

    async def op_leader(self, a: Dict[str, Any]) -> Dict[str, Any]:
        leader = await self.client.election_leader(a["name"])
        if leader is None:
            raise NotFound("election %r has no leader" % a["name"], code="not_found", status=404)
        return {"holder": leader["holder"], "value": leader["value"], "token": leader["token"]}

    async def op_release(self, a: Dict[str, Any]) -> Dict[str, Any]:
        h = self.handle(a)
        if a.get("name") and isinstance(h, MultiLock):
            # One name of a multi-lock, through the lock's own release: the
            # server refuses it (multi_grant).
            await self.client.release(a["name"], h.token, h.secret)
            return {}
        if not h.lost.is_set():
            self.asked.add(a["handle"])
        await h.release()
        return {}

    async def op_lease_state(self, a: Dict[str, Any]) -> Dict[str, Any]:
        h = self.handle(a)
        return {"lost": not h.valid, "token": h.token}

    async def op_session_open(self, a: Dict[str, Any]) -> Dict[str, Any]:
        s = await self.client.open_session(a["ttl_ms"] / 1000.0, holder=a.get("holder"))
        handle = self.name("s")
        self.sessions[handle] = s
        return {"session": handle, "id": s.id}

    async def op_session_close(self, a: Dict[str, Any]) -> Dict[str, Any]:
        s = self.session(a.get("session"))
        if not s.done.is_set():
            self.asked.update(k for k, h in self.handles.items() if getattr(h, "session", None) is s and not h.lost.is_set())
        await s.close()
        return {}

    # ---- the fenced store and reads ----------------------------------------

    async def op_put(self, a: Dict[str, Any]) -> Dict[str, Any]:
        if a.get("token") is None:
            raise InvalidRequest("fencer.aio has no unfenced put", code="invalid_token")
        token = await self.client.put(a["key"], str(a["value"]).encode("utf-8"), int(a["token"]), lock=a.get("lock") or None)
        return {"token": token}

    async def op_get(self, a: Dict[str, Any]) -> Dict[str, Any]:
        value, token = await self.client.get(a["key"])
        return {"value": value.decode("utf-8", "replace"), "token": token}

    async def op_check(self, a: Dict[str, Any]) -> Dict[str, Any]:
        current = await self.client.check(a["name"], int(a["token"]))
        st = await self.client.status(a["name"])
        return {"current": current, "holder": st.get("holder", "")}

    async def op_token_info(self, a: Dict[str, Any]) -> Dict[str, Any]:
        g = await self.client.token(int(a["token"]))
        out = {"kind": "semaphore" if g.get("semaphore") else "lock", "name": g.get("semaphore") or g.get("lock", ""),
               "holder": g.get("holder", "")}
        if g.get("mode"):
            out["mode"] = g["mode"]
        return out

    async def op_history(self, a: Dict[str, Any]) -> Dict[str, Any]:
        grants = await self.client.history(a["name"])
        return {"grants": [{"token": g.get("token"), "holder": g.get("holder"), "ended": g.get("ended")}
                           for g in reversed(grants)]}

    async def op_revoke(self, a: Dict[str, Any]) -> Dict[str, Any]:
        kind = a.get("kind", "lock")
        if kind == "session":
            ref = a.get("name")
            sid = self.sessions[ref].id if ref in self.sessions else int(ref if ref is not None else a.get("id"))
            await self.client.revoke_session(sid)
        else:
            await self.client.revoke(a["name"], int(a["token"]), kind="semaphores" if kind == "semaphore" else "locks")
        return {}

    # ---- watches -------------------------------------------------------------

    async def op_watch(self, a: Dict[str, Any]) -> Dict[str, Any]:
        since = a.get("from")
        w = self.client.watch(prefix=a.get("prefix") or None, **({} if since is None else {"since": int(since)}))
        handle = self.name("w")
        self.watches[handle] = asyncio.ensure_future(self.pump(handle, w))
        return {"watch": handle}

    async def pump(self, handle: str, w: Watch) -> None:
        try:
            async for ev in w:
                say({"event": "watch", "watch": handle, "index": ev.get("index"), "type": ev.get("type"),
                     "key": ev.get("key", ""), "name": ev.get("lock") or ev.get("semaphore") or "",
                     "token": ev.get("token", 0)})
        except FencerError as e:
            say({"event": "watch_error", "watch": handle, "code": code_of(e)})
        finally:
            await w.aclose()

    async def op_watch_stop(self, a: Dict[str, Any]) -> Dict[str, Any]:
        task = self.watches.pop(a.get("watch", ""), None)
        if task is not None:
            task.cancel()
        return {}

    async def op_exit(self, a: Dict[str, Any]) -> Dict[str, Any]:
        asyncio.get_running_loop().call_soon(os._exit, 0)
        return {}


async def main() -> None:
    addrs = [a for a in os.environ.get("FENCER_ADDRS", "").split(",") if a]
    if not addrs:
        print("conformance-agent-aio: FENCER_ADDRS is not set", file=sys.stderr)
        sys.exit(2)
    client = Client(addrs)
    agent = Agent(client)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    say({"event": "ready", "client": "python-aio", "version": fencer.__version__})
    while True:
        line = await reader.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            print("conformance-agent-aio: not JSON: %r" % line[:200], file=sys.stderr)
            continue
        agent.keep(agent.serve(req))
    # stdin closed: exit now, releasing nothing (the harness decides).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
