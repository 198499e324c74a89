package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The server's answer broke the contract (code {@code bad_answer}): not the JSON the API says, not an answer to this request, or longer than the client reads. It is not retried; a renewal that gets one confirms nothing. */
public class BadAnswerException extends FencerException {
    private static final long serialVersionUID = 1L;

    BadAnswerException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
