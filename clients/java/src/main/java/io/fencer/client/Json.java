package io.fencer.client;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Json reads answers field by field, as strictly as the Go client decodes
 * them: a field of the wrong type (a string for a token, a fraction, a
 * negative token) is a bad answer, an absent one its zero value, and an
 * unknown one is ignored (the server adds fields).
 */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper()
            .configure(DeserializationFeature.FAIL_ON_TRAILING_TOKENS, true);

    private final JsonNode node;
    private final String what;

    private Json(JsonNode node, String what) {
        this.node = node;
        this.what = what;
    }

    /** Parses an answer's body, which must be a JSON object. */
    static Json parse(byte[] body, String what) {
        JsonNode n;
        try {
            n = MAPPER.readTree(body);
        } catch (IOException e) {
            throw FencerException.badAnswer(what, "the answer is not JSON (" + body.length + " bytes): " + e.getMessage());
        }
        return of(n, what);
    }

    static Json of(JsonNode n, String what) {
        if (n == null || !n.isObject()) {
            throw FencerException.badAnswer(what, "the answer is not a JSON object");
        }
        return new Json(n, what);
    }

    static ObjectNode object() {
        return MAPPER.createObjectNode();
    }

    static byte[] bytes(JsonNode n) {
        try {
            return MAPPER.writeValueAsBytes(n);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    JsonNode node() {
        return node;
    }

    String str(String field) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return "";
        }
        if (!v.isTextual()) {
            throw FencerException.badAnswer(what, field + " is not a string");
        }
        return v.asText();
    }

    boolean bool(String field) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return false;
        }
        if (!v.isBoolean()) {
            throw FencerException.badAnswer(what, field + " is not a boolean");
        }
        return v.asBoolean();
    }

    /** A non-negative integer that fits a long (tokens, indexes, counts, milliseconds). */
    long num(String field) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return 0;
        }
        if (!v.isIntegralNumber() || !v.canConvertToLong() || v.asLong() < 0) {
            throw FencerException.badAnswer(what, field + " " + v + " is not a non-negative integer");
        }
        return v.asLong();
    }

    List<Json> list(String field) {
        JsonNode v = node.get(field);
        List<Json> out = new ArrayList<>();
        if (v == null || v.isNull()) {
            return out;
        }
        if (!v.isArray()) {
            throw FencerException.badAnswer(what, field + " is not a list");
        }
        for (JsonNode e : v) {
            out.add(of(e, what));
        }
        return out;
    }

    List<String> strings(String field) {
        JsonNode v = node.get(field);
        List<String> out = new ArrayList<>();
        if (v == null || v.isNull()) {
            return out;
        }
        if (!v.isArray()) {
            throw FencerException.badAnswer(what, field + " is not a list");
        }
        for (JsonNode e : v) {
            if (!e.isTextual()) {
                throw FencerException.badAnswer(what, field + " holds a non-string");
            }
            out.add(e.asText());
        }
        return out;
    }
}
