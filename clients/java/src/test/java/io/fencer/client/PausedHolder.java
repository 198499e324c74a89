package io.fencer.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * PausedHolder is the child JVM of PauseTest: it holds j.pause with a 1 s
 * TTL, and answers "state" (what the lease says, now) and "put" (a fenced
 * write with its token) on stdin, one line each on stdout; its loss signal
 * prints "event CODE".
 */
public final class PausedHolder {
    public static void main(String[] args) throws Exception {
        FencerClient c = FencerClient.builder().endpoints(args[0].split(",")).build();
        Lease l = c.acquire("j.pause", new AcquireOptions().holder("paused").ttl(Duration.ofSeconds(1)));
        l.lost().thenAccept(r -> say("event " + r.code()));
        say("token " + l.token());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null;) {
            switch (line) {
                case "state" -> say("lost " + l.isLost());
                case "put" -> {
                    try {
                        c.put("j.pause-key", "from the paused holder", l.token(), null);
                        say("put ok");
                    } catch (FencerException e) {
                        say("put " + e.code());
                    }
                }
                default -> say("what " + line);
            }
        }
        System.exit(0);
    }

    private static synchronized void say(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
