package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** No member could be reached for the request's attempts (code {@code unavailable}). An attempt that was sent may still have taken effect. */
public class UnavailableException extends FencerException {
    private static final long serialVersionUID = 1L;

    UnavailableException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
