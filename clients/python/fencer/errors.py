"""Exceptions, one per error code of the HTTP API.

Every error body is ``{"error": "...", "code": "..."}``; :func:`from_response`
turns it into the exception class registered for its code in
:data:`CODE_ERRORS`, which names every code in ``api/openapi.yaml`` (a test
checks this).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class FencerError(Exception):
    """Any error of the fencer client. ``code`` is the server's machine-readable
    code (empty for errors raised by the client itself), ``status`` the HTTP
    status (0 when no answer arrived), ``body`` the decoded error body."""

    def __init__(self, message: str, code: str = "", status: int = 0,
                 body: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.body: Dict[str, Any] = dict(body or {})


class InvalidRequest(FencerError):
    """The request was malformed (400 invalid_*, 413, 415, 405)."""


class LockHeld(FencerError):
    """409 lock_held: another holder has the lock. ``holder`` and ``token``
    name the current grant, ``lock`` the lock (a multi-lock's first held
    name)."""

    @property
    def lock(self) -> str:
        return str(self.body.get("lock", ""))

    @property
    def holder(self) -> str:
        return str(self.body.get("holder", ""))

    @property
    def token(self) -> int:
        return int(self.body.get("token", 0))


class LockDelay(FencerError):
    """409 lock_delay: the lock's last grant expired with a lock-delay, which
    has ``retry_after`` seconds left."""

    @property
    def retry_after(self) -> float:
        return int(self.body.get("retry_after_ms", 0)) / 1000.0


class LeaseLost(FencerError):
    """The lease is gone: 410 lease_lost from the server, or (as
    :class:`LeaseExpired`) no renewal was confirmed before the client's own
    conservative deadline."""


class LeaseExpired(LeaseLost):
    """No renewal was confirmed before the local deadline (last confirmed
    send time + TTL - margin). The server may still hold the lease for a
    moment; the client no longer believes it."""


class StaleToken(FencerError):
    """409 stale_token: a write with a newer token has been accepted.
    ``last_token`` is the key's high-water mark."""

    @property
    def last_token(self) -> int:
        return int(self.body.get("last_token", 0))


class UnissuedToken(FencerError):
    """409 unissued_token: the token is above every token ever granted."""


class NotLockHolder(FencerError):
    """409 not_lock_holder: the token is not the named lock's current grant."""


class UpgradeRequired(FencerError):
    """409 upgrade_required: a member's build cannot read the entry yet."""


class MissingToken(FencerError):
    """428 missing_token: a fenced write without a Fencing-Token."""


class NotFound(FencerError):
    """404 not_found."""


class NoLeader(FencerError):
    """503 no_leader: retried by the client until its attempts run out."""


class OutcomeUnknown(FencerError):
    """503 outcome_unknown: the write may or may not have been applied."""


class MemberConflict(FencerError):
    """409 member_conflict."""


class UnknownMember(FencerError):
    """404 unknown_member."""


class TooManyWaiters(FencerError):
    """429 too_many_waiters."""


class TooManyLocks(FencerError):
    """429 too_many_locks."""


class KVFull(FencerError):
    """429 kv_full: the fenced store, or the caller's share of it, is full."""


class RateLimited(FencerError):
    """429 rate_limited (the server sent Retry-After)."""


class Unauthorized(FencerError):
    """401 unauthorized: no valid bearer token."""


class Forbidden(FencerError):
    """403 forbidden or cross_origin: the token may not do this."""


class HostNotAllowed(FencerError):
    """421 host_not_allowed: the node does not answer to this host name."""


class EventsCompacted(FencerError):
    """410 events_compacted: the events asked for are older than the node
    keeps; ``oldest`` and ``index`` (in ``body``) say where to re-list from."""


class UnknownToken(FencerError):
    """404 unknown_token: no grant with that token is in the history.
    ``reason`` says why: ``not_kept`` (older than the history the cluster
    keeps), ``never_granted`` or ``no_history``."""

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", ""))


class SemaphoreFull(FencerError):
    """409 semaphore_full: every permit is held (``held`` and ``limit`` in
    ``body``)."""


class LimitMismatch(FencerError):
    """409 limit_mismatch: the acquire's limit differs from the semaphore's."""


class UnknownSession(FencerError):
    """404 unknown_session: no live session has that id, and none that
    ended is remembered with it. A renewal refused so ends the session."""


class SessionExpired(LeaseLost):
    """410 session_expired: the session ended (expired or closed), and every
    grant under it with it. A :class:`LeaseLost`, so code that handles a
    lost grant handles a grant lost with its session."""


