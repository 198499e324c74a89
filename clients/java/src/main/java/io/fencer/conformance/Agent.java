package io.fencer.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fencer.client.AcquireOptions;
import io.fencer.client.Event;
import io.fencer.client.FencerClient;
import io.fencer.client.FencerException;
import io.fencer.client.GrantRecord;
import io.fencer.client.KvValue;
import io.fencer.client.Lease;
import io.fencer.client.Leadership;
import io.fencer.client.Session;
import io.fencer.client.Watch;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Agent is the Java client's conformance agent (test/conformance/PROTOCOL.md):
 * it reads one JSON request a line on stdin, runs each on a thread of its own
 * through the client's public API only, and writes answers and events, one
 * JSON object a line, on stdout under one lock. Diagnostics go to stderr.
 */
public final class Agent {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final FencerClient client;
    private final PrintStream out;
    private final Map<String, Lease> leases = new ConcurrentHashMap<>();
    private final Map<String, Session> sessions = new ConcurrentHashMap<>();
    private final Map<String, Watch> watches = new ConcurrentHashMap<>();
    private final AtomicInteger handles = new AtomicInteger();

    private Agent(FencerClient client, PrintStream out) {
        this.client = client;
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        String addrs = System.getenv("FENCER_ADDRS");
        if (addrs == null || addrs.isBlank()) {
            System.err.println("conformance agent: FENCER_ADDRS is not set");
            System.exit(2);
        }
        PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err); // nothing but protocol lines on stdout
        FencerClient c = FencerClient.builder().endpoints(Arrays.asList(addrs.split(","))).build();
        Agent a = new Agent(c, stdout);
        a.emit(JSON.createObjectNode().put("event", "ready").put("client", "java").put("version", FencerClient.VERSION));
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "agent-op");
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null;) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode req;
            try {
                req = JSON.readTree(line);
            } catch (IOException e) {
                System.err.println("conformance agent: not JSON: " + line);
                continue;
            }
            pool.execute(() -> a.handle(req));
        }
        System.exit(0);
    }

    private void emit(ObjectNode line) {
        String s;
        try {
            s = JSON.writeValueAsString(line);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        synchronized (out) {
            out.print(s + "\n");
            out.flush();
        }
    }

    private void handle(JsonNode req) {
        long id = req.path("id").asLong();
        String op = req.path("op").asText();
        JsonNode a = req.path("args");
        ObjectNode line = JSON.createObjectNode().put("id", id);
        try {
            ObjectNode result = run(op, a);
            line.put("ok", true).set("result", result);
            emit(line);
            if (op.equals("exit")) {
                System.exit(0);
            }
        } catch (FencerException e) {
            line.put("ok", false).set("error", JSON.createObjectNode()
                    .put("code", e.code()).put("class", e.getClass().getSimpleName()).put("message", String.valueOf(e.getMessage())));
            emit(line);
        } catch (UnsupportedOp e) {
            line.put("ok", false).set("error", JSON.createObjectNode()
                    .put("code", "unsupported").put("class", "UnsupportedOp").put("message", e.getMessage()));
            emit(line);
        } catch (RuntimeException e) {
            System.err.println("conformance agent: op " + op + ": " + e);
            line.put("ok", false).set("error", JSON.createObjectNode()
                    .put("code", "internal").put("class", e.getClass().getSimpleName()).put("message", String.valueOf(e.getMessage())));
            emit(line);
        }
    }

    private ObjectNode run(String op, JsonNode a) {
        ObjectNode r = JSON.createObjectNode();
        switch (op) {
            case "acquire" -> {
                AcquireOptions o = options(a);
                if (a.hasNonNull("mode")) {
                    o.mode(a.get("mode").asText());
                }
                Session s = session(a);
                Lease l = s != null ? s.lock(a.path("name").asText(), o) : client.acquire(a.path("name").asText(), o);
                r.put("handle", hold(l)).put("token", l.token()).put("ttl_ms", l.ttl().toMillis());
            }
            case "multi_acquire" -> {
                List<String> names = new ArrayList<>();
                a.path("names").forEach(n -> names.add(n.asText()));
                Lease l = client.multiLock(names, options(a));
                r.put("handle", hold(l)).put("token", l.token());
            }
            case "sem_acquire" -> {
                Session s = session(a);
                int limit = a.path("limit").asInt();
                Lease l = s != null ? s.acquirePermit(a.path("name").asText(), limit, options(a))
                        : client.acquirePermit(a.path("name").asText(), limit, options(a));
                r.put("handle", hold(l)).put("token", l.token());
            }
            case "campaign" -> {
                Session s = session(a);
                String value = a.path("value").asText();
                Lease l = s != null ? s.campaign(a.path("name").asText(), value, options(a))
                        : client.campaign(a.path("name").asText(), value, options(a));
                r.put("handle", hold(l)).put("token", l.token());
            }
            case "proclaim" -> lease(a).proclaim(a.path("value").asText());
            case "leader" -> {
                Leadership l = client.leader(a.path("name").asText());
                r.put("holder", l.holder()).put("value", l.value()).put("token", l.token());
            }
            case "release" -> {
                Lease l = lease(a);
                if (a.hasNonNull("name")) {
                    client.releaseRaw(a.get("name").asText(), l.token(), l.secret());
                } else {
                    l.release();
                }
            }
            case "lease_state" -> {
                String h = a.path("handle").asText();
                Lease l = leases.get(h);
                if (l != null) {
                    r.put("lost", l.isLost()).put("token", l.token());
                } else {
                    r.put("lost", sessionOf(h).isLost());
                }
            }
            case "session_open" -> {
                Session s = client.newSession(a.path("holder").asText(), Duration.ofMillis(a.path("ttl_ms").asLong(10_000)));
                String h = "s" + handles.incrementAndGet();
                sessions.put(h, s);
                r.put("session", h).put("id", s.id());
            }
            case "session_close" -> sessionOf(a.path("session").asText()).closeSession();
            case "put" -> {
                long token = a.path("token").asLong(0);
                String lock = a.hasNonNull("lock") ? a.get("lock").asText() : null;
                client.put(a.path("key").asText(), a.path("value").asText(), token, lock);
                r.put("token", token);
            }
            case "get" -> {
                KvValue v = client.get(a.path("key").asText());
                r.put("value", new String(v.value(), StandardCharsets.UTF_8)).put("token", v.token());
            }
            case "check" -> {
                String name = a.path("name").asText();
                boolean current = client.check(name, a.path("token").asLong()).current();
                r.put("current", current).put("holder", client.lock(name).holder());
            }
            case "token_info" -> {
                GrantRecord g = client.tokenInfo(a.path("token").asLong());
                boolean permit = !g.semaphore().isEmpty();
                r.put("kind", permit ? "semaphore" : "lock").put("name", permit ? g.semaphore() : g.lock()).put("holder", g.holder());
                if (!g.mode().isEmpty()) {
                    r.put("mode", g.mode());
                }
            }
            case "history" -> {
                List<GrantRecord> grants = new ArrayList<>(client.history(a.path("name").asText()));
                Collections.reverse(grants); // the server lists the newest first
                ArrayNode list = r.putArray("grants");
                for (GrantRecord g : grants) {
                    list.addObject().put("token", g.token()).put("holder", g.holder()).put("ended", g.ended());
                }
            }
            case "revoke" -> {
                String kind = a.path("kind").asText();
                String name = a.path("name").asText();
                switch (kind) {
                    case "lock" -> client.revokeLock(name, a.path("token").asLong());
                    case "semaphore" -> client.revokePermit(name, a.path("token").asLong());
                    case "session" -> client.revokeSession(sessions.containsKey(name) ? sessions.get(name).id() : Long.parseLong(name));
                    default -> throw new IllegalArgumentException("revoke kind " + kind);
                }
            }
            case "watch" -> {
                String h = "w" + handles.incrementAndGet();
                long from = a.hasNonNull("from") ? a.get("from").asLong() : FencerClient.FROM_NOW;
                Watch w = client.watch(a.path("prefix").asText(""), from, ev -> watchEvent(h, ev),
                        e -> emit(JSON.createObjectNode().put("event", "watch_error").put("watch", h).put("code", e.code())));
                watches.put(h, w);
                r.put("watch", h);
            }
            case "watch_stop" -> {
                Watch w = watches.remove(a.path("watch").asText());
                if (w != null) {
                    w.close();
                }
            }
            case "exit" -> {
            }
            default -> throw new UnsupportedOp(op);
        }
        return r;
    }

    private void watchEvent(String h, Event ev) {
        ObjectNode line = JSON.createObjectNode().put("event", "watch").put("watch", h).put("index", ev.index()).put("type", ev.type());
        line.put("key", ev.key()).put("name", ev.lock().isEmpty() ? ev.semaphore() : ev.lock()).put("token", ev.token());
        emit(line);
    }

    private AcquireOptions options(JsonNode a) {
        AcquireOptions o = new AcquireOptions()
                .holder(a.path("holder").asText(""))
                .waitFor(Duration.ofMillis(a.path("wait_ms").asLong(0)));
        if (a.hasNonNull("ttl_ms")) {
            o.ttl(Duration.ofMillis(a.get("ttl_ms").asLong()));
        }
        return o;
    }

    /** Names a new grant and prints its loss once, should it come while held. */
    private String hold(Lease l) {
        String h = "h" + handles.incrementAndGet();
        leases.put(h, l);
        l.lost().thenAccept(reason -> emit(JSON.createObjectNode().put("event", "lost").put("handle", h).put("code", reason.code())
                .put("class", reason.cause().getClass().getSimpleName())));
        return h;
    }

    private Lease lease(JsonNode a) {
        Lease l = leases.get(a.path("handle").asText());
        if (l == null) {
            throw new IllegalArgumentException("no handle " + a.path("handle").asText());
        }
        return l;
    }

    private Session session(JsonNode a) {
        return a.hasNonNull("session") ? sessionOf(a.get("session").asText()) : null;
    }

    private Session sessionOf(String h) {
        Session s = sessions.get(h);
        if (s == null) {
            throw new IllegalArgumentException("no session " + h);
        }
        return s;
    }

    /** An op this client does not have. */
    private static final class UnsupportedOp extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UnsupportedOp(String op) {
            super("unsupported op " + op);
        }
    }
}
