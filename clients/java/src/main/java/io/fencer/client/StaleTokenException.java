package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fenced write's token is not greater than the key's last one (409 stale_token): a newer holder has written, so stop. {@link #lastToken()} is the key's mark. */
public class StaleTokenException extends FencerException {
    private static final long serialVersionUID = 1L;

    StaleTokenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
