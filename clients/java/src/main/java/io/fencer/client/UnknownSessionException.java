package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** No session has that id (404 unknown_session). */
public class UnknownSessionException extends FencerException {
    private static final long serialVersionUID = 1L;

    UnknownSessionException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
