package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Event is one change of GET /v1/events, in log order: {@code index} is the
 * log index of the entry that made it (every member emits the same), and
 * {@code type} one of acquired, released, expired, handed_off, put, ... (new
 * types are added; skip those you do not know). Fields a type does not use
 * are "" or 0; {@code raw} is the whole event.
 */
public record Event(long index, String type, String lock, String semaphore, String key, String holder, long token,
        String value, long session, String mode, JsonNode raw) {
    static Event of(Json j, String sseType) {
        String type = j.str("type").isEmpty() ? sseType : j.str("type");
        return new Event(j.num("index"), type, j.str("lock"), j.str("semaphore"), j.str("key"), j.str("holder"), j.num("token"),
                j.str("value"), j.num("session"), j.str("mode"), j.node());
    }
}
