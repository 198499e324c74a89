package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The session lease presented is not the session's (409 session_mismatch). */
public class SessionMismatchException extends FencerException {
    private static final long serialVersionUID = 1L;

    SessionMismatchException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
