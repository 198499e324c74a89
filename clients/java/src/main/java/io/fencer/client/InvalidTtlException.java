package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A TTL outside 100 ms to 24 h (invalid_ttl); the client refuses one before sending it, as the server would. */
public class InvalidTtlException extends InvalidRequestException {
    private static final long serialVersionUID = 1L;

    InvalidTtlException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
