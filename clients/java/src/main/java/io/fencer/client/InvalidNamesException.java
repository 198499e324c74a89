package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A multi-lock's names are none, more than 64, one given twice, or one not a valid name (invalid_names). */
public class InvalidNamesException extends InvalidRequestException {
    private static final long serialVersionUID = 1L;

    InvalidNamesException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
