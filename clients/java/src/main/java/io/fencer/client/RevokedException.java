package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** An operator revoked the grant or the session (410 revoked): it is lost for good, and every write it fences is refused from now. */
public class RevokedException extends LeaseLostException {
    private static final long serialVersionUID = 1L;

    RevokedException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
