package io.fencer.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Keeper keeps one lease alive, a grant's or a session's, by the Go client's
 * rules (api/client/keeper.go): the local deadline is the send time
 * (System.nanoTime) of the last confirmed renewal, or of the acquire, plus
 * TTL minus the margin, so that it passes before the server can expire the
 * lease; renewals go out at about TTL/3 with jitter, so that two can fail
 * before it; a refused renewal ends the lease at once, any other failure
 * leaves it to the deadline. The deadline has a timer of its own, which no
 * renewal in flight delays, and is also checked on every look
 * ({@link #held()}), so that a process paused past it sees the loss first.
 */
final class Keeper {
    /** Renewer renews the lease once, retrying until answered or deadline, and returns that attempt's send time. */
    interface Renewer {
        long renew(long deadline);
    }

    private final long ttl;
    private final long margin;
    private final Renewer renewer;
    private final ScheduledExecutorService timers;
    private final ExecutorService workers;
    private final String what;
    final CompletableFuture<LossReason> lost = new CompletableFuture<>();

    private long confirmed;
    private long due;
    private boolean ended; // released or closed: not a loss
    private boolean keepAlive;
    private boolean renewing;
    private FencerException lastErr;
    private ScheduledFuture<?> deadlineTimer;
    private ScheduledFuture<?> renewTimer;

    Keeper(long ttlMillis, long start, Renewer renewer, FencerClient c, String what) {
        this.ttl = TimeUnit.MILLISECONDS.toNanos(ttlMillis);
        this.margin = margin(ttl);
        this.renewer = renewer;
        this.timers = c.timers();
        this.workers = c.workers();
        this.what = what;
        this.confirmed = start;
        this.due = renewAt(start);
    }

    /** The safety margin: a tenth of the TTL, at least 50 ms, at most half the TTL. */
    static long margin(long ttlNanos) {
        return Math.min(Math.max(ttlNanos / 10, TimeUnit.MILLISECONDS.toNanos(50)), ttlNanos / 2);
    }

    synchronized long deadline() {
        return confirmed + ttl - margin;
    }

    /** True while the lease is held; it reads the clock itself. */
    boolean held() {
        checkDeadline();
        synchronized (this) {
            return !ended && !lost.isDone();
        }
    }

    synchronized boolean ended() {
        return ended;
    }

    /** Starts the deadline timer and, with keepAlive, the renewals. */
    synchronized void start(boolean keepAlive) {
        this.keepAlive = keepAlive;
        schedule();
    }

    /** Ends the lease without a loss (released, or its session closed) and stops its timers. */
    void end() {
        synchronized (this) {
            if (lost.isDone()) {
                return;
            }
            ended = true;
            cancelTimers();
        }
    }

    void checkDeadline() {
        long now = System.nanoTime();
        long dl;
        FencerException le;
        synchronized (this) {
            if (ended || lost.isDone()) {
                return;
            }
            dl = confirmed + ttl - margin;
            le = lastErr;
        }
        if (now - dl >= 0) {
            String msg = what + ": lease expired locally (last confirmed " + TimeUnit.NANOSECONDS.toMillis(now - (dl - ttl + margin))
                    + " ms ago, ttl " + TimeUnit.NANOSECONDS.toMillis(ttl) + " ms, margin " + TimeUnit.NANOSECONDS.toMillis(margin) + " ms)";
            if (le != null) {
                msg += "; last renewal error: " + le.getMessage();
            }
            lose(LossReason.LEASE_LOST, msg);
        }
    }

    /** Ends the lease as lost; the first cause wins, and nothing after a release. */
    void lose(String code, String message) {
        LeaseLostException cause = (LeaseLostException) FencerException.local(code, message);
        synchronized (this) {
            if (ended || lost.isDone()) {
                return;
            }
            cancelTimers();
        }
        lost.complete(new LossReason(code, message, cause));
    }

    /** Records a renewal sent at sent, moving the deadline and the next renewal. */
    synchronized void confirm(long sent) {
        if (ended || lost.isDone() || sent - confirmed <= 0) {
            return;
        }
        confirmed = sent;
        lastErr = null;
        due = renewAt(sent);
        if (deadlineTimer != null) {
            schedule();
        }
    }

    private long renewAt(long sent) {
        long third = ttl / 3;
        return sent + third - third / 10 + ThreadLocalRandom.current().nextLong(third / 5 + 1);
    }

    private void schedule() {
        cancelTimers();
        long now = System.nanoTime();
        deadlineTimer = timers.schedule(this::checkDeadline, Math.max(confirmed + ttl - margin - now, 0), TimeUnit.NANOSECONDS);
        if (keepAlive && !renewing) {
            renewTimer = timers.schedule(() -> workers.execute(this::renewInBackground), Math.max(due - now, 0), TimeUnit.NANOSECONDS);
        }
    }

    private void cancelTimers() {
        if (deadlineTimer != null) {
            deadlineTimer.cancel(false);
        }
        if (renewTimer != null) {
            renewTimer.cancel(false);
        }
    }

    private void renewInBackground() {
        synchronized (this) {
            if (ended || lost.isDone() || renewing) {
                return;
            }
            renewing = true;
        }
        try {
            renew(true);
        } catch (FencerException e) {
            // Recorded for the loss message; the deadline rules.
        } finally {
            synchronized (this) {
                renewing = false;
                if (!ended && !lost.isDone()) {
                    schedule();
                }
            }
        }
    }

    /**
     * Sends one renewal, retried until answered or the local deadline passes
     * (by then the lease is lost, and a loss is final). A refusal ends the
     * lease; other errors, bad answers among them, leave it to the deadline.
     */
    void renew(boolean background) {
        long sent;
        try {
            sent = renewer.renew(deadline());
        } catch (FencerException e) {
            if (refused(e)) {
                lose(e instanceof RevokedException ? LossReason.REVOKED : LossReason.LEASE_LOST, what + ": renewal refused: " + e.getMessage());
                throw e;
            }
            synchronized (this) {
                lastErr = e;
                if (background) {
                    // Try again soon, not at once: the deadline still rules.
                    due = System.nanoTime() + Math.min(ttl / 10, TimeUnit.SECONDS.toNanos(1));
                }
            }
            checkDeadline();
            throw e;
        }
        confirm(sent);
    }

    /**
     * Renews a lease not handed out yet, whose start is stale (a grant after a
     * wait in the queue): not bounded by the deadline known so far (an
     * accepted renewal proves the lease current whenever it was sent), but by
     * a TTL after the grant arrived, when the server has expired it unless a
     * new leader restarted it.
     */
    void confirmFirst(long received) {
        long sent = renewer.renew(received + ttl);
        synchronized (this) {
            if (sent - confirmed > 0) {
                confirmed = sent;
                due = renewAt(sent);
            }
        }
        checkDeadline();
        if (lost.isDone()) {
            throw lost.join().cause();
        }
    }

    /** Whether the server answered with a definite no. */
    static boolean refused(FencerException e) {
        return e.status() >= 400 && e.status() < 500;
    }
}
