package io.fencer.client;

/**
 * GrantRecord is one grant of the cluster's grant history: which lock (or,
 * for a permit, semaphore, its lock then "") and holder got a token, and how
 * the grant ended: released, expired, handed_off, voided, revoked, or held.
 */
public record GrantRecord(long token, String lock, String semaphore, String holder, long grantedIndex, String ended,
        long endedIndex, String mode) {
    static GrantRecord of(Json j) {
        if (j.num("token") == 0) {
            throw FencerException.badAnswer("grant history", "a grant has no token");
        }
        return new GrantRecord(j.num("token"), j.str("lock"), j.str("semaphore"), j.str("holder"), j.num("granted_index"),
                j.str("ended"), j.num("ended_index"), j.str("mode"));
    }
}
