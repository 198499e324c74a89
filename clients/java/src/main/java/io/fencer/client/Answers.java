package io.fencer.client;

import java.util.List;

/**
 * Answers says what an answer must say before the client believes it, as
 * the Go client's answer.go does: a grant names the name(s) and holder asked
 * for, the request's id, a token, a secret of 32 hexadecimal digits and a
 * TTL no longer than asked; a renewal the grant renewed and its TTL; a
 * fenced write the key and token sent. Anything else is a bad answer.
 */
final class Answers {
    private Answers() {
    }

    static void checkGrant(Json g, Lease.Kind kind, List<String> names, String holder, long ttlMillis, String requestId) {
        String what = "acquire " + kind.noun + " " + names;
        String field = kind == Lease.Kind.PERMIT ? "semaphore" : "lock";
        boolean named = kind == Lease.Kind.MULTI ? g.strings("names").equals(names) : g.str(field).equals(names.get(0));
        if (!named) {
            throw FencerException.badAnswer(what, "the answer names another " + kind.noun);
        }
        if (!g.str("holder").equals(holder)) {
            throw FencerException.badAnswer(what, "the answer names holder \"" + g.str("holder") + "\", not \"" + holder + "\" as asked");
        }
        if (g.num("token") == 0) {
            throw FencerException.badAnswer(what, "the answer has no token");
        }
        if (!secret(g.str("lease"))) {
            throw FencerException.badAnswer(what, "lease \"" + g.str("lease") + "\" is not 32 hexadecimal digits");
        }
        long ttl = g.num("ttl_ms");
        if (ttl <= 0 || ttl > ttlMillis) {
            throw FencerException.badAnswer(what, "ttl_ms " + ttl + " is not from 1 to the " + ttlMillis + " asked for");
        }
        if (!g.str("request_id").isEmpty() && !g.str("request_id").equals(requestId)) {
            throw FencerException.badAnswer(what, "the answer is for another request");
        }
    }

    static void checkMode(Json g, String asked) {
        if (!g.str("mode").equals(asked)) {
            throw FencerException.badAnswer("acquire lock " + g.str("lock"), "the answer is a grant in mode \"" + g.str("mode") + "\", not \"" + asked + "\" as asked");
        }
    }

    static void checkRenewal(Json a, Lease.Kind kind, String name, long token, long ttlMillis) {
        String what = "renew " + kind.noun + " " + name + " token " + token;
        boolean named = switch (kind) {
            case MULTI -> !a.strings("names").isEmpty();
            case PERMIT -> a.str("semaphore").equals(name);
            case LOCK -> a.str("lock").equals(name);
        };
        if (!named || a.num("token") != token) {
            throw FencerException.badAnswer(what, "the answer names another grant");
        }
        if (a.num("ttl_ms") <= 0 || (ttlMillis > 0 && a.num("ttl_ms") != ttlMillis)) {
            throw FencerException.badAnswer(what, "ttl_ms " + a.num("ttl_ms") + " is not the grant's " + ttlMillis);
        }
    }

    static void checkPut(Json p, String key, long token) {
        if (!p.str("key").equals(key) || p.num("token") != token) {
            throw FencerException.badAnswer("put " + key + " token " + token, "the answer names another key or token: the write may or may not have been stored");
        }
    }

    static boolean secret(String s) {
        if (s.length() != 32) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if ((ch < '0' || ch > '9') && (ch < 'a' || ch > 'f')) {
                return false;
            }
        }
        return true;
    }
}
