"""What an answer must say before the client believes it.

A fencing client acts on what the server tells it: it writes with the token
a grant names and trusts its lease until the TTL a grant or renewal reports.
So an answer is checked against what was asked (api/openapi.yaml's schemas):
the name is the one asked for, a token is an integer from 1 to 2^64-1 (not
a bool, a float or a string), a TTL is positive and no longer than asked, a
lease secret is 32 lowercase hexadecimal digits, a renewal names the grant
it renewed and its TTL, a fenced write the key and token it stored. Anything
else raises :class:`~fencer.errors.BadAnswer`, never a JSON, key or type
error. A session's answers the same way: its id a token-like number, its
secret, a TTL no longer than asked, a renewal or close naming the session,
and a grant under it naming the session it was asked under.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from .errors import BadAnswer, FencerError, from_response

MAX_TOKEN = 2 ** 64 - 1
_LEASE = re.compile(r"[0-9a-f]{32}\Z")
_TOKEN_HEADER = re.compile(r"[1-9][0-9]{0,19}\Z")


def obj(body: bytes, what: str) -> Dict[str, Any]:
    """The JSON object of an answer's body: every fencer answer is one."""
    if not body:
        raise BadAnswer("%s: the answer has no body; a fencer node answers with a JSON object" % what, reason="malformed")
    try:
        v = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BadAnswer("%s: the answer is not JSON (%s): %r" % (what, e, body[:80]), reason="malformed") from None
    if not isinstance(v, dict):
        raise BadAnswer("%s: the answer is JSON but not an object: %r" % (what, body[:80]), reason="malformed")
    return v


def token(v: Any, what: str) -> int:
    """A fencing token: an int from 1 to 2^64-1. bool is an int in Python
    and is refused by name."""
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_TOKEN:
        raise BadAnswer("%s: token %r is not an integer from 1 to 2^64-1" % (what, v), reason="malformed")
    return v


def token_header(v: Optional[str], what: str) -> int:
    """A Fencing-Token header: canonical decimal, as api/wire.ParseToken."""
    if v is None or not _TOKEN_HEADER.match(v) or int(v) > MAX_TOKEN:
        raise BadAnswer("%s: Fencing-Token header %r is not a token" % (what, v), reason="malformed")
    return int(v)


def index_header(v: Optional[str], what: str) -> int:
    """A Fencer-Index header: a decimal log index."""
    if v is None or not v.isdigit() or not v.isascii():
        raise BadAnswer("%s: Fencer-Index header %r is not an index" % (what, v), reason="malformed")
    return int(v)


