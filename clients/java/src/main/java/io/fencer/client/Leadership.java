package io.fencer.client;

/** Leadership is an election's leader: its holder, token (its term) and published value. */
public record Leadership(String holder, long token, String value) {
}
