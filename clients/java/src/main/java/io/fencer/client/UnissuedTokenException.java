package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fenced write's token is above every token the cluster has granted (409 unissued_token). */
public class UnissuedTokenException extends FencerException {
    private static final long serialVersionUID = 1L;

    UnissuedTokenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
