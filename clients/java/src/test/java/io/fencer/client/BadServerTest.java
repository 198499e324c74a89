package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every answer of clients/testdata/bad_server.json that a client must not
 * believe, against a fake server that plays it: a bad answer is
 * {@link BadAnswerException}, raised without retrying; an answer that never
 * completes fails the call within its time. The Java client bounds a call
 * by its attempts, each by the client's timeout: the table's timeout_ms is
 * the timeout of one attempt, and a "deadline" scenario runs with one.
 */
class BadServerTest {
    @TestFactory
    Stream<DynamicTest> badAnswersAreNotBelieved() throws Exception {
        Path here = Path.of(System.getProperty("user.dir"));
        Path file = Files.exists(here.resolve("../testdata/bad_server.json")) ? here.resolve("../testdata/bad_server.json")
                : here.resolve("clients/testdata/bad_server.json");
        JsonNode table = new ObjectMapper().readTree(file.toFile());
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode sc : table.path("scenarios")) {
            tests.add(DynamicTest.dynamicTest(sc.path("name").asText(), () -> run(table, sc)));
        }
        return tests.stream();
    }

    private static void run(JsonNode table, JsonNode sc) throws Exception {
        String expect = sc.path("expect").asText();
        long timeout = sc.path("timeout_ms").asLong(2000);
        JsonNode g = table.path("grant");
        Duration ttl = Duration.ofMillis(g.path("ttl_ms").asLong());
        try (BadServer srv = new BadServer(table, sc);
                FencerClient c = FencerClient.builder().endpoints(srv.endpoint()).timeout(Duration.ofMillis(timeout))
                        .attempts(expect.equals("deadline") ? 1 : 3).build()) {
            String call = sc.path("call").asText();
            AcquireOptions once = new AcquireOptions().holder("bad-server-test").ttl(ttl).noKeepAlive();
            long start = System.nanoTime();
            try {
                switch (call) {
                    case "acquire" -> {
                        Lease l = c.acquire(g.path("name").asText(), once);
                        assertEquals(7, l.token());
                        assertEquals(g.path("name").asText(), l.name());
                        assertEquals(ttl, l.ttl());
                    }
                    case "put" -> {
                        JsonNode p = table.path("put");
                        c.put(p.path("key").asText(), p.path("value").asText(), p.path("token").asLong(), null);
                    }
                    case "renew" -> c.acquire(g.path("name").asText(), once).renew();
                    default -> fail("unknown call " + call);
                }
                assertEquals("ok", expect, sc.path("name").asText() + ": the call believed the answer");
            } catch (FencerException e) {
                long took = Duration.ofNanos(System.nanoTime() - start).toMillis();
                switch (expect) {
                    case "bad_answer" -> {
                        assertTrue(e instanceof BadAnswerException, "want a bad answer, got " + e.getClass().getSimpleName() + ": " + e.getMessage());
                        assertEquals(1, srv.count(call), "a bad answer was retried");
                    }
                    case "deadline" -> assertTrue(took < timeout + 1000, "a " + timeout + " ms call ran " + took + " ms");
                    default -> fail(sc.path("name").asText() + ": " + e);
                }
            }
            if (call.equals("renew")) {
                keptAlive(c, srv, g.path("name").asText(), ttl, expect);
            }
        }
    }

    /** A kept-alive lease: valid past two TTLs on good renewals, else lost by a TTL after its acquire, without a renewal storm. */
    private static void keptAlive(FencerClient c, BadServer srv, String name, Duration ttl, String expect) throws Exception {
        int before = srv.count("renew");
        long sent = System.nanoTime();
        Lease l = c.acquire(name, new AcquireOptions().holder("bad-server-test").ttl(ttl));
        if (expect.equals("ok")) {
            long end = sent + 2 * ttl.toNanos() + Duration.ofMillis(200).toNanos();
            while (System.nanoTime() - end < 0) {
                assertTrue(!l.isLost(), "a lease renewed with good answers was lost: " + l.lossReason());
                Thread.sleep(50);
            }
            return;
        }
        Cluster.poll("the lease lost", ttl.plusSeconds(1), l::isLost);
        assertTrue(System.nanoTime() - sent <= ttl.toNanos(), "lost later than a TTL after the acquire was sent");
        int renewals = srv.count("renew") - before;
        assertTrue(renewals >= 1 && renewals <= 20, renewals + " renewals");
    }
}
