package io.fencer.client;

import java.time.Duration;

/**
 * AcquireOptions tune an acquire of a lock, a permit, an election or a
 * multi-lock: {@code new AcquireOptions().ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(5))}.
 * Zero values mean the defaults: a 10 s TTL, no wait (a held lock is
 * {@link LockHeldException} at once), holder "hostname-pid", exclusive mode.
 */
public final class AcquireOptions {
    /** The mode of a lock's grant. */
    public enum Mode {
        EXCLUSIVE, SHARED
    }

    Duration ttl = Duration.ofSeconds(10);
    Duration wait = Duration.ZERO;
    String holder = "";
    Duration lockDelay = Duration.ZERO;
    String value = "";
    String mode = "exclusive";
    boolean keepAlive = true;

    /** The lease's time to live, 100 ms to 24 h, in whole milliseconds (default 10 s). */
    public AcquireOptions ttl(Duration d) {
        ttl = d;
        return this;
    }

    /**
     * Queue for up to d (at most 60 s) while the lock is held (default 0). For
     * a campaign, the whole time to wait for election (0: until elected).
     */
    public AcquireOptions waitFor(Duration d) {
        wait = d;
        return this;
    }

    /** The holder's name, for humans reading lock status (default "hostname-pid"). */
    public AcquireOptions holder(String h) {
        holder = h;
        return this;
    }

    /** If this grant ends by expiry, nobody may acquire the lock for d (at most 60 s). */
    public AcquireOptions lockDelay(Duration d) {
        lockDelay = d;
        return this;
    }

    /** A value published with the grant (an election's leader address, say). */
    public AcquireOptions value(String v) {
        value = v;
        return this;
    }

    /** Shared (many holders, none exclusive) or exclusive (the default). */
    public AcquireOptions mode(Mode m) {
        mode = m == null ? "" : m.name().toLowerCase(java.util.Locale.ROOT);
        return this;
    }

    /** The mode by its wire name, "shared" or "exclusive"; any other is refused as invalid_mode. */
    public AcquireOptions mode(String m) {
        mode = m;
        return this;
    }

    boolean shared() {
        return "shared".equals(mode);
    }

    /** Leaves renewals to the caller ({@link Lease#renew()}); the local deadline still rules. */
    public AcquireOptions noKeepAlive() {
        keepAlive = false;
        return this;
    }

    AcquireOptions copy() {
        AcquireOptions o = new AcquireOptions();
        o.ttl = ttl;
        o.wait = wait;
        o.holder = holder;
        o.lockDelay = lockDelay;
        o.value = value;
        o.mode = mode;
        o.keepAlive = keepAlive;
        return o;
    }

    /** Refuses what the server would refuse, with the server's code, before anything is sent. */
    void check(boolean withTtl) {
        if (withTtl && (ttl == null || ttl.toMillis() < 100 || ttl.compareTo(Duration.ofHours(24)) > 0)) {
            throw FencerException.local("invalid_ttl", "ttl " + ttl + ": want 100ms to 24h");
        }
        if (wait == null || wait.isNegative() || wait.compareTo(Duration.ofSeconds(60)) > 0) {
            throw FencerException.local("invalid_wait", "wait " + wait + ": want 0 to 60s");
        }
        if (lockDelay == null || lockDelay.isNegative() || lockDelay.compareTo(Duration.ofSeconds(60)) > 0) {
            throw FencerException.local("invalid_lock_delay", "lock-delay " + lockDelay + ": want 0 to 60s");
        }
        if (!"shared".equals(mode) && !"exclusive".equals(mode)) {
            throw FencerException.local("invalid_mode", "mode \"" + mode + "\": want shared or exclusive");
        }
    }

    String holderOrDefault() {
        return holder == null || holder.isEmpty() ? FencerClient.defaultHolder() : holder;
    }
}
