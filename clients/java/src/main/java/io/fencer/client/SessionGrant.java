package io.fencer.client;

/** SessionGrant is one grant under a session: a lock's (or election's) or a permit's, by kind, name and token. */
public record SessionGrant(String kind, String name, long token) {
    static SessionGrant of(Json j) {
        if (!("lock".equals(j.str("kind")) || "semaphore".equals(j.str("kind"))) || j.num("token") == 0 || j.str("name").isEmpty()) {
            throw FencerException.badAnswer("session grants", "a grant is not a lock's or a semaphore's with a name and token");
        }
        return new SessionGrant(j.str("kind"), j.str("name"), j.num("token"));
    }
}
