package io.fencer.client;

import java.util.List;

/**
 * LockStatus is a lock and its grant, if held (GET /v1/locks/{name}); never
 * its secret. A lock held in shared mode has {@code held} false and its
 * grants in {@code sharedHolders}.
 */
public record LockStatus(String lock, boolean held, String holder, long token, long ttlMillis, String value,
        long session, List<SharedHolder> sharedHolders) {
    /** One shared grant of a lock. */
    public record SharedHolder(String holder, long token, long ttlMillis, long session) {
    }

    static LockStatus of(Json j) {
        List<SharedHolder> shared = j.list("shared_holders").stream()
                .map(s -> new SharedHolder(s.str("holder"), s.num("token"), s.num("ttl_ms"), s.num("session"))).toList();
        return new LockStatus(j.str("lock"), j.bool("held"), j.str("holder"), j.num("token"), j.num("ttl_ms"), j.str("value"),
                j.num("session"), shared);
    }
}
