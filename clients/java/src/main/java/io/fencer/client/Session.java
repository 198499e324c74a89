package io.fencer.client;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Session is one lease for many grants: locks, permits and elections taken
 * with {@link #lock}, {@link #acquirePermit} and {@link #campaign} each have a
 * token and secret of their own (for fencing and release) but live as long
 * as the session. Only the session is renewed, by the same rules as a
 * grant's lease (the local deadline from the send time of its creation or
 * last confirmed renewal). The server ends a session, and every grant under
 * it, at once: once {@link #lost()} completes, assume every grant under it is
 * gone. {@link #close()} ends them all in one entry.
 */
public final class Session implements AutoCloseable {
    private final FencerClient c;
    private final long id;
    private final String holder;
    private final String secret;
    private final long ttlMillis;
    final Keeper keeper;

    Session(FencerClient c, Json s, long start) {
        this.c = c;
        this.id = s.num("session");
        this.holder = s.str("holder");
        this.secret = s.str("lease");
        this.ttlMillis = s.num("ttl_ms");
        this.keeper = new Keeper(ttlMillis, start, this::sendRenewal, c, "session " + id);
    }

    /** The session's id. */
    public long id() {
        return id;
    }

    /** The holder the session was created for. */
    public String holder() {
        return holder;
    }

    /** The session's secret. */
    public String secret() {
        return secret;
    }

    /** The session's TTL. */
    public Duration ttl() {
        return Duration.ofMillis(ttlMillis);
    }

    /** Completes with why the session was lost (never for a close). */
    public CompletableFuture<LossReason> lost() {
        keeper.checkDeadline();
        return keeper.lost;
    }

    /** Runs r, on the client's worker threads, once the session is lost. */
    public void onLost(Runnable r) {
        keeper.lost.thenRunAsync(r, c.workers());
    }

    /** True once the session is lost or closed; it checks the local deadline on each call. */
    public boolean isLost() {
        return !keeper.held();
    }

    /** Renews the session now; a refusal ends it and every grant under it. */
    public void renew() {
        if (isLost()) {
            throw (LeaseLostException) FencerException.local("lease_lost", "session " + id + " is not held");
        }
        keeper.renew(false);
    }

    private long sendRenewal(long deadline) {
        Transport.Request r = new Transport.Request("POST", "/v1/sessions/" + id + "/renew");
        r.attemptTimeout = Duration.ofMillis(Math.max(ttlMillis / 3, 100));
        r.untilDeadline = true;
        r.deadline = deadline;
        r.body = Json.bytes(Json.object().put("lease", secret));
        Json a = Json.parse(c.transport().send(r).body(), "renew session " + id);
        if (a.num("session") != id || a.num("ttl_ms") != ttlMillis) {
            throw FencerException.badAnswer("renew session " + id, "the answer names another session or TTL");
        }
        return r.sent;
    }

    /** Acquires lock name under the session (its TTL option is ignored: the session's rules). */
    public Lease lock(String name, AcquireOptions opts) {
        return acquire(Lease.Kind.LOCK, name, 0, opts);
    }

    /** Acquires a permit of semaphore name, of limit, under the session. */
    public Lease acquirePermit(String name, int limit, AcquireOptions opts) {
        return acquire(Lease.Kind.PERMIT, name, limit, opts);
    }

    /** Campaigns in election name with value under the session, waiting until elected. */
    public Lease campaign(String name, String value, AcquireOptions opts) {
        return FencerClient.campaign(o -> lock(name, o), value, opts);
    }

    private Lease acquire(Lease.Kind kind, String name, int limit, AcquireOptions opts) {
        AcquireOptions o = opts == null ? new AcquireOptions() : opts;
        o.check(false);
        // A closed session is the server's to refuse (session_expired); one
        // whose deadline passed is lost as far as this client knows.
        if (!keeper.ended() && isLost()) {
            throw (LeaseLostException) FencerException.local("lease_lost", "session " + id + " is not held");
        }
        String holder = o.holderOrDefault();
        String requestId = FencerClient.requestId();
        var body = c.acquireBody(o, holder, requestId, kind, limit, false);
        body.put("session", id).put("session_lease", secret);
        Transport.Request r = new Transport.Request("POST", FencerClient.path(kind.path, name, "acquire"));
        r.extra = o.wait;
        r.body = Json.bytes(body);
        Json g = c.grantOf(r, kind, List.of(name));
        Answers.checkGrant(g, kind, List.of(name), holder, Duration.ofHours(24).toMillis(), requestId);
        if (g.num("session") != id) {
            throw FencerException.badAnswer("acquire " + name + " under session " + id, "the answer names session " + g.num("session"));
        }
        if (kind == Lease.Kind.LOCK) {
            Answers.checkMode(g, body.path("mode").asText(""));
        }
        Lease l = new Lease(c, kind, List.of(name), g, r.sent, this);
        if (isLost()) {
            // The session ended while the acquire waited: give the grant back.
            throw l.abandon((LeaseLostException) FencerException.local("lease_lost", "session " + id + " ended while acquiring"));
        }
        return l;
    }

    /**
     * Ends the session and every grant under it in one entry, and returns
     * them. Each grant's {@link Lease#isLost()} is true from the start of the call.
     */
    public List<SessionGrant> closeSession() {
        boolean wasLost = !keeper.held();
        keeper.end();
        Transport.Request r = new Transport.Request("POST", "/v1/sessions/" + id + "/close");
        r.body = Json.bytes(Json.object().put("lease", secret));
        Json a;
        try {
            a = Json.parse(c.transport().send(r).body(), "close session " + id);
        } catch (SessionExpiredException e) {
            if (r.uncertain && !wasLost) {
                return List.of(); // an earlier attempt closed it
            }
            throw e;
        }
        if (a.num("session") != id) {
            throw FencerException.badAnswer("close session " + id, "the answer names session " + a.num("session"));
        }
        return a.list("released").stream().map(SessionGrant::of).toList();
    }

    /** Closes the session: {@link #closeSession()}. */
    @Override
    public void close() {
        closeSession();
    }
}
