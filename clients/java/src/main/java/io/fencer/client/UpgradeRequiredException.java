package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** The request needs every member to run a newer build first (409 upgrade_required). */
public class UpgradeRequiredException extends FencerException {
    private static final long serialVersionUID = 1L;

    UpgradeRequiredException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
