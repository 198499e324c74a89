package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The caller may not do this (403), or the node refused the host or origin it was asked by (421, 403). */
public class ForbiddenException extends FencerException {
    private static final long serialVersionUID = 1L;

    ForbiddenException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
