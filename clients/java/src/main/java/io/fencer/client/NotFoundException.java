package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** No such key, lock status, election leader or route (404 not_found). */
public class NotFoundException extends FencerException {
    private static final long serialVersionUID = 1L;

    NotFoundException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