class Revoked(LeaseLost):
    """410 revoked: an operator revoked the grant or the session (and every
    grant under it). A :class:`LeaseLost`, so a lease or session whose
    renewal is answered so ends at once, and code that handles a lost
    grant handles a revoked one."""


class SessionMismatch(FencerError):
    """409 session_mismatch: the ``session_lease`` presented is not the
    session's. A renewal refused so ends the session."""


class SessionGrant(FencerError):
    """409 session_grant: the grant is held under a session and is renewed
    by renewing the session (:meth:`fencer.Session.renew`)."""


class MultiGrant(FencerError):
    """409 multi_grant: the lock is one name of a multi-lock, whose names
    end together: release the :class:`~fencer.MultiLock`."""


class ServerTimeout(FencerError):
    """504 timeout."""


class InternalError(FencerError):
    """500 internal (or 503 when the token space is exhausted)."""


class Unavailable(FencerError):
    """No endpoint answered within the client's attempts, or before the
    call's deadline (its ``timeout``)."""


class BadAnswer(FencerError):
    """An answer a fencer node would not give, so the client does not
    believe it: a status that is neither 2xx nor an error (a redirect, which
    the client never follows, a 1xx), a body that is not the JSON the
    contract says, one that does not match what was asked (another name or
    token, a longer TTL), or one over the client's ``max_answer_bytes``.
    ``reason`` says which: ``status``, ``malformed``, ``mismatch`` or
    ``too_large``. It is not retried; after a fenced write it leaves
    unknown whether the value was stored."""

    def __init__(self, message: str, reason: str = "malformed", status: int = 0) -> None:
        super().__init__(message, status=status)
        self.reason = reason


# fencer:codes begin (test/conformance's TestClientCodesExist reads every
# quoted code up to the end marker: each must be one of api/wire's codes)
CODE_ERRORS: Dict[str, Type[FencerError]] = {
    "invalid_name": InvalidRequest,
    "invalid_key": InvalidRequest,
    "invalid_ttl": InvalidRequest,
    "invalid_wait": InvalidRequest,
    "invalid_value": InvalidRequest,
    "invalid_holder": InvalidRequest,
    "invalid_request_id": InvalidRequest,
    "invalid_lease": InvalidRequest,
    "invalid_token": InvalidRequest,
    "invalid_json": InvalidRequest,
    "invalid_member": InvalidRequest,
    "invalid_snapshot": InvalidRequest,
    "invalid_epoch": InvalidRequest,
    "unsupported_media_type": InvalidRequest,
    "body_too_large": InvalidRequest,
    "missing_token": MissingToken,
    "method_not_allowed": InvalidRequest,
    "invalid_lock_delay": InvalidRequest,
    "invalid_mode": InvalidRequest,
    "invalid_index": InvalidRequest,
    "invalid_limit": InvalidRequest,
    "semaphore_full": SemaphoreFull,
    "limit_mismatch": LimitMismatch,
    "events_compacted": EventsCompacted,
    "unknown_token": UnknownToken,
    "lock_held": LockHeld,
    "lock_delay": LockDelay,
    "lease_lost": LeaseLost,
    "stale_token": StaleToken,
    "not_lock_holder": NotLockHolder,
    "not_found": NotFound,
    "unissued_token": UnissuedToken,
    "upgrade_required": UpgradeRequired,
    "no_leader": NoLeader,
    "outcome_unknown": OutcomeUnknown,
    "member_conflict": MemberConflict,
    "unknown_member": UnknownMember,
    "too_many_waiters": TooManyWaiters,
    "too_many_locks": TooManyLocks,
    "kv_full": KVFull,
    "rate_limited": RateLimited,
    "too_many_watches": RateLimited,
    "unknown_session": UnknownSession,
    "session_expired": SessionExpired,
    "session_mismatch": SessionMismatch,
    "session_grant": SessionGrant,
    "invalid_names": InvalidRequest,
    "multi_grant": MultiGrant,
    "revoked": Revoked,
    "unauthorized": Unauthorized,
    "keyed_member": Unauthorized,
    "forbidden": Forbidden,
    "host_not_allowed": HostNotAllowed,
    "cross_origin": Forbidden,
    "malformed_sequence": InvalidRequest,
    "empty_key": InvalidRequest,
    "timeout": ServerTimeout,
    "internal": InternalError,
}
# fencer:codes end


def from_response(status: int, body: Mapping[str, Any]) -> FencerError:
    """Return the exception for an error answer. An unknown code (from a newer
    server) gives a plain :class:`FencerError` carrying it."""
    code = str(body.get("code", ""))
    message = str(body.get("error", "")) or "HTTP %d" % status
    cls = CODE_ERRORS.get(code, FencerError)
    return cls("%s: %s" % (code or status, message), code=code, status=status, body=body)
