package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;

/** A membership change conflicts with the cluster (409 member_conflict) or names no member (404 unknown_member). */
public class MembershipException extends FencerException {
    private static final long serialVersionUID = 1L;

    MembershipException(String message, String code, int status, JsonNode body) {
        super(message, code, status, body);
    }
}
