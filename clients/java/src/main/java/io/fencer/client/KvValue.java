package io.fencer.client;

/** KvValue is a fenced key's value and the token of the write that stored it. */
public record KvValue(byte[] value, long token) {
}
