package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** A leader killed during a hold, and a watch carried by it. */
class FailoverTest {
    @Test
    void leaseAndWatchSurviveTheLeadersDeath() throws Exception {
        try (Cluster cluster = new Cluster(3)) {
            Cluster.Node leader = cluster.leader();
            // The leader first, so that the watch's stream is the leader's.
            List<String> eps = new ArrayList<>(List.of(leader.http));
            cluster.endpoints().stream().filter(e -> !e.equals(leader.http)).forEach(eps::add);
            try (FencerClient c = FencerClient.builder().endpoints(eps).build()) {
                CopyOnWriteArrayList<Event> events = new CopyOnWriteArrayList<>();
                Watch w = c.watch("f.k", FencerClient.FROM_NOW, events::add, e -> { });
                Cluster.poll("the watch connected", Duration.ofSeconds(10), () -> w.lastIndex() > 0);
                // 6 s: an election on a loaded machine may take 3 s, and the lease must outlive it.
                Lease l = c.acquire("f.lock", new AcquireOptions().holder("survivor").ttl(Duration.ofSeconds(6)));
                c.put("f.k1", "1", l.token(), "f.lock");
                c.put("f.k2", "2", l.token(), "f.lock");
                Cluster.poll("the first two events", Duration.ofSeconds(10), () -> events.size() >= 2);

                leader.kill();
                Cluster.Node next = cluster.leader();
                assertTrue(next != leader);
                c.put("f.k3", "3", l.token(), "f.lock");
                c.put("f.k4", "4", l.token(), "f.lock");

                // Two TTLs after the new leader is ready: still held, renewed through it.
                long end = System.nanoTime() + Duration.ofSeconds(12).toNanos();
                while (System.nanoTime() - end < 0) {
                    assertFalse(l.isLost(), "the lease was lost across the leader change: " + l.lossReason());
                    Thread.sleep(100);
                }
                assertTrue(c.check("f.lock", l.token()).current());
                Cluster.poll("every event", Duration.ofSeconds(20), () -> events.size() >= 4);
                assertEquals(List.of("f.k1", "f.k2", "f.k3", "f.k4"), events.stream().map(Event::key).toList(),
                        "each event once, in order, across the dead member");
                l.release();
                assertFalse(c.lock("f.lock").held());
                w.close();
            }
        }
    }

    /**
     * A leader that freezes (SIGSTOP) holds its connections open without
     * answering: an acquire sent to it is given up once the other members
     * name a new leader, not after the attempt's whole 10 s timeout.
     */
    @Test
    void frozenLeaderHoldsARequestOnlyUntilAnotherIsElected() throws Exception {
        try (Cluster cluster = new Cluster(3); FencerClient c = FencerClient.builder().endpoints(cluster.endpoints()).build()) {
            Cluster.Node leader = cluster.leader();
            c.acquire("f.warm", new AcquireOptions().holder("warm")).release(); // the client knows the leader
            signal("STOP", leader.proc.pid());
            try {
                long start = System.nanoTime();
                try (Lease l = c.acquire("f.frozen", new AcquireOptions().holder("h").ttl(Duration.ofSeconds(5)))) {
                    long took = Duration.ofNanos(System.nanoTime() - start).toMillis();
                    assertTrue(took < 7000, "the acquire took " + took + " ms behind a frozen leader");
                    assertFalse(l.isLost());
                }
            } finally {
                signal("CONT", leader.proc.pid());
            }
        }
    }

    static void signal(String sig, long pid) throws Exception {
        assertEquals(0, new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start().waitFor());
    }
}
