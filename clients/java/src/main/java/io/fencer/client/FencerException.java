package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import java.util.Map;

/**
 * FencerException is every error the client raises. {@link #code()} is the
 * machine-readable code: the server's {@code code} for an error it answered,
 * unchanged, or one of the client's own ({@code lease_lost} for a local
 * deadline that passed, {@code outcome_unknown}, {@code bad_answer},
 * {@code timeout}, {@code unavailable}). {@link #status()} is the HTTP status,
 * 0 for an error the client made itself. Each code family has a subclass of
 * its own, so that callers catch what they handle: {@link LockHeldException},
 * {@link StaleTokenException}, {@link LeaseLostException} (and its
 * {@link RevokedException}), and so on; the table below says which.
 */
public class FencerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The code of an answer that broke the contract. */
    public static final String BAD_ANSWER = "bad_answer";
    /** The code of a request no member answered. */
    public static final String UNAVAILABLE = "unavailable";

    private final String code;
    private final int status;
    private final transient JsonNode body;

    FencerException(String message, String code, int status, JsonNode body) {
        super(message);
        this.code = code;
        this.status = status;
        this.body = body == null ? MissingNode.getInstance() : body;
    }

    /** The machine-readable code. */
    public String code() {
        return code;
    }

    /** The HTTP status of the answer, 0 for an error the client made itself. */
    public int status() {
        return status;
    }

    /** The error body's {@code lock}: the lock a lock_held names. */
    public String lock() {
        return body.path("lock").asText("");
    }

    /** The error body's {@code holder}: the current holder on lock_held. */
    public String holder() {
        return body.path("holder").asText("");
    }

    /** The error body's {@code token}: the current grant's on lock_held. */
    public long token() {
        return body.path("token").asLong(0);
    }

    /** The error body's {@code last_token}: the key's mark on stale_token. */
    public long lastToken() {
        return body.path("last_token").asLong(0);
    }

    /** The error body's {@code retry_after_ms}: the lock-delay left on lock_delay. */
    public long retryAfterMillis() {
        return body.path("retry_after_ms").asLong(0);
    }

    /** The error body's {@code held}: a semaphore's permits held. */
    public int held() {
        return body.path("held").asInt(0);
    }

    /** The error body's {@code limit}: a semaphore's limit. */
    public int limit() {
        return body.path("limit").asInt(0);
    }

    /** The error body's {@code reason}, on unknown_token. */
    public String reason() {
        return body.path("reason").asText("");
    }

    /** The error body's {@code oldest}, on events_compacted. */
    public long oldest() {
        return body.path("oldest").asLong(0);
    }

    /** The error body's {@code index}, on events_compacted. */
    public long index() {
        return body.path("index").asLong(0);
    }

    /** Makes one exception of a code's family. */
    interface Maker {
        FencerException make(String message, String code, int status, JsonNode body);
    }

    // Every code of api/openapi.yaml and the family it belongs to. A Go test
    // reads the quoted codes between the marker lines: one code per entry.
    // fencer:codes begin
    static final Map<String, Maker> CODES = Map.ofEntries(
            Map.entry("invalid_name", InvalidNameException::new),
            Map.entry("invalid_key", InvalidRequestException::new),
            Map.entry("invalid_ttl", InvalidTtlException::new),
            Map.entry("invalid_wait", InvalidRequestException::new),
            Map.entry("invalid_holder", InvalidRequestException::new),
            Map.entry("invalid_request_id", InvalidRequestException::new),
            Map.entry("invalid_lease", InvalidRequestException::new),
            Map.entry("invalid_token", InvalidTokenException::new),
            Map.entry("invalid_json", InvalidRequestException::new),
            Map.entry("invalid_member", InvalidRequestException::new),
            Map.entry("invalid_snapshot", InvalidRequestException::new),
            Map.entry("invalid_epoch", InvalidRequestException::new),
            Map.entry("invalid_lock_delay", InvalidRequestException::new),
            Map.entry("invalid_mode", InvalidModeException::new),
            Map.entry("invalid_index", InvalidRequestException::new),
            Map.entry("invalid_limit", InvalidRequestException::new),
            Map.entry("invalid_value", InvalidRequestException::new),
            Map.entry("invalid_names", InvalidNamesException::new),
            Map.entry("unsupported_media_type", InvalidRequestException::new),
            Map.entry("body_too_large", InvalidRequestException::new),
            Map.entry("method_not_allowed", InvalidRequestException::new),
            Map.entry("missing_token", MissingTokenException::new),
            Map.entry("lock_held", LockHeldException::new),
            Map.entry("lock_delay", LockDelayException::new),
            Map.entry("lease_lost", LeaseLostException::new),
            Map.entry("revoked", RevokedException::new),
            Map.entry("stale_token", StaleTokenException::new),
            Map.entry("not_lock_holder", NotLockHolderException::new),
            Map.entry("unissued_token", UnissuedTokenException::new),
            Map.entry("not_found", NotFoundException::new),
            Map.entry("unknown_token", UnknownTokenException::new),
            Map.entry("events_compacted", EventsCompactedException::new),
            Map.entry("semaphore_full", SemaphoreFullException::new),
            Map.entry("limit_mismatch", LimitMismatchException::new),
            Map.entry("multi_grant", MultiGrantException::new),
            Map.entry("unknown_session", UnknownSessionException::new),
            Map.entry("session_expired", SessionExpiredException::new),
            Map.entry("session_mismatch", SessionMismatchException::new),
            Map.entry("session_grant", SessionGrantException::new),
            Map.entry("upgrade_required", UpgradeRequiredException::new),
            Map.entry("member_conflict", MembershipException::new),
            Map.entry("unknown_member", MembershipException::new),
            Map.entry("no_leader", NoLeaderException::new),
            Map.entry("outcome_unknown", OutcomeUnknownException::new),
            Map.entry("too_many_waiters", LimitException::new),
            Map.entry("too_many_locks", LimitException::new),
            Map.entry("kv_full", LimitException::new),
            Map.entry("rate_limited", LimitException::new),
            Map.entry("too_many_watches", LimitException::new),
            Map.entry("unauthorized", UnauthorizedException::new),
            Map.entry("keyed_member", UnauthorizedException::new),
            Map.entry("forbidden", ForbiddenException::new),
            Map.entry("cross_origin", ForbiddenException::new),
            Map.entry("host_not_allowed", ForbiddenException::new),
            Map.entry("malformed_sequence", FencedResourceException::new),
            Map.entry("empty_key", FencedResourceException::new),
            Map.entry("timeout", FencerTimeoutException::new),
            Map.entry("internal", InternalException::new));
    // fencer:codes end

    /**
     * The exception of a non-2xx answer: its code's family, or the base class
     * for a code this client does not know yet (the server adds codes).
     */
    static FencerException ofAnswer(int status, JsonNode body, String what) {
        if (status < 400) {
            return badAnswer(what, "HTTP " + status + " is neither a success nor an error (the client follows no redirect)");
        }
        String code = body.path("code").asText("");
        String msg = body.path("error").asText("");
        if (code.isEmpty()) {
            code = status == 404 ? "not_found" : status >= 500 ? "internal" : "http_" + status;
        }
        String message = what + ": " + code + (msg.isEmpty() ? "" : ": " + msg) + " (HTTP " + status + ")";
        Maker m = CODES.get(code);
        return m == null ? new FencerException(message, code, status, body) : m.make(message, code, status, body);
    }

    /** An error the client makes itself, of code's family, with no answer behind it. */
    static FencerException local(String code, String message) {
        Maker m = CODES.get(code);
        return m == null ? new FencerException(message, code, 0, null) : m.make(message, code, 0, null);
    }

    static BadAnswerException badAnswer(String what, String why) {
        return new BadAnswerException(what + ": " + why, BAD_ANSWER, 0, null);
    }

    static UnavailableException unavailable(String message) {
        return new UnavailableException(message, UNAVAILABLE, 0, null);
    }
}
