package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A lock mode other than shared or exclusive, or a shared acquire with a value (invalid_mode). */
public class InvalidModeException extends InvalidRequestException {
    private static final long serialVersionUID = 1L;

    InvalidModeException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
