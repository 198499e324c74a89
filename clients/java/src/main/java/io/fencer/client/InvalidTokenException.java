package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fencing token that is not a decimal from 1 to 2^64-1 (invalid_token); the client refuses a token of 0 before sending it. */
public class InvalidTokenException extends InvalidRequestException {
    private static final long serialVersionUID = 1L;

    InvalidTokenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
