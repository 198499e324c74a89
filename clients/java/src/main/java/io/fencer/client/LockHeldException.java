package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** Another grant holds the lock (409 lock_held): {@link #holder()} and {@link #token()} name it, {@link #lock()} the lock (a multi-lock's first held name). */
public class LockHeldException extends FencerException {
    private static final long serialVersionUID = 1L;

    LockHeldException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
