package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The request was malformed (400, 405, 413, 415): the server's code says which part. Retrying it changes nothing. */
public class InvalidRequestException extends FencerException {
    private static final long serialVersionUID = 1L;

    InvalidRequestException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
