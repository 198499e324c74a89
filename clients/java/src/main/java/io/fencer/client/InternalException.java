package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The server failed (500 internal, or 503 when the token space is exhausted). */
public class InternalException extends FencerException {
    private static final long serialVersionUID = 1L;

    InternalException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
