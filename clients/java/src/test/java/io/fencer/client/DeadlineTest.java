package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The local deadline counts from the acquire's send, not from its answer:
 * with every answer 800 ms late and then none at all, a 3 s lease is
 * declared lost no later than 3 s after the acquire was sent (counted from
 * the answer's arrival it would be about 3.5 s).
 */
class DeadlineTest {
    @Test
    void leaseIsLostByTtlAfterTheSend() throws Exception {
        try (Cluster cluster = new Cluster(1); SlowProxy proxy = new SlowProxy(cluster.endpoints().get(0));
                FencerClient c = FencerClient.builder().endpoints(proxy.addr()).build()) {
            c.acquire("d.warm", new AcquireOptions().holder("d")).release(); // the client knows the leader
            proxy.delayMillis = 800;
            long sent = System.nanoTime();
            Lease l = c.acquire("d.lock", new AcquireOptions().holder("d").ttl(Duration.ofSeconds(3)));
            proxy.blackhole = true;
            LossReason why = l.lost().get(10, TimeUnit.SECONDS);
            long after = Duration.ofNanos(System.nanoTime() - sent).toMillis();
            assertEquals(LossReason.LEASE_LOST, why.code());
            assertTrue(after <= 3000, "lost " + after + " ms after the acquire was sent, over its 3 s TTL");
        }
    }
}
