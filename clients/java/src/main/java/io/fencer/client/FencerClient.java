package io.fencer.client;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.InetAddress;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * FencerClient is the Java client of fencer's HTTP API. It finds and follows
 * the leader, retries what is safe to retry (an acquire with one request id
 * across all its attempts, so a lost answer never costs a second token), and
 * keeps leases alive on daemon threads.
 *
 * <pre>{@code
 * FencerClient c = FencerClient.builder().endpoints("10.0.0.1:7001", "10.0.0.2:7001").build();
 * try (Lease lease = c.acquire("billing-run", new AcquireOptions().ttl(Duration.ofSeconds(10)))) {
 *     c.put("billing-state", state, lease.token(), "billing-run");
 * }
 * }</pre>
 *
 * It is safe for concurrent use; {@link #close()} stops its threads.
 */
public final class FencerClient implements AutoCloseable {
    /** FROM_NOW, as a watch's {@code since}, starts at the index the first member reached has applied. */
    public static final long FROM_NOW = -1;

    /** The client's version, as the conformance agent reports it. */
    public static final String VERSION = "0.1.0";

    private static final SecureRandom RANDOM = new SecureRandom();

    /** Builder configures a client. */
    public static final class Builder {
        List<String> endpoints = new ArrayList<>();
        Duration timeout = Duration.ofSeconds(10);
        int attempts = 8;
        Duration minBackoff = Duration.ofMillis(50);
        Duration maxBackoff = Duration.ofSeconds(1);
        int maxAnswerBytes = 4 << 20;
        String authorization = "";
        ExecutorService workers;
        ScheduledExecutorService timers;

        /** The members: host:port (http) or http(s) URLs. At least one. */
        public Builder endpoints(String... eps) {
            endpoints = List.of(eps);
            return this;
        }

        /** The members, as a list. */
        public Builder endpoints(List<String> eps) {
            endpoints = List.copyOf(eps);
            return this;
        }

        /** Bounds each attempt of a request (default 10 s); an acquire's wait is added. */
        public Builder timeout(Duration d) {
            timeout = d;
            return this;
        }

        /** The most attempts per request (default 8). */
        public Builder attempts(int n) {
            attempts = n;
            return this;
        }

        /** The pause before the first retry (default 50 ms), doubling up to max (default 1 s), with jitter. */
        public Builder backoff(Duration min, Duration max) {
            minBackoff = min;
            maxBackoff = max;
            return this;
        }

        /** A bearer token sent with every request. */
        public Builder bearerToken(String token) {
            authorization = "Bearer " + token;
            return this;
        }

        /** The longest answer the client reads (default 4 MiB); a longer one is a bad answer. */
        public Builder maxAnswerBytes(int n) {
            maxAnswerBytes = n;
            return this;
        }

        public FencerClient build() {
            if (endpoints.isEmpty()) {
                throw new IllegalArgumentException("fencer: no endpoints");
            }
            if (timeout == null || timeout.isNegative() || timeout.isZero() || attempts < 1) {
                throw new IllegalArgumentException("fencer: timeout and attempts must be positive");
            }
            return new FencerClient(this);
        }

        List<String> bases() {
            List<String> out = new ArrayList<>();
            for (String ep : endpoints) {
                String u = ep.contains("://") ? ep : "http://" + ep;
                if (!(u.startsWith("http://") || u.startsWith("https://")) || u.substring(u.indexOf("://") + 3).isEmpty()) {
                    throw new IllegalArgumentException("fencer: endpoint \"" + ep + "\": want host:port or an http(s) URL");
                }
                int slash = u.indexOf('/', u.indexOf("://") + 3);
                out.add(slash < 0 ? u : u.substring(0, slash));
            }
            return Collections.unmodifiableList(out);
        }
    }

    private final ScheduledExecutorService timers;
    private final ExecutorService workers;
    private final Transport tr;

    private FencerClient(Builder b) {
        this.timers = Executors.newScheduledThreadPool(1, daemons("fencer-timer"));
        this.workers = Executors.newCachedThreadPool(daemons("fencer-worker"));
        b.workers = workers;
        b.timers = timers;
        this.tr = new Transport(b);
    }

    /** A new builder. */
    public static Builder builder() {
        return new Builder();
    }

    private static ThreadFactory daemons(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    ScheduledExecutorService timers() {
        return timers;
    }

    ExecutorService workers() {
        return workers;
    }

    Transport transport() {
        return tr;
    }

    /** Stops the client's threads; leases it holds are no longer renewed and will be lost. */
    @Override
    public void close() {
        timers.shutdownNow();
        workers.shutdownNow();
    }

    // Locks, permits, elections, multi-locks.

    /**
     * Acquires lock name, waiting up to {@code opts.waitFor} if it is held,
     * and keeps the lease alive until release or loss. A held lock after the
     * wait is {@link LockHeldException}.
     */
    public Lease acquire(String name, AcquireOptions opts) {
        return acquireKind(Lease.Kind.LOCK, List.of(name), 0, opts);
    }

    /** Acquires a permit of semaphore name, which has limit permits. */
    public Lease acquirePermit(String name, int limit, AcquireOptions opts) {
        return acquireKind(Lease.Kind.PERMIT, List.of(name), limit, opts);
    }

    /** Acquires every one of names, or none (lock_held naming the first held), with one token and secret. */
    public Lease multiLock(List<String> names, AcquireOptions opts) {
        return acquireKind(Lease.Kind.MULTI, names, 0, opts);
    }

    /**
     * Campaigns in election name with value, waiting until elected (or for
     * {@code opts.waitFor} in all, then {@link LockHeldException}); the token
     * is the leader's term.
     */
    public Lease campaign(String name, String value, AcquireOptions opts) {
        return campaign(o -> acquire(name, o), value, opts);
    }

    static Lease campaign(Function<AcquireOptions, Lease> acquire, String value, AcquireOptions opts) {
        AcquireOptions o = (opts == null ? new AcquireOptions() : opts.copy()).value(value);
        long budget = o.wait.toNanos();
        long deadline = System.nanoTime() + budget;
        for (;;) {
            long left = budget == 0 ? Duration.ofSeconds(60).toNanos() : deadline - System.nanoTime();
            o.waitFor(Duration.ofMillis(Math.max(Math.min(left, Duration.ofSeconds(60).toNanos()), 0) / 1_000_000));
            try {
                return acquire.apply(o);
            } catch (LockHeldException | FencerTimeoutException | LockDelayException e) {
                if (budget != 0 && System.nanoTime() - deadline >= 0) {
                    throw e;
                }
                if (e instanceof LockDelayException) {
                    Transport.sleepNanos(Duration.ofMillis(Math.max(e.retryAfterMillis(), 1)).toNanos());
                }
                // Still somebody else's term: campaign on.
            }
        }
    }

    private Lease acquireKind(Lease.Kind kind, List<String> names, int limit, AcquireOptions opts) {
        AcquireOptions o = opts == null ? new AcquireOptions() : opts;
        o.check(true);
        String holder = o.holderOrDefault();
        String requestId = requestId();
        ObjectNode body = acquireBody(o, holder, requestId, kind, limit, true);
        String p = kind == Lease.Kind.MULTI ? "/v1/locks/acquire" : path(kind.path, names.get(0), "acquire");
        if (kind == Lease.Kind.MULTI) {
            body.putPOJO("names", names);
        }
        Transport.Request r = new Transport.Request("POST", p);
        r.extra = o.wait;
        r.body = Json.bytes(body);
        Json g = grantOf(r, kind, names);
        // A grant that does not match the request is not used: the client
        // cannot tell what, if anything, it holds; one the server did make
        // expires after its TTL.
        Answers.checkGrant(g, kind, names, holder, o.ttl.toMillis(), requestId);
        if (kind == Lease.Kind.LOCK) {
            Answers.checkMode(g, body.path("mode").asText(""));
        }
        if (kind == Lease.Kind.PERMIT && (g.num("limit") != limit || g.num("held") < 1 || g.num("held") > limit)) {
            throw FencerException.badAnswer("acquire semaphore " + names.get(0), "the answer's limit or held count does not match");
        }
        return hold(g, kind, names, r, o.keepAlive);
    }

    ObjectNode acquireBody(AcquireOptions o, String holder, String requestId, Lease.Kind kind, int limit, boolean withTtl) {
        ObjectNode body = Json.object().put("holder", holder).put("wait_ms", o.wait.toMillis()).put("request_id", requestId);
        if (withTtl) {
            body.put("ttl_ms", o.ttl.toMillis());
        }
        if (!o.lockDelay.isZero()) {
            body.put("lock_delay_ms", o.lockDelay.toMillis());
        }
        if (!o.value.isEmpty()) {
            body.put("value", o.value);
        }
        if (kind == Lease.Kind.PERMIT) {
            body.put("limit", limit);
        } else if (o.shared()) {
            body.put("mode", "shared");
        }
        return body;
    }

    /** Sends an acquire and parses its grant (a permit's answer names its semaphore). */
    Json grantOf(Transport.Request r, Lease.Kind kind, List<String> names) {
        return Json.parse(tr.send(r).body(), "acquire " + kind.noun + " " + names);
    }

    /**
     * Makes the Lease of a grant r asked for. The server starts the lease
     * when it applies the grant, after the request was sent: the attempt
     * that answered, or for a retry answered with an earlier grant, the
     * first attempt. When that is older than TTL/3 as the grant arrives
     * (a wait in the queue, slow retries), renew once and measure the lease
     * from that renewal; if it fails, give the grant back.
     */
    private Lease hold(Json g, Lease.Kind kind, List<String> names, Transport.Request r, boolean keepAlive) {
        long start = g.bool("existing") ? r.firstSent : r.sent;
        Lease l = new Lease(this, kind, names, g, start, null);
        long received = System.nanoTime();
        if (received - start > Duration.ofMillis(g.num("ttl_ms")).toNanos() / 3) {
            try {
                l.keeper.confirmFirst(received);
            } catch (FencerException e) {
                throw l.abandon(e);
            }
        }
        l.keeper.start(keepAlive);
        return l;
    }

    /** Releases a grant by its secret, retried freely: a repeat that finds it gone after a lost answer is success. */
    void releaseGrant(Lease.Kind kind, String name, long token, String secret) {
        String p = kind == Lease.Kind.MULTI ? "/v1/locks/release" : path(kind.path, name, "release");
        Transport.Request r = new Transport.Request("POST", p);
        r.body = Json.bytes(Json.object().put("lease", secret).put("token", token));
        try {
            tr.send(r);
        } catch (LeaseLostException e) {
            if (!(r.uncertain && !(e instanceof RevokedException))) {
                throw e;
            }
        }
    }

    /**
     * Releases lock name's grant known only by its token and secret, as a
     * tool that keeps grants itself does; nothing tracks its deadline. A
     * name of a multi-lock is refused ({@link MultiGrantException}): its
     * names end together.
     */
    public void releaseRaw(String name, long token, String secret) {
        releaseGrant(Lease.Kind.LOCK, name, token, secret);
    }

    /** The election's leader; {@link NotFoundException} when it has none. */
    public Leadership leader(String name) {
        LockStatus st = lock(name);
        if (!st.held()) {
            throw new NotFoundException("election " + name + " has no leader", "not_found", 0, null);
        }
        return new Leadership(st.holder(), st.token(), st.value());
    }

    /**
     * Observes election name: the listener gets its leader now (if any) and
     * each change of leader or value after, from a list and a watch from the
     * list's index, with no gap.
     */
    public Watch observe(String name, Consumer<Leadership> onLeader, Consumer<FencerException> onError) {
        Transport.Request r = new Transport.Request("GET", path("locks", name, ""));
        Transport.Response resp = tr.send(r);
        LockStatus st = LockStatus.of(Json.parse(resp.body(), "GET " + r.path));
        long index = resp.headers().firstValue("Fencer-Index").map(Long::parseLong).orElse(0L);
        Leadership[] last = {st.held() ? new Leadership(st.holder(), st.token(), st.value()) : null};
        if (last[0] != null) {
            onLeader.accept(last[0]);
        }
        return watch(name, index, ev -> {
            if (!ev.lock().equals(name)) {
                return; // another lock with name as a prefix
            }
            if (ev.type().equals("acquired") || ev.type().equals("handed_off") || ev.type().equals("value_set")) {
                Leadership l = new Leadership(ev.holder(), ev.token(), ev.value());
                if (!l.equals(last[0])) {
                    last[0] = l;
                    onLeader.accept(l);
                }
            }
        }, onError);
    }

    // Sessions.

    /** Creates a session of ttl for holder ("" for hostname-pid) and keeps it alive. */
    public Session newSession(String holder, Duration ttl) {
        if (ttl == null || ttl.toMillis() < 100 || ttl.compareTo(Duration.ofHours(24)) > 0) {
            throw FencerException.local("invalid_ttl", "session ttl " + ttl + ": want 100ms to 24h");
        }
        String h = holder == null || holder.isEmpty() ? defaultHolder() : holder;
        String requestId = requestId();
        Transport.Request r = new Transport.Request("POST", "/v1/sessions");
        r.body = Json.bytes(Json.object().put("holder", h).put("ttl_ms", ttl.toMillis()).put("request_id", requestId));
        Json s = Json.parse(tr.send(r).body(), "create a session");
        if (s.num("session") == 0 || !s.str("holder").equals(h) || !Answers.secret(s.str("lease"))
                || s.num("ttl_ms") <= 0 || s.num("ttl_ms") > ttl.toMillis()
                || (!s.str("request_id").isEmpty() && !s.str("request_id").equals(requestId))) {
            throw FencerException.badAnswer("create a session", "the answer is not the session asked for");
        }
        Session session = new Session(this, s, s.bool("existing") ? r.firstSent : r.sent);
        session.keeper.start(true);
        return session;
    }

    // The fenced store.

    /**
     * Writes value to key fenced by token: stored only if token is greater
     * than the key's last one ({@link StaleTokenException} otherwise) and,
     * with lock (null for none), is that lock's current grant. After a lost
     * answer a repeat is refused as stale if the first landed: that is
     * {@link OutcomeUnknownException}, not a misleading stale token.
     */
    public void put(String key, byte[] value, long token, String lock) {
        if (token <= 0) {
            throw FencerException.local("invalid_token", "token " + token + ": want 1 to 2^63-1");
        }
        Transport.Request r = new Transport.Request("PUT", path("kv", key, ""));
        r.body = value;
        r.contentType = "application/octet-stream";
        r.headers = lock == null || lock.isEmpty() ? Map.of("Fencing-Token", Long.toString(token))
                : Map.of("Fencing-Token", Long.toString(token), "Fencing-Lock", lock);
        Json a;
        try {
            a = Json.parse(tr.send(r).body(), "put " + key);
        } catch (StaleTokenException e) {
            if (r.uncertain) {
                throw new OutcomeUnknownException("put " + key + " token " + token + ": an earlier attempt's answer was lost and the retry was refused as stale: the write may have been stored",
                        "outcome_unknown", 0, null);
            }
            throw e;
        }
        Answers.checkPut(a, key, token);
    }

    /** Writes a UTF-8 string: {@link #put(String, byte[], long, String)}. */
    public void put(String key, String value, long token, String lock) {
        put(key, value.getBytes(StandardCharsets.UTF_8), token, lock);
    }

    /** A fenced key's value and the token of the write that stored it; {@link NotFoundException} when absent. */
    public KvValue get(String key) {
        Transport.Response resp = tr.send(new Transport.Request("GET", path("kv", key, "")));
        String t = resp.headers().firstValue("Fencing-Token").orElse("");
        long token;
        try {
            token = t.matches("[1-9][0-9]{0,18}") ? Long.parseLong(t) : 0;
        } catch (NumberFormatException e) {
            token = 0;
        }
        if (token == 0) {
            throw FencerException.badAnswer("get " + key, "Fencing-Token \"" + t + "\" is not a token");
        }
        return new KvValue(resp.body(), token);
    }

    /** Deletes a key and its mark (operators only with an ACL); returns the mark it had. */
    public long delete(String key) {
        Json a = Json.parse(tr.send(new Transport.Request("DELETE", path("kv", key, ""))).body(), "delete " + key);
        return a.num("last_token");
    }

    // Reads.

    /** Lock name and its grant, if held. */
    public LockStatus lock(String name) {
        Transport.Request r = new Transport.Request("GET", path("locks", name, ""));
        return LockStatus.of(Json.parse(tr.send(r).body(), "GET " + r.path));
    }

    /** Whether token is lock name's current grant. */
    public CheckResult check(String name, long token) {
        if (token <= 0) {
            throw FencerException.local("invalid_token", "token " + token + ": want 1 to 2^63-1");
        }
        Transport.Request r = new Transport.Request("GET", path("locks", name, "check"));
        r.query = "token=" + token;
        Json a = Json.parse(tr.send(r).body(), "check " + name);
        return new CheckResult(a.bool("current"), a.num("token"), a.str("mode"));
    }

    /** Whether token is a permit semaphore name holds now. */
    public boolean checkPermit(String name, long token) {
        if (token <= 0) {
            throw FencerException.local("invalid_token", "token " + token + ": want 1 to 2^63-1");
        }
        Transport.Request r = new Transport.Request("GET", path("semaphores", name, "check"));
        r.query = "token=" + token;
        return Json.parse(tr.send(r).body(), "check permit " + name).bool("current");
    }

    /** Lock name's last grants, newest first, as the server lists them. */
    public List<GrantRecord> history(String name) {
        Transport.Request r = new Transport.Request("GET", path("locks", name, "history"));
        return Json.parse(tr.send(r).body(), "history " + name).list("grants").stream().map(GrantRecord::of).toList();
    }

    /** Which lock (or semaphore) and holder got token, and how the grant ended. */
    public GrantRecord tokenInfo(long token) {
        if (token <= 0) {
            throw FencerException.local("invalid_token", "token " + token + ": want 1 to 2^63-1");
        }
        return GrantRecord.of(Json.parse(tr.send(new Transport.Request("GET", "/v1/tokens/" + token)).body(), "token " + token));
    }

    // Revoke (operators).

    /** Ends lock name's grant with token now, as an expiry would. */
    public void revokeLock(String name, long token) {
        revoke(path("locks", name, "revoke"), Json.bytes(Json.object().put("token", token)));
    }

    /** Ends semaphore name's permit with token now. */
    public void revokePermit(String name, long token) {
        revoke(path("semaphores", name, "revoke"), Json.bytes(Json.object().put("token", token)));
    }

    /** Ends session id and every grant under it now. */
    public void revokeSession(long id) {
        revoke("/v1/sessions/" + id + "/revoke", null);
    }

    private void revoke(String p, byte[] body) {
        Transport.Request r = new Transport.Request("POST", p);
        r.body = body == null ? new byte[0] : body;
        tr.send(r);
    }

    // Watch.

    /**
     * Watches the changes of locks, semaphores and keys starting with prefix
     * ("" for all) after index since ({@link #FROM_NOW} for now), each
     * delivered once and in order to onEvent on the watch's own thread,
     * across members: a dropped stream is resumed at another member with
     * Last-Event-ID. onError gets the error that ends the watch.
     */
    public Watch watch(String prefix, long since, Consumer<Event> onEvent, Consumer<FencerException> onError) {
        Watch w = new Watch(tr, prefix == null ? "" : prefix, since, onEvent, onError);
        w.start();
        return w;
    }

    // Helpers.

    static String path(String kind, String name, String op) {
        String p = "/v1/" + kind + "/" + escape(name);
        return op.isEmpty() ? p : p + "/" + op;
    }

    /** Escapes a path segment: every byte but the unreserved ones. */
    static String escape(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20").replace("*", "%2A").replace("%7E", "~");
    }

    static String requestId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /** "hostname-pid". */
    static String defaultHolder() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            host = "unknown";
        }
        return host + "-" + ProcessHandle.current().pid();
    }
}
