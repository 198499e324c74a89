package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** Every permit of the semaphore is held (409 semaphore_full); {@link #held()} and {@link #limit()} say how many. */
public class SemaphoreFullException extends FencerException {
    private static final long serialVersionUID = 1L;

    SemaphoreFullException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