def objects(body: Dict[str, Any], field: str, what: str) -> List[Dict[str, Any]]:
    """A list of JSON objects in field of an answer (absent means none)."""
    v = body.get(field, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise BadAnswer("%s: %s is not a list of objects" % (what, field), reason="malformed")
    return v


def _positive_int(v: Any, field: str, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise BadAnswer("%s: %s %r is not a positive integer" % (what, field, v), reason="malformed")
    return v


def _equal(body: Dict[str, Any], field: str, want: Any, what: str) -> None:
    got = body.get(field)
    if got != want or type(got) is not type(want):
        raise BadAnswer("%s: the answer's %s is %r, not %r as asked" % (what, field, got, want), reason="mismatch")


def _secret(body: Dict[str, Any], what: str) -> None:
    secret = body.get("lease")
    if not isinstance(secret, str) or not _LEASE.match(secret):
        raise BadAnswer("%s: lease %r is not 32 hexadecimal digits" % (what, secret), reason="malformed")


def grant(body: Dict[str, Any], *, kind: str, name: str, holder: str, ttl_ms: int,
          request_id: str, limit: Optional[int] = None, session: Optional[int] = None,
          mode: Optional[str] = None) -> Dict[str, Any]:
    """Check an acquire's answer (a Grant, or for kind "semaphores" a
    PermitGrant) against the request and return it. Under a session,
    ``ttl_ms`` is the session's and the grant must name the session: one
    that does not (a server that ignored the session fields, say) would
    live on a TTL of its own that nothing renews."""
    what = "acquire %s %r" % ("semaphore" if kind == "semaphores" else "lock", name)
    _equal(body, "semaphore" if kind == "semaphores" else "lock", name, what)
    _equal(body, "holder", holder, what)
    token(body.get("token"), what)
    _secret(body, what)
    if session is not None:
        _equal(body, "session", session, what)
    elif body.get("session", 0) != 0:
        raise BadAnswer("%s: the grant names session %r, and none was asked for" % (what, body.get("session")), reason="mismatch")
    got_ttl = _positive_int(body.get("ttl_ms"), "ttl_ms", what)
    if got_ttl > ttl_ms:
        # A longer lease than asked would keep this client believing in a
        # grant the server was asked to end sooner.
        raise BadAnswer("%s: ttl_ms %d is above the %d asked for" % (what, got_ttl, ttl_ms), reason="mismatch")
    if "request_id" in body:
        _equal(body, "request_id", request_id, what)
    if not isinstance(body.get("existing", False), bool):
        raise BadAnswer("%s: existing %r is not a boolean" % (what, body.get("existing")), reason="malformed")
    if "value" in body and not isinstance(body["value"], str):
        raise BadAnswer("%s: value %r is not a string" % (what, body["value"]), reason="malformed")
    if mode is not None and body.get("mode", "") != mode:
        # A grant in another mode than asked: an exclusive one where a
        # shared was asked would block writers; a shared one would not fence.
        raise BadAnswer("%s: the grant is in mode %r, not %r as asked" % (what, body.get("mode", ""), mode), reason="mismatch")
    if limit is not None:
        _equal(body, "limit", limit, what)
        held = _positive_int(body.get("held"), "held", what)
        if held > limit:
            raise BadAnswer("%s: held %d is above the limit %d" % (what, held, limit), reason="mismatch")
    return body


def renewal(body: Dict[str, Any], *, kind: str, name: str, token: int, ttl_ms: Optional[int]) -> None:
    """Check a renewal's answer: the grant renewed, and its TTL (renewals
    take none, so it is the grant's)."""
    what = "renew %s %r token %d" % ("semaphore" if kind == "semaphores" else "lock", name, token)
    _equal(body, "semaphore" if kind == "semaphores" else "lock", name, what)
    _equal(body, "token", token, what)
    got = _positive_int(body.get("ttl_ms"), "ttl_ms", what)
    if ttl_ms is not None and got != ttl_ms:
        raise BadAnswer("%s: ttl_ms %d is not the grant's %d" % (what, got, ttl_ms), reason="mismatch")


def put(body: Dict[str, Any], *, key: str, token: int) -> int:
    """Check a fenced write's answer: the key and token it stored."""
    what = "put %r token %d" % (key, token)
    _equal(body, "key", key, what)
    _equal(body, "token", token, what)
    return token


def session(body: Dict[str, Any], *, holder: str, ttl_ms: int, request_id: str) -> Dict[str, Any]:
    """Check a session's creation answer against the request and return
    it: its id a number from the token sequence, the holder, a lease
    secret, a TTL no longer than asked."""
    what = "create session for %r" % holder
    token(body.get("session"), what + ": session")
    _equal(body, "holder", holder, what)
    _secret(body, what)
    got_ttl = _positive_int(body.get("ttl_ms"), "ttl_ms", what)
    if got_ttl > ttl_ms:
        raise BadAnswer("%s: ttl_ms %d is above the %d asked for" % (what, got_ttl, ttl_ms), reason="mismatch")
    if "request_id" in body:
        _equal(body, "request_id", request_id, what)
    if not isinstance(body.get("existing", False), bool):
        raise BadAnswer("%s: existing %r is not a boolean" % (what, body.get("existing")), reason="malformed")
    delay = body.get("lock_delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise BadAnswer("%s: lock_delay_ms %r is not a non-negative integer" % (what, delay), reason="malformed")
    return body


def session_renewal(body: Dict[str, Any], *, session: int, ttl_ms: Optional[int]) -> None:
    """Check a session renewal's answer: the session renewed, and its TTL
    (a renewal takes none, so it is the session's)."""
    what = "renew session %d" % session
    _equal(body, "session", session, what)
    got = _positive_int(body.get("ttl_ms"), "ttl_ms", what)
    if ttl_ms is not None and got != ttl_ms:
        raise BadAnswer("%s: ttl_ms %d is not the session's %d" % (what, got, ttl_ms), reason="mismatch")


def session_grants(body: Dict[str, Any], field: str, what: str) -> List[Dict[str, Any]]:
    """The grants a session answer lists (a close's released, a status's
    grants): each a kind, a name and a token."""
    out = objects(body, field, what)
    for g in out:
        if g.get("kind") not in ("lock", "semaphore") or not isinstance(g.get("name"), str) or not g["name"]:
            raise BadAnswer("%s: %s holds %r, not a lock or semaphore grant by name" % (what, field, g), reason="malformed")
        token(g.get("token"), what)
    return out


def session_close(body: Dict[str, Any], *, session: int) -> List[Dict[str, Any]]:
    """Check a session close's answer and return the grants it released."""
    what = "close session %d" % session
    _equal(body, "session", session, what)
    return session_grants(body, "released", what)


def refusal(status: int, headers: Dict[str, str], body: bytes, what: str) -> FencerError:
    """The error a non-2xx answer stands for: the exception its code names
    for an error status, :class:`~fencer.errors.BadAnswer` for anything else
    (a redirect, which no fencer node sends and the client never follows,
    or a 1xx). ``headers`` has lower-case names."""
    if status < 400:
        location = " (Location: %s)" % headers["location"] if "location" in headers else ""
        return BadAnswer("%s: HTTP %d is neither a success nor an error%s; the client follows no redirect"
                         % (what, status, location), reason="status", status=status)
    try:
        err = json.loads(body) if body else {}
    except ValueError:
        err = {}
    if not isinstance(err, dict) or not err:
        err = {"error": body.decode("utf-8", "replace")[:200]}
    return from_response(status, err)


def multi_grant(body: Dict[str, Any], *, names: List[str], holder: str, ttl_ms: int,
                request_id: str) -> Dict[str, Any]:
    """Check a multi-lock's grant against the request and return it: every
    name asked for, in order, one token, a secret, a TTL no longer than
    asked."""
    what = "multi-lock %s" % ",".join(names)
    if body.get("names") != names:
        raise BadAnswer("%s: the answer names locks %r" % (what, body.get("names")), reason="mismatch")
    _equal(body, "holder", holder, what)
    token(body.get("token"), what)
    _secret(body, what)
    got_ttl = _positive_int(body.get("ttl_ms"), "ttl_ms", what)
    if got_ttl > ttl_ms:
        raise BadAnswer("%s: ttl_ms %d is above the %d asked for" % (what, got_ttl, ttl_ms), reason="mismatch")
    if "request_id" in body:
        _equal(body, "request_id", request_id, what)
    return body


def multi_renewal(body: Dict[str, Any], *, what: str, token: int, ttl_ms: int) -> None:
    """Check a multi-lock renewal's answer: its token and TTL."""
    if body.get("token") != token or body.get("ttl_ms") != ttl_ms:
        raise BadAnswer("renew %s: the answer names token %r, ttl_ms %r" % (what, body.get("token"), body.get("ttl_ms")),
                        reason="mismatch")


def revoked(body: Dict[str, Any], *, name: str, token: int) -> Dict[str, Any]:
    """Check a revoke's answer: the token revoked."""
    if body.get("token") != token:
        raise BadAnswer("revoke %r token %d answered for token %r" % (name, token, body.get("token")), reason="mismatch")
    return body


def leader(status: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    """An election's leader from its lock's status (or a lock list's
    entry, or an event): holder, token (the term) and value; None when the
    status says nobody holds it."""
    if "held" in status and not status.get("held"):
        return None
    return {"holder": status.get("holder", ""), "token": token(status.get("token"), "lock %r" % name),
            "value": status.get("value", "")}
