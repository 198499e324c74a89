"""What each call sends, apart from how: endpoints, paths, the bounds the
client checks before sending (refused with the code the server would give,
``invalid_ttl``, ``invalid_wait``, ``invalid_mode``, ``invalid_names``),
and the bodies of acquires and sessions.

Pure (no sockets, clocks or event loops), so the synchronous client
(:mod:`fencer.client`) and the asyncio one (:mod:`fencer.aio`) send the same
requests from one copy: one request id per acquire, made here once and
carried across every attempt.
"""

from __future__ import annotations

import secrets
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .errors import InvalidRequest

MIN_TTL = 0.1
MAX_TTL = 86400.0
MAX_WAIT = 60.0
#: The most names a multi-lock takes.
MAX_NAMES = 64


@dataclass
class Endpoint:
    """One member's HTTP address."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return "%s://%s:%d" % (self.scheme, self.host, self.port)


def parse_endpoint(raw: str, default_scheme: str) -> Endpoint:
    """``HOST:PORT`` or ``http(s)://HOST:PORT`` as an Endpoint."""
    if "://" not in raw:
        raw = default_scheme + "://" + raw
    u = urllib.parse.urlsplit(raw)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("endpoint %r: want HOST:PORT or http(s)://HOST:PORT" % raw)
    return Endpoint(u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80))


def endpoints(given: Sequence[str], default_scheme: str) -> List[Endpoint]:
    """The endpoints a client was given (a list, or one comma-separated
    string)."""
    if isinstance(given, str):
        given = [e for e in given.split(",") if e]
    if not given:
        raise ValueError("no endpoints")
    return [parse_endpoint(e, default_scheme) for e in given]


def leader_endpoint(status: Dict[str, Any], like: Endpoint) -> Optional[Endpoint]:
    """The leader a ``GET /v1/cluster`` answer names, with ``like``'s
    scheme, or None when it names none."""
    for m in status.get("members") or []:
        addr = m.get("http_addr") if isinstance(m, dict) else None
        if isinstance(addr, str) and addr and status.get("leader") and m.get("id") == status.get("leader"):
            return header_endpoint(addr, like)
    return None


def header_endpoint(addr: str, like: Endpoint) -> Optional[Endpoint]:
    """A ``host:port`` (a member's http_addr, a ``Fencer-Leader`` header)
    as an Endpoint with ``like``'s scheme; None if it is not one."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        return None
    return Endpoint(like.scheme, host.strip("[]"), int(port))


def quote(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def path(kind: str, name: str, op: str) -> str:
    """``/v1/{kind}/{name}[/{op}]`` with the name escaped."""
    p = "/v1/%s/%s" % (kind, quote(name))
    return p + "/" + op if op else p


def lock_path(name: str, op: str) -> str:
    return path("locks", name, op)


def check_ttl(ttl: float) -> None:
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise InvalidRequest("ttl %r: want %g to %g seconds" % (ttl, MIN_TTL, MAX_TTL), code="invalid_ttl", status=400)


def check_wait(wait: float) -> None:
    if not 0 <= wait <= MAX_WAIT:
        raise InvalidRequest("wait %r: want 0 to %g seconds" % (wait, MAX_WAIT), code="invalid_wait", status=400)


def set_mode(body: Dict[str, Any], mode: str) -> None:
    """Put a lock acquire's mode in its body: absent for an exclusive lock,
    as every client before modes sent it."""
    if mode not in ("shared", "exclusive"):
        raise InvalidRequest("mode %r: want 'shared' or 'exclusive'" % (mode,), code="invalid_mode", status=400)
    if mode == "shared":
        body["mode"] = "shared"


def set_durable(body: Dict[str, Any], durable: bool, wait: float) -> None:
    """Put durable in an acquire's body: a durable acquire waits."""
    if not durable:
        return
    if wait <= 0:
        raise InvalidRequest("durable: a durable acquire keeps a waiter's place; give wait > 0",
                             code="invalid_wait", status=400)
    body["durable"] = True


