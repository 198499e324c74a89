package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A limit of the node or the caller was reached (429): too many waiters, locks, watches or requests, or the fenced store is full. */
public class LimitException extends FencerException {
    private static final long serialVersionUID = 1L;

    LimitException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
