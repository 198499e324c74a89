package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The request may or may not have taken effect: leadership was lost (503 outcome_unknown), or an attempt's answer never arrived and the retry could not tell. */
public class OutcomeUnknownException extends FencerException {
    private static final long serialVersionUID = 1L;

    OutcomeUnknownException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
