package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A release of one name of a multi-lock, whose names end together: release the multi-lock (409 multi_grant). */
public class MultiGrantException extends FencerException {
    private static final long serialVersionUID = 1L;

    MultiGrantException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
