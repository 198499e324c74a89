package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The client against one shared cluster of three real nodes. */
class ClientTest {
    static Cluster cluster;
    static FencerClient c;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Cluster(3);
        c = FencerClient.builder().endpoints(cluster.endpoints()).build();
    }

    @AfterAll
    static void stop() throws Exception {
        c.close();
        cluster.close();
    }

    static AcquireOptions opts(String holder) {
        return new AcquireOptions().holder(holder).ttl(Duration.ofSeconds(5));
    }

    @Test
    void fencedWriteAndStaleWriteRefused() {
        Lease a = c.acquire("j.stale", opts("a"));
        c.put("j.stale-key", "from a", a.token(), "j.stale");
        KvValue v = c.get("j.stale-key");
        assertEquals("from a", new String(v.value(), StandardCharsets.UTF_8));
        assertEquals(a.token(), v.token());
        a.release();
        assertTrue(a.isLost(), "a released lease is not held");
        try (Lease b = c.acquire("j.stale", opts("b"))) {
            assertTrue(b.token() > a.token());
            c.put("j.stale-key", "from b", b.token(), "j.stale");
            StaleTokenException e = assertThrows(StaleTokenException.class, () -> c.put("j.stale-key", "late a", a.token(), null));
            assertEquals("stale_token", e.code());
            assertEquals(409, e.status());
            assertEquals(b.token(), e.lastToken());
            assertEquals("from b", new String(c.get("j.stale-key").value(), StandardCharsets.UTF_8));
            assertTrue(c.check("j.stale", b.token()).current());
            assertFalse(c.check("j.stale", a.token()).current());
        }
        List<GrantRecord> h = c.history("j.stale");
        assertEquals(List.of("released", "released"), h.stream().map(GrantRecord::ended).toList());
        assertEquals("a", c.tokenInfo(a.token()).holder());
    }

    @Test
    void everyRefusalIsATypedException() {
        try (Lease held = c.acquire("j.codes", opts("holder-1"))) {
            LockHeldException e = assertThrows(LockHeldException.class, () -> c.acquire("j.codes", opts("other")));
            assertEquals("holder-1", e.holder());
            assertEquals(held.token(), e.token());
            assertThrows(NotLockHolderException.class, () -> c.put("j.codes-key", "x", held.token() - 1 > 0 ? held.token() - 1 : 1, "j.codes"));
        }
        assertEquals("invalid_name", assertThrows(InvalidNameException.class, () -> c.acquire("bad name", opts("x"))).code());
        assertThrows(InvalidTtlException.class, () -> c.acquire("j.codes", opts("x").ttl(Duration.ofMillis(1))));
        assertThrows(InvalidModeException.class, () -> c.acquire("j.codes", opts("x").mode("sideways")));
        assertThrows(InvalidNamesException.class, () -> c.multiLock(List.of("j.m", "j.m"), opts("x")));
        assertThrows(InvalidTokenException.class, () -> c.put("j.k", "x", 0, null));
        assertEquals(404, assertThrows(NotFoundException.class, () -> c.get("j.never-written")).status());
        assertThrows(NotFoundException.class, () -> c.leader("j.no-election"));
        assertThrows(UnknownTokenException.class, () -> c.tokenInfo(1L << 50));
        try (Lease p = c.acquirePermit("j.sem", 1, opts("p1"))) {
            assertEquals(1, p.heldPermits());
            assertTrue(c.checkPermit("j.sem", p.token()));
            SemaphoreFullException full = assertThrows(SemaphoreFullException.class, () -> c.acquirePermit("j.sem", 1, opts("p2")));
            assertEquals(1, full.limit());
            assertThrows(LimitMismatchException.class, () -> c.acquirePermit("j.sem", 2, opts("p3")));
        }
    }

    @Test
    void sharedLocksAndMultiLocks() {
        try (Lease s1 = c.acquire("j.shared", opts("r1").mode(AcquireOptions.Mode.SHARED));
                Lease s2 = c.acquire("j.shared", opts("r2").mode("shared"))) {
            assertTrue(s1.shared() && s2.shared());
            assertEquals(2, c.lock("j.shared").sharedHolders().size());
            assertThrows(LockHeldException.class, () -> c.acquire("j.shared", opts("w")));
        }
        Lease m = c.multiLock(List.of("j.m1", "j.m2"), opts("multi"));
        assertEquals(List.of("j.m1", "j.m2"), m.names());
        assertEquals(m.token(), c.lock("j.m1").token());
        assertEquals(m.token(), c.lock("j.m2").token());
        m.renew();
        m.release();
        assertFalse(c.lock("j.m1").held());
        assertFalse(c.lock("j.m2").held());
    }

    @Test
    void sessionEndsEveryGrantUnderIt() {
        Session s = c.newSession("sess", Duration.ofSeconds(5));
        Lease l = s.lock("j.s-lock", new AcquireOptions().holder("sess"));
        Lease p = s.acquirePermit("j.s-sem", 2, new AcquireOptions().holder("sess"));
        assertEquals(s.id(), c.lock("j.s-lock").session());
        assertFalse(l.isLost() || p.isLost());
        List<SessionGrant> released = s.closeSession();
        assertEquals(2, released.size());
        assertTrue(l.isLost() && p.isLost() && s.isLost());
        assertFalse(l.lost().isDone(), "a close is not a loss");
        assertFalse(c.lock("j.s-lock").held());
        assertThrows(SessionExpiredException.class, () -> s.lock("j.s-lock2", new AcquireOptions()));
    }

    @Test
    void electionCampaignProclaimObserve() throws Exception {
        CopyOnWriteArrayList<Leadership> seen = new CopyOnWriteArrayList<>();
        try (Lease l = c.campaign("j.elect", "addr-1", opts("cand-1"))) {
            assertEquals(new Leadership("cand-1", l.token(), "addr-1"), c.leader("j.elect"));
            try (Watch w = c.observe("j.elect", seen::add, e -> { })) {
                l.proclaim("addr-2");
                Cluster.poll("the proclaimed value observed", Duration.ofSeconds(10), () -> seen.size() == 2);
            }
            assertEquals(List.of("addr-1", "addr-2"), seen.stream().map(Leadership::value).toList());
        }
    }

    @Test
    void watchDeliversEachEventOnceInOrder() {
        CopyOnWriteArrayList<Event> events = new CopyOnWriteArrayList<>();
        try (Lease l = c.acquire("j.watch", opts("w")); Watch w = c.watch("j.watch-", FencerClient.FROM_NOW, events::add, e -> { })) {
            Cluster.poll("the watch connected", Duration.ofSeconds(10), () -> w.lastIndex() > 0);
            for (int i = 0; i < 5; i++) {
                c.put("j.watch-" + i, "v", l.token(), null);
            }
            Cluster.poll("five put events", Duration.ofSeconds(10), () -> events.size() >= 5);
            assertEquals(List.of("j.watch-0", "j.watch-1", "j.watch-2", "j.watch-3", "j.watch-4"), events.stream().map(Event::key).toList());
        }
    }

    @Test
    void revokeIsSignalledAsRevoked() throws Exception {
        Lease l = c.acquire("j.revoke", new AcquireOptions().holder("r").ttl(Duration.ofMillis(900)));
        CompletableFuture<Void> hook = new CompletableFuture<>();
        l.onLost(() -> hook.complete(null));
        c.revokeLock("j.revoke", l.token());
        LossReason why = l.lost().get(5, TimeUnit.SECONDS);
        assertEquals(LossReason.REVOKED, why.code());
        assertTrue(why.cause() instanceof RevokedException);
        hook.get(5, TimeUnit.SECONDS);
        assertTrue(l.isLost());
    }

    /**
     * A grant made after a wait in the queue is older than TTL/3 measured
     * from the acquire's send: the client renews once and measures the lease
     * from that renewal, so the lease is not lost the moment it is handed out.
     */
    @Test
    void lateGrantIsConfirmedByARenewal() throws Exception {
        Lease first = c.acquire("j.late", opts("first"));
        CompletableFuture<Lease> waiter = CompletableFuture.supplyAsync(() ->
                c.acquire("j.late", new AcquireOptions().holder("second").ttl(Duration.ofMillis(900)).waitFor(Duration.ofSeconds(10))));
        Cluster.poll("the second acquire queued", Duration.ofSeconds(5), () -> c.lock("j.late").held() && waiterQueued());
        Thread.sleep(1500); // longer than the waiter's TTL
        first.release();
        try (Lease second = waiter.get(10, TimeUnit.SECONDS)) {
            assertFalse(second.isLost(), "a grant after a wait must be measured from a renewal, not from the acquire's send");
            assertTrue(second.remaining().toMillis() > 300, "remaining " + second.remaining());
        }
    }

    private static boolean waiterQueued() {
        try {
            JsonHolder st = new JsonHolder(c);
            return st.waiters("j.late") > 0;
        } catch (FencerException e) {
            return false;
        }
    }

    /** JsonHolder reads a lock's raw status for the fields LockStatus leaves out. */
    private record JsonHolder(FencerClient c) {
        int waiters(String name) {
            Transport.Request r = new Transport.Request("GET", FencerClient.path("locks", name, ""));
            return (int) Json.parse(c.transport().send(r).body(), "status").num("waiters");
        }
    }
}
