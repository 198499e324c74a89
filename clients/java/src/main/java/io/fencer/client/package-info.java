/**
 * The Java client of fencer's HTTP API, by the Go client's rules
 * (api/client/doc.go and DESIGN.md).
 *
 * <p>What a user meets is {@link io.fencer.client.FencerClient}, the
 * {@link io.fencer.client.Lease} of a grant, a {@link io.fencer.client.Session},
 * a {@link io.fencer.client.Watch} and the exceptions, one family per
 * error code under {@link io.fencer.client.FencerException}. Behind them,
 * package-private: {@code Transport} sends requests (leader following,
 * retries, the attempt bounds, only 2xx believed, no redirect followed);
 * {@code Keeper} keeps one lease alive, a grant's or a session's (the local
 * deadline from the send time of the last confirmed renewal, a timer of its
 * own for it, renewals at about TTL/3); {@code Answers} and {@code Json}
 * refuse an answer that is not the one asked for. A grant under a session
 * has no keeper of its own: its lease is the session's.
 *
 * <p>Tokens are {@code long}s: the server's are 1 to 2^64-1, and one above
 * 2^63-1, which no cluster issues in practice, is refused as a bad answer.
 */
package io.fencer.client;
