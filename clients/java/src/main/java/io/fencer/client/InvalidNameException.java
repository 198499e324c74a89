package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A lock, semaphore or election name, or a key, is not 1-200 of {@code [A-Za-z0-9._:-]} (invalid_name). */
public class InvalidNameException extends InvalidRequestException {
    private static final long serialVersionUID = 1L;

    InvalidNameException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
