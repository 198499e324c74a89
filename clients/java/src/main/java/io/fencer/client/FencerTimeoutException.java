package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The request, or the operation's own time, ran out with no answer (504 timeout, or the client's {@code timeout}). */
public class FencerTimeoutException extends FencerException {
    private static final long serialVersionUID = 1L;

    FencerTimeoutException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
