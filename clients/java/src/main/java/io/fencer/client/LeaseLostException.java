package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The grant is not held any more (410 lease_lost from the server, or the client's own view: its local deadline passed, code {@code lease_lost} with status 0). Stop the work it protects. */
public class LeaseLostException extends FencerException {
    private static final long serialVersionUID = 1L;

    LeaseLostException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
