package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A watch asked for events older than the members keep (410 events_compacted): re-list and watch from the list's index. */
public class EventsCompactedException extends FencerException {
    private static final long serialVersionUID = 1L;

    EventsCompactedException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
