package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** No grant with that token is in the cluster's history (404 unknown_token); {@link #reason()} says why. */
public class UnknownTokenException extends FencerException {
    private static final long serialVersionUID = 1L;

    UnknownTokenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
