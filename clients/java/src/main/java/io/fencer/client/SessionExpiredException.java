package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The session ended, expired or closed, and every grant under it with it (410 session_expired). It is a lease loss. */
public class SessionExpiredException extends LeaseLostException {
    private static final long serialVersionUID = 1L;

    SessionExpiredException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
