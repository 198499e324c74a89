package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A fenced resource refused a write's form: a malformed Fencing-Sequence or no key (400). */
public class FencedResourceException extends FencerException {
    private static final long serialVersionUID = 1L;

    FencedResourceException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
