package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The caller's credentials were refused (401). */
public class UnauthorizedException extends FencerException {
    private static final long serialVersionUID = 1L;

    UnauthorizedException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
