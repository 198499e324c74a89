package io.fencer.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Transport sends the client's requests to the leader of one cluster, as the
 * Go client's transport does (api/client/doc.go): it caches the leader a
 * member names (GET /v1/cluster, or an answer's Fencer-Leader), leaves a
 * member that did not answer for another at once, backs off only after
 * answers that say to retry and after a round of members none of which
 * answered, and believes only 2xx answers. It never follows a redirect.
 */
final class Transport {
    /** Request is one logical call, sent in one or more attempts. */
    static final class Request {
        String method = "GET";
        String path;
        String query = "";
        byte[] body;
        String contentType;
        Map<String, String> headers = Map.of();
        /** Added to each attempt's timeout: an acquire's wait. */
        Duration extra = Duration.ZERO;
        /** Replaces the client's attempt timeout when set. */
        Duration attemptTimeout;
        /** When set, attempts go on until this System.nanoTime, not Retry's count. */
        boolean untilDeadline;
        long deadline = Long.MAX_VALUE;

        // Filled in by send.
        long firstSent;
        long sent;
        /** An earlier attempt may have taken effect although its answer was lost. */
        boolean uncertain;

        Request(String method, String path) {
            this.method = method;
            this.path = path;
        }
    }

    /** Response is a 2xx answer, read in full. */
    record Response(int status, HttpHeaders headers, byte[] body) {
    }

    private final List<String> endpoints;
    private final HttpClient http;
    private final Duration timeout;
    private final int attempts;
    private final long minBackoff;
    private final long maxBackoff;
    private final int maxAnswerBytes;
    private final String authorization;
    private final ScheduledExecutorService timers;

    private final Object mu = new Object();
    private String leader = ""; // base URL, "" when unknown
    private int next;

    Transport(FencerClient.Builder b) {
        this.endpoints = b.bases();
        this.timeout = b.timeout;
        this.attempts = b.attempts;
        this.minBackoff = b.minBackoff.toNanos();
        this.maxBackoff = Math.max(b.maxBackoff.toNanos(), minBackoff);
        this.maxAnswerBytes = b.maxAnswerBytes;
        this.authorization = b.authorization;
        this.timers = b.timers;
        this.http = HttpClient.newBuilder()
                .followRedirects(HttpClient.Redirect.NEVER)
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(1))
                .executor(b.workers)
                .build();
    }

    List<String> endpoints() {
        return endpoints;
    }

    Duration timeout() {
        return timeout;
    }

    /**
     * Sends r to the leader (or, none known, to a member, which forwards),
     * retrying what got no answer and answers that say to retry. A non-2xx
     * answer is thrown as its code's exception.
     */
    Response send(Request r) {
        FencerException last = null;
        String unanswered = null; // the member of the last attempt, if it did not answer
        int pauses = 0;
        int skipped = 0;
        for (int attempt = 1;; attempt++) {
            String base = target(unanswered);
            long sent = System.nanoTime();
            if (attempt == 1) {
                r.firstSent = sent;
            }
            HttpResponse<InputStream> resp = null;
            byte[] body = null;
            IOException err = null;
            try {
                resp = open(base, r);
                body = read(resp, r, base); // an answer cut off is one that did not arrive
            } catch (IOException e) {
                resp = null;
                err = e;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw FencerException.unavailable(r.method + " " + r.path + ": interrupted");
            }
            unanswered = null;
            if (resp != null) {
                follow(base, resp.headers().firstValue("Fencer-Leader").orElse(""));
                int status = resp.statusCode();
                if (!retryable(status, body)) {
                    r.sent = sent;
                    if (status / 100 == 2) {
                        return new Response(status, resp.headers(), body);
                    }
                    throw answerError(status, body, r);
                }
                // A forwarding member answers no_leader also when the
                // leader vanished mid-request: any 5xx may hide a landed write.
                last = answerError(status, body, r);
                r.uncertain = true;
            } else {
                last = FencerException.unavailable(r.method + " " + r.path + " via " + base + ": " + describe(err));
                if (!dialError(err)) {
                    r.uncertain = true;
                }
                unanswered = base;
            }
            forget(base);
            if (System.nanoTime() - r.deadline >= 0 || (!r.untilDeadline && attempt >= attempts)) {
                throw last;
            }
            if (unanswered != null && skipped < endpoints.size() - 1) {
                skipped++;
                continue; // no pause: another member answers now
            }
            skipped = 0;
            pauses++;
            if (!sleepUntil(r.deadline, backoff(pauses))) {
                throw last;
            }
        }
    }

    private FencerException answerError(int status, byte[] body, Request r) {
        String what = r.method + " " + r.path;
        try {
            return FencerException.ofAnswer(status, Json.MAPPER.readTree(body), what);
        } catch (IOException | RuntimeException e) {
            return FencerException.ofAnswer(status, Json.object(), what);
        }
    }

    private static boolean retryable(int status, byte[] body) {
        if (status == 502 || status == 504) {
            return true;
        }
        if (status == 503) {
            try {
                return !"internal".equals(Json.MAPPER.readTree(body).path("code").asText());
            } catch (IOException | RuntimeException e) {
                return true;
            }
        }
        return false;
    }

    /** Sends one attempt of r to base and hands back the open answer. */
    HttpResponse<InputStream> open(String base, Request r) throws IOException, InterruptedException {
        Duration t = r.attemptTimeout != null ? r.attemptTimeout : timeout;
        t = t.plus(r.extra);
        if (r.deadline != Long.MAX_VALUE) {
            long left = r.deadline - System.nanoTime();
            t = Duration.ofNanos(Math.max(Math.min(t.toNanos(), left), 1_000_000));
        }
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + r.path + (r.query.isEmpty() ? "" : "?" + r.query)))
                .timeout(t);
        if (r.body != null) {
            b.method(r.method, HttpRequest.BodyPublishers.ofByteArray(r.body));
            b.header("Content-Type", r.contentType != null ? r.contentType : "application/json");
        } else {
            b.method(r.method, HttpRequest.BodyPublishers.noBody());
        }
        r.headers.forEach(b::header);
        if (!authorization.isEmpty()) {
            b.header("Authorization", authorization);
        }
        CompletableFuture<HttpResponse<InputStream>> f = http.sendAsync(b.build(), HttpResponse.BodyHandlers.ofInputStream());
        boolean watch = !r.path.equals("/v1/cluster") && endpoints.size() > 1 && base.equals(leader());
        long every = LEADER_CHECK_AFTER;
        for (;;) {
            try {
                return watch ? f.get(every, TimeUnit.NANOSECONDS) : f.get();
            } catch (ExecutionException e) {
                throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
            } catch (TimeoutException e) {
                String other = otherLeader(base);
                if (!other.isEmpty()) {
                    f.cancel(true);
                    synchronized (mu) {
                        if (leader.equals(base)) {
                            leader = other;
                        }
                    }
                    throw new IOException(base + " did not answer: the other members name another leader");
                }
                every = Math.min(2 * every, LEADER_CHECK_EVERY);
            } catch (InterruptedException e) {
                f.cancel(true);
                throw e;
            }
        }
    }

    /**
     * An attempt at the leader unanswered after LEADER_CHECK_AFTER asks the
     * other members who leads, then again at doubling intervals up to
     * LEADER_CHECK_EVERY: once they name another leader the attempt is given
     * up as one whose answer was lost, so that a leader that hangs without
     * closing its connections (a frozen process or host) holds a request only
     * until the cluster has elected another.
     */
    private static final long LEADER_CHECK_AFTER = TimeUnit.SECONDS.toNanos(1);
    private static final long LEADER_CHECK_EVERY = TimeUnit.SECONDS.toNanos(8);

    String leader() {
        synchronized (mu) {
            return leader;
        }
    }

    /** The first leader another member than base names, if it is not base; "" otherwise. */
    private String otherLeader(String base) {
        for (String ep : endpoints) {
            if (ep.equals(base)) {
                continue;
            }
            String l = leaderOf(ep);
            if (!l.isEmpty()) {
                return l.equals(base) ? "" : l;
            }
        }
        return "";
    }

    /** Reads an answer's body, refusing one longer than the client's limit without reading it whole. */
    private byte[] read(HttpResponse<InputStream> resp, Request r, String base) throws IOException {
        // The request's timeout ends with the headers: a body that drips
        // is cut off by a timer of its own.
        Duration t = (r.attemptTimeout != null ? r.attemptTimeout : timeout).plus(r.extra);
        InputStream body = resp.body();
        ScheduledFuture<?> cut = timers.schedule(() -> close(body), t.toNanos(), TimeUnit.NANOSECONDS);
        try (InputStream in = body) {
            byte[] b = in.readNBytes(maxAnswerBytes + 1);
            if (b.length > maxAnswerBytes) {
                throw FencerException.badAnswer(r.method + " " + r.path + " via " + base,
                        "the answer is longer than the client's limit of " + maxAnswerBytes + " bytes");
            }
            return b;
        } finally {
            cut.cancel(false);
        }
    }

    private static void close(InputStream in) {
        try {
            in.close();
        } catch (IOException e) {
            // Closing is all we wanted.
        }
    }

    /** The base URL of the next attempt: the cached leader, a discovered one, or the next member. */
    String target(String unanswered) {
        synchronized (mu) {
            if (!leader.isEmpty() && !leader.equals(unanswered)) {
                return leader;
            }
        }
        if (unanswered == null) {
            String l = discover();
            if (!l.isEmpty()) {
                return l;
            }
        }
        synchronized (mu) {
            for (int i = 0; i < endpoints.size(); i++) {
                String ep = endpoints.get(Math.floorMod(next, endpoints.size()));
                if (!ep.equals(unanswered)) {
                    return ep;
                }
                next++;
            }
            return endpoints.get(Math.floorMod(next, endpoints.size()));
        }
    }

    /** Asks the members in turn who leads, and caches the answer. */
    private String discover() {
        int start;
        synchronized (mu) {
            start = next;
        }
        for (int i = 0; i < endpoints.size(); i++) {
            String ep = endpoints.get(Math.floorMod(start + i, endpoints.size()));
            String l = leaderOf(ep);
            if (!l.isEmpty()) {
                synchronized (mu) {
                    leader = l;
                    next = start + i;
                }
                return l;
            }
        }
        return "";
    }

    /** Asks the member at base, and only it, for its status: the leader's base URL, or "". */
    private String leaderOf(String base) {
        try {
            Json st = clusterStatus(base);
            String id = st.str("leader");
            for (Json m : st.list("members")) {
                if (!id.isEmpty() && id.equals(m.str("id")) && !m.str("http_addr").isEmpty()) {
                    return scheme(base) + m.str("http_addr");
                }
            }
        } catch (FencerException e) {
            // Not this member: ask the next.
        }
        return "";
    }

    /** GET /v1/cluster from base alone. */
    Json clusterStatus(String base) {
        Request r = new Request("GET", "/v1/cluster");
        r.attemptTimeout = timeout.compareTo(Duration.ofSeconds(2)) < 0 ? timeout : Duration.ofSeconds(2);
        try {
            HttpResponse<InputStream> resp = open(base, r);
            byte[] body = read(resp, r, base);
            if (resp.statusCode() != 200) {
                throw answerError(resp.statusCode(), body, r);
            }
            return Json.parse(body, "GET /v1/cluster via " + base);
        } catch (IOException e) {
            throw FencerException.unavailable("GET /v1/cluster via " + base + ": " + describe(e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw FencerException.unavailable("interrupted");
        }
    }

    /** Caches the leader a forwarding member named in an answer from base. */
    private void follow(String base, String leaderAddr) {
        if (leaderAddr.isEmpty()) {
            return;
        }
        synchronized (mu) {
            leader = scheme(base) + leaderAddr;
        }
    }

    /** Drops base as the leader after it failed, and moves on to the next member. */
    private void forget(String base) {
        synchronized (mu) {
            if (leader.equals(base)) {
                leader = "";
            }
            next++;
        }
    }

    private static String scheme(String base) {
        return base.substring(0, base.indexOf("://") + 3);
    }

    /** The pause before retry n: exponential, capped, with equal jitter. */
    long backoff(int n) {
        long d = minBackoff << Math.min(n - 1, 20);
        if (d <= 0 || d > maxBackoff) {
            d = maxBackoff;
        }
        return d / 2 + ThreadLocalRandom.current().nextLong(d / 2 + 1);
    }

    /** Sleeps nanos, but not past deadline; false when the deadline came first. */
    static boolean sleepUntil(long deadline, long nanos) {
        long now = System.nanoTime();
        if (deadline != Long.MAX_VALUE && deadline - now < nanos) {
            nanos = Math.max(deadline - now, 0);
            sleepNanos(nanos);
            return false;
        }
        sleepNanos(nanos);
        return true;
    }

    static void sleepNanos(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw FencerException.unavailable("interrupted");
        }
    }

    /** Whether err happened before anything was sent. */
    private static boolean dialError(IOException err) {
        for (Throwable t = err; t != null; t = t.getCause()) {
            if (t instanceof ConnectException || t instanceof HttpConnectTimeoutException) {
                return true;
            }
        }
        return false;
    }

    static String describe(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }
}
