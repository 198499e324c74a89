// Errors: one class per family of the API's error codes, each carrying the
// server's `code`, the HTTP `status` and the server's message, so that a
// caller can branch on `instanceof` or on `.code` alike.

/** A fencer error body, as every error answer carries it. */
export interface ErrorBody {
  error?: string;
  code?: string;
  lock?: string;
  holder?: string;
  token?: number;
  last_token?: number;
  retry_after_ms?: number;
  oldest?: number;
  index?: number;
  held?: number;
  limit?: number;
  reason?: string;
  [field: string]: unknown;
}

/**
 * FencerError is every error of the client. `code` is the server's
 * machine-readable code (or the client's own: lease_lost, outcome_unknown,
 * bad_answer, timeout, unavailable), `status` the HTTP status (0 when no
 * answer arrived), `serverMessage` the server's `error` text, `body` the
 * decoded error body.
 */
export class FencerError extends Error {
  readonly code: string;
  readonly status: number;
  readonly serverMessage: string;
  readonly body: ErrorBody;
  /** Attempts of the request whose answer was lost before this one. */
  lostAnswers = 0;

  constructor(message: string, code: string, status = 0, body: ErrorBody = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.body = body;
    this.serverMessage = typeof body.error === "string" ? body.error : "";
  }
}

/** A malformed request: 400 invalid_*, 405, 413, 415 and the like. */
export class InvalidRequestError extends FencerError {}
/** 400 invalid_name: not a valid lock (or semaphore) name. */
export class InvalidNameError extends InvalidRequestError {}
/** 400 invalid_names: a multi-acquire's names are none, too many, repeated or invalid. */
export class InvalidNamesError extends InvalidRequestError {}
/** 400 invalid_ttl: a TTL outside 100 ms to 24 h. */
export class InvalidTTLError extends InvalidRequestError {}
/** 400 invalid_mode: a lock mode other than shared or exclusive, or a shared acquire with a value. */
export class InvalidModeError extends InvalidRequestError {}
/** 400 invalid_token: not a fencing token. */
export class InvalidTokenError extends InvalidRequestError {}
/** 428 missing_token: a fenced write without a Fencing-Token. */
export class MissingTokenError extends InvalidRequestError {}

/** 409 lock_held: another holder has the lock (`holder`, `token`, `lock` name it). */
export class LockHeldError extends FencerError {
  get lock(): string { return String(this.body.lock ?? ""); }
  get holder(): string { return String(this.body.holder ?? ""); }
  get token(): number { return Number(this.body.token ?? 0); }
}

/** 409 lock_delay: the lock's last grant expired and its lock-delay runs for `retryAfterMs` more. */
export class LockDelayError extends FencerError {
  get retryAfterMs(): number { return Number(this.body.retry_after_ms ?? 0); }
}

/**
 * The lease is gone: 410 lease_lost from the server, or the client's own
 * local deadline passed (then `local` is true). Revoked and
 * SessionExpiredError are LeaseLostErrors too.
 */
export class LeaseLostError extends FencerError {
  /** True when the client gave the lease up at its own deadline. */
  local = false;
}

/** 410 revoked: an operator revoked the grant or session. */
export class RevokedError extends LeaseLostError {}
/** 410 session_expired: the session ended, and every grant under it. */
export class SessionExpiredError extends LeaseLostError {}

/** 409 stale_token: a write with a newer token was accepted (`lastToken` is the key's mark). */
export class StaleTokenError extends FencerError {
  get lastToken(): number { return Number(this.body.last_token ?? 0); }
}
/** 409 unissued_token: the token is above every token granted. */
export class UnissuedTokenError extends FencerError {}
/** 409 not_lock_holder: the token is not the named lock's current grant. */
export class NotLockHolderError extends FencerError {}
/** 404 not_found: no such key (or, from the client, no election leader). */
export class NotFoundError extends FencerError {}
/** 404 unknown_token: no grant with that token is in the history (`reason` says why). */
export class UnknownTokenError extends FencerError {
  get reason(): string { return String(this.body.reason ?? ""); }
}
/** 410 events_compacted: the events asked for are older than the node keeps. */
export class EventsCompactedError extends FencerError {}
/** 409 semaphore_full: every permit is held. */
export class SemaphoreFullError extends FencerError {}
/** 409 limit_mismatch: the acquire's limit differs from the semaphore's. */
export class LimitMismatchError extends FencerError {}
/** 409 multi_grant: the lock is one name of a multi-lock; release the multi-lock. */
export class MultiGrantError extends FencerError {}
/** 404 unknown_session: no live session has that id. */
export class UnknownSessionError extends FencerError {}
/** 409 session_mismatch: the session secret presented is not the session's. */
export class SessionMismatchError extends FencerError {}
/** 409 session_grant: the grant lives under a session; renew the session. */
export class SessionGrantError extends FencerError {}
/** 409 upgrade_required: a member's build cannot read the entry yet. */
export class UpgradeRequiredError extends FencerError {}
/** A cluster membership refusal: member_conflict, unknown_member. */
export class MembershipError extends FencerError {}
/** 503 no_leader: retried until the client's attempts run out. */
export class NoLeaderError extends FencerError {}
/** outcome_unknown: the answer was lost, and the request may have happened. */
export class OutcomeUnknownError extends FencerError {}
/** 429: too_many_waiters, too_many_locks, kv_full, rate_limited, too_many_watches. */
export class LimitError extends FencerError {}
/** 401 unauthorized or keyed_member. */
export class UnauthorizedError extends FencerError {}
/** 403 forbidden or cross_origin; 421 host_not_allowed. */
export class ForbiddenError extends FencerError {}
/** 400 malformed_sequence, empty_key: a fenced resource's refusals. */
export class FencedResourceError extends InvalidRequestError {}
/** timeout: the server (504) or the call's own time ran out with no answer. */
export class TimeoutError extends FencerError {}
/** 500 internal. */
export class InternalError extends FencerError {}
/** unavailable: no member could be reached. */
export class UnavailableError extends FencerError {}
/** `unsupported`: an operation this client does not have. */
export class UnsupportedError extends FencerError {}

