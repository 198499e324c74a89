package io.fencer.client;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Lease is a held grant: a lock's (exclusive or shared), a semaphore's
 * permit, an election's leadership or a multi-lock. Pass {@link #token()}
 * with every write the grant protects. {@link #lost()} completes, and every
 * {@link #onLost} runs, as soon as the client can no longer be sure it
 * holds the grant: at its local deadline (the send time of its last
 * confirmed renewal, or of the acquire, plus TTL minus a margin of TTL/10, at
 * least 50 ms), before the server can expire it; or when the server refuses
 * a renewal or an operator revokes it. {@link #isLost()} reads the clock
 * itself, so a process paused past the deadline sees the loss on its first
 * look, before any timer has run. {@link #close()} releases it.
 *
 * <p>A grant under a {@link Session} lives as long as the session: its
 * deadline and its loss are the session's, and closing the session ends it.
 */
public final class Lease implements AutoCloseable {
    enum Kind {
        LOCK("locks", "lock"), PERMIT("semaphores", "semaphore"), MULTI("locks", "multi-lock");

        final String path;
        final String noun;

        Kind(String path, String noun) {
            this.path = path;
            this.noun = noun;
        }
    }

    private final FencerClient c;
    final Kind kind;
    private final List<String> names;
    private final String holder;
    private final long token;
    private final String secret;
    private final long ttlMillis;
    private final boolean shared;
    private final int held;
    private final Session session;
    final Keeper keeper; // its own, or its session's
    private final CompletableFuture<LossReason> lost;
    private volatile String value;
    private boolean released;

    Lease(FencerClient c, Kind kind, List<String> names, Json g, long start, Session session) {
        this.c = c;
        this.kind = kind;
        this.names = List.copyOf(names);
        this.holder = g.str("holder");
        this.token = g.num("token");
        this.secret = g.str("lease");
        this.ttlMillis = g.num("ttl_ms");
        this.shared = "shared".equals(g.str("mode"));
        this.held = (int) g.num("held");
        this.value = g.str("value");
        this.session = session;
        if (session == null) {
            keeper = new Keeper(ttlMillis, start, this::sendRenewal, c, kind.noun + " " + names + " token " + token);
            lost = keeper.lost;
        } else {
            keeper = session.keeper;
            lost = new CompletableFuture<>();
            keeper.lost.thenAccept(r -> {
                if (!isReleased()) {
                    lost.complete(r);
                }
            });
        }
    }

    /** The fencing token: pass it with every write the grant protects. */
    public long token() {
        return token;
    }

    /** The lock's (or semaphore's, or election's) name; a multi-lock's first name. */
    public String name() {
        return names.get(0);
    }

    /** Every name the grant holds: one, or a multi-lock's. */
    public List<String> names() {
        return names;
    }

    /** The holder the grant was made to. */
    public String holder() {
        return holder;
    }

    /** The secret that renew and release present. */
    public String secret() {
        return secret;
    }

    /** The lease's TTL as granted (under a session, the session's). */
    public Duration ttl() {
        return Duration.ofMillis(ttlMillis);
    }

    /** Whether this is a lock's shared grant. */
    public boolean shared() {
        return shared;
    }

    /** A permit's: the permits held once it was granted. */
    public int heldPermits() {
        return held;
    }

    /** The value the grant publishes (an election's). */
    public String value() {
        return value;
    }

    /** The session the grant lives under, or null. */
    public Session session() {
        return session;
    }

    /** The local deadline on the System.nanoTime clock; the server cannot have expired the lease before it. */
    public long deadlineNanos() {
        return keeper.deadline();
    }

    /** The time left before the local deadline, zero once passed. */
    public Duration remaining() {
        return Duration.ofNanos(Math.max(keeper.deadline() - System.nanoTime(), 0));
    }

    /**
     * Completes with why the grant was lost, before the server can expire it;
     * never for a release (or a close of its session), after which the
     * future stays incomplete and {@link #isLost()} is true.
     */
    public CompletableFuture<LossReason> lost() {
        keeper.checkDeadline();
        return lost;
    }

    /** Runs r, on the client's worker threads, once the grant is lost. */
    public void onLost(Runnable r) {
        lost.thenRunAsync(r, c.workers());
    }

    /**
     * True once the grant can no longer be trusted: lost, released, or its
     * session lost or closed. It checks the local deadline on each call.
     */
    public boolean isLost() {
        return isReleased() || !keeper.held() || lost.isDone();
    }

    /** Why the grant was lost, or null while it is held or after a release. */
    public LossReason lossReason() {
        keeper.checkDeadline();
        return lost.getNow(null);
    }

    /** Throws the loss (a {@link LeaseLostException}) if the grant is not held. */
    public void ensureHeld() {
        if (isLost()) {
            LossReason r = lossReason();
            throw r != null ? r.cause() : (LeaseLostException) FencerException.local("lease_lost", kind.noun + " " + names + " token " + token + " was released");
        }
    }

    private synchronized boolean isReleased() {
        return released;
    }

    /**
     * Renews now. A refusal ends the grant ({@link LeaseLostException}); other
     * errors leave it to its deadline. Under a session, renews the session.
     */
    public void renew() {
        ensureHeld();
        if (session != null) {
            session.renew();
            return;
        }
        keeper.renew(false);
    }

    /** Sends one renewal, retried across members until answered or deadline; returns its send time. */
    private long sendRenewal(long deadline) {
        String path = kind == Kind.MULTI ? "/v1/locks/renew" : FencerClient.path(kind.path, name(), "renew");
        Transport.Request r = new Transport.Request("POST", path);
        r.attemptTimeout = Duration.ofMillis(Math.max(ttlMillis / 3, 100));
        r.untilDeadline = true;
        r.deadline = deadline;
        r.body = Json.bytes(Json.object().put("lease", secret).put("token", token));
        Json a = Json.parse(c.transport().send(r).body(), "renew " + kind.noun + " " + names);
        Answers.checkRenewal(a, kind, name(), token, ttlMillis);
        return r.sent;
    }

    /** Proclaims value as the grant's published value (an election's leader's address, say). */
    public void proclaim(String newValue) {
        Transport.Request r = new Transport.Request("POST", FencerClient.path(kind.path, name(), "value"));
        r.body = Json.bytes(Json.object().put("lease", secret).put("token", token).put("value", newValue));
        Json a = Json.parse(c.transport().send(r).body(), "proclaim " + name());
        if (!name().equals(a.str("lock")) || a.num("token") != token) {
            throw FencerException.badAnswer("proclaim " + name(), "the answer names another grant");
        }
        value = a.str("value");
    }

    /**
     * Releases the grant and frees the name(s). Work under it should have
     * stopped: {@link #isLost()} is true from the start of the call. A
     * grant that had been lost already is still released if the server
     * holds it, and its loss is thrown. A second release does nothing.
     */
    public void release() {
        LossReason before = lossReason(); // outside the monitor: it may complete loss futures
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        if (session == null) {
            keeper.end();
        }
        c.releaseGrant(kind, name(), token, secret);
        if (before != null) {
            throw before.cause();
        }
    }

    /** Releases the grant: {@link #release()}. */
    @Override
    public void close() {
        release();
    }

    /** Gives back a grant the acquire could not confirm, and returns the exception to throw. */
    FencerException abandon(FencerException cause) {
        synchronized (this) {
            released = true;
        }
        keeper.end();
        String after;
        try {
            c.releaseGrant(kind, name(), token, secret);
            after = "released it";
        } catch (LeaseLostException e) {
            after = "it had ended already";
        } catch (FencerException e) {
            after = "its release failed too (" + e.getMessage() + "); the server frees it within " + ttlMillis + " ms";
        }
        String msg = kind.noun + " " + names + " granted with token " + token + ", but the grant could not be confirmed: "
                + cause.getMessage() + "; " + after;
        return FencerException.local(cause.code(), msg);
    }
}