def request_id() -> str:
    """A new acquire's request id: 32 random hex digits, sent unchanged by
    every attempt so that a retry gets the first grant back."""
    return secrets.token_hex(16)


def lock_body(holder: str, ttl: float, wait: float, *, lock_delay: float = 0.0,
              value: Optional[str] = None, mode: str = "exclusive") -> Dict[str, Any]:
    """The body of ``POST /v1/locks/{name}/acquire``."""
    check_ttl(ttl)
    check_wait(wait)
    body: Dict[str, Any] = {"holder": holder, "ttl_ms": int(ttl * 1000),
                            "wait_ms": int(wait * 1000), "request_id": request_id()}
    if lock_delay:
        body["lock_delay_ms"] = int(lock_delay * 1000)
    if value is not None:
        body["value"] = value
    set_mode(body, mode)
    return body


def permit_body(holder: str, limit: int, ttl: float, wait: float, *, lock_delay: float = 0.0) -> Dict[str, Any]:
    """The body of ``POST /v1/semaphores/{name}/acquire``."""
    check_ttl(ttl)
    check_wait(wait)
    body: Dict[str, Any] = {"holder": holder, "limit": int(limit), "ttl_ms": int(ttl * 1000),
                            "wait_ms": int(wait * 1000), "request_id": request_id()}
    if lock_delay:
        body["lock_delay_ms"] = int(lock_delay * 1000)
    return body


def session_body(holder: str, ttl: float, *, lock_delay: float = 0.0) -> Dict[str, Any]:
    """The body of ``POST /v1/sessions``."""
    check_ttl(ttl)
    body: Dict[str, Any] = {"holder": holder, "ttl_ms": int(ttl * 1000), "request_id": request_id()}
    if lock_delay:
        body["lock_delay_ms"] = int(lock_delay * 1000)
    return body


def under_session_body(session: int, secret: str, holder: str, wait: float, *,
                       lock_delay: float = 0.0) -> Dict[str, Any]:
    """The body of an acquire under a session: its id and secret instead
    of a TTL."""
    check_wait(wait)
    body: Dict[str, Any] = {"holder": holder, "wait_ms": int(wait * 1000), "request_id": request_id(),
                            "session": session, "session_lease": secret}
    if lock_delay:
        body["lock_delay_ms"] = int(lock_delay * 1000)
    return body


def multi_body(names: Sequence[str], holder: str, ttl: float, wait: float = 0.0,
               mode: str = "exclusive") -> Dict[str, Any]:
    """The body of ``POST /v1/locks/acquire`` (a multi-lock; with a wait it
    queues in every name's FIFO; ``mode="shared"`` takes every name in
    shared mode)."""
    check_ttl(ttl)
    check_wait(wait)
    names = list(names)
    if not 1 <= len(names) <= MAX_NAMES or len(set(names)) != len(names):
        raise InvalidRequest("names %r: want 1 to %d lock names, none twice" % (names, MAX_NAMES), code="invalid_names", status=400)
    body: Dict[str, Any] = {"names": names, "holder": holder, "ttl_ms": int(ttl * 1000), "request_id": request_id()}
    if wait:
        body["wait_ms"] = int(wait * 1000)
    set_mode(body, mode)
    return body


def events_query(since: Optional[int], prefix: Optional[str]) -> str:
    """The query of ``GET /v1/events`` ("" for none)."""
    q = {}
    if since is not None:
        q["since"] = str(since)
    if prefix:
        q["prefix"] = prefix
    return "?" + urllib.parse.urlencode(q) if q else ""


def lease_start(grant: Dict[str, Any], sent: float, first_sent: float) -> float:
    """Where a grant's (or session's) lease is measured from: the send time
    of the attempt answered, or for a retry answered with an earlier grant
    (``existing``), of the first attempt, since the grant may have been
    made for any of them."""
    return first_sent if grant.get("existing") else sent
