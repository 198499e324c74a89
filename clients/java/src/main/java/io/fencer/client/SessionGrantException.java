package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A grant held under a session is renewed by renewing its session (409 session_grant). */
public class SessionGrantException extends FencerException {
    private static final long serialVersionUID = 1L;

    SessionGrantException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
