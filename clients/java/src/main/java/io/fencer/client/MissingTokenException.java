package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fenced write carried no Fencing-Token (428 missing_token). */
public class MissingTokenException extends FencerException {
    private static final long serialVersionUID = 1L;

    MissingTokenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