/**
 * bad_answer: an answer a fencer node would not give (a redirect or other
 * status that is neither 2xx nor an error, a body that is not the JSON the
 * contract says, one that does not match what was asked, one over the
 * client's maxAnswerBytes). Never retried; `reason` is status, malformed,
 * mismatch or too_large.
 */
export class BadAnswerError extends FencerError {
  readonly reason: string;
  constructor(message: string, reason = "malformed", status = 0) {
    super(message, "bad_answer", status);
    this.reason = reason;
  }
}

type ErrorClass = new (message: string, code: string, status?: number, body?: ErrorBody) => FencerError;

// The table below names every code of api/openapi.yaml; a Go test reads the
// quoted codes between its marker lines, so keep one code per entry.
// fencer:codes begin
export const CODE_ERRORS: Readonly<Record<string, ErrorClass>> = {
  "invalid_name": InvalidNameError,
  "invalid_key": InvalidRequestError,
  "invalid_ttl": InvalidTTLError,
  "invalid_wait": InvalidRequestError,
  "invalid_holder": InvalidRequestError,
  "invalid_request_id": InvalidRequestError,
  "invalid_lease": InvalidRequestError,
  "invalid_token": InvalidTokenError,
  "invalid_json": InvalidRequestError,
  "invalid_member": InvalidRequestError,
  "invalid_snapshot": InvalidRequestError,
  "invalid_epoch": InvalidRequestError,
  "invalid_lock_delay": InvalidRequestError,
  "invalid_mode": InvalidModeError,
  "invalid_index": InvalidRequestError,
  "invalid_limit": InvalidRequestError,
  "invalid_value": InvalidRequestError,
  "invalid_names": InvalidNamesError,
  "unsupported_media_type": InvalidRequestError,
  "body_too_large": InvalidRequestError,
  "method_not_allowed": InvalidRequestError,
  "missing_token": MissingTokenError,
  "lock_held": LockHeldError,
  "lock_delay": LockDelayError,
  "lease_lost": LeaseLostError,
  "revoked": RevokedError,
  "stale_token": StaleTokenError,
  "not_lock_holder": NotLockHolderError,
  "unissued_token": UnissuedTokenError,
  "not_found": NotFoundError,
  "unknown_token": UnknownTokenError,
  "events_compacted": EventsCompactedError,
  "semaphore_full": SemaphoreFullError,
  "limit_mismatch": LimitMismatchError,
  "multi_grant": MultiGrantError,
  "unknown_session": UnknownSessionError,
  "session_expired": SessionExpiredError,
  "session_mismatch": SessionMismatchError,
  "session_grant": SessionGrantError,
  "upgrade_required": UpgradeRequiredError,
  "member_conflict": MembershipError,
  "unknown_member": MembershipError,
  "no_leader": NoLeaderError,
  "outcome_unknown": OutcomeUnknownError,
  "too_many_waiters": LimitError,
  "too_many_locks": LimitError,
  "kv_full": LimitError,
  "rate_limited": LimitError,
  "too_many_watches": LimitError,
  "unauthorized": UnauthorizedError,
  "keyed_member": UnauthorizedError,
  "forbidden": ForbiddenError,
  "cross_origin": ForbiddenError,
  "host_not_allowed": ForbiddenError,
  "malformed_sequence": FencedResourceError,
  "empty_key": FencedResourceError,
  "timeout": TimeoutError,
  "internal": InternalError,
};
// fencer:codes end

/** The codes the client makes itself, for errors no server answered. */
export const CLIENT_CODES = ["lease_lost", "outcome_unknown", "bad_answer", "timeout", "unavailable"] as const;

/**
 * errorFromAnswer returns the error of a non-2xx answer: the class its code
 * names, or a plain FencerError carrying an unknown code (a newer server's).
 */
export function errorFromAnswer(status: number, body: ErrorBody, what: string): FencerError {
  const code = typeof body.code === "string" ? body.code : "";
  const text = typeof body.error === "string" && body.error !== "" ? body.error : `HTTP ${status}`;
  const cls = CODE_ERRORS[code] ?? FencerError;
  return new cls(`${what}: ${code || status}: ${text}`, code, status, body);
}
