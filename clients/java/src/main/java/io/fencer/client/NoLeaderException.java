package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The cluster had no leader for the request's attempts (503 no_leader); nothing was done. */
public class NoLeaderException extends UnavailableException {
    private static final long serialVersionUID = 1L;

    NoLeaderException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
