package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The acquire's limit differs from the semaphore's held permits' ({@link #limit()}; 409 limit_mismatch). */
public class LimitMismatchException extends FencerException {
    private static final long serialVersionUID = 1L;

    LimitMismatchException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
