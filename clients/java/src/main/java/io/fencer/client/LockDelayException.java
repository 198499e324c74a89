package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The lock's last grant expired and its lock-delay runs (409 lock_delay): {@link #retryAfterMillis()} is the time left. */
public class LockDelayException extends FencerException {
    private static final long serialVersionUID = 1L;

    LockDelayException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
