package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fenced write named a lock whose current grant is not the write's token, or is shared (409 not_lock_holder). */
public class NotLockHolderException extends FencerException {
    private static final long serialVersionUID = 1L;

    NotLockHolderException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
