package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A holder paused (SIGSTOP) past its lease: on waking, its first look says
 * lost, its loss signal fires, and its late fenced write is refused
 * stale_token, the newer holder's value kept.
 */
class PauseTest {
    @Test
    void pausedHoldersLateWriteIsRefused() throws Exception {
        try (Cluster cluster = new Cluster(3); FencerClient c = FencerClient.builder().endpoints(cluster.endpoints()).build()) {
            String cp = System.getenv().getOrDefault("FENCER_JAVA_CP", "build/fencer-client.jar") + File.pathSeparator
                    + new File(PausedHolder.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath();
            String java = ProcessHandle.current().info().command().orElse("java");
            Process child = new ProcessBuilder(java, "-cp", cp, PausedHolder.class.getName(), String.join(",", cluster.endpoints()))
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            try {
                BlockingQueue<String> lines = new LinkedBlockingQueue<>();
                Thread reader = new Thread(() -> {
                    try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                        for (String s; (s = r.readLine()) != null;) {
                            lines.add(s);
                        }
                    } catch (Exception e) {
                        lines.add("error " + e);
                    }
                });
                reader.setDaemon(true);
                reader.start();
                Writer stdin = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.UTF_8);
                String first = lines.poll(20, TimeUnit.SECONDS);
                assertTrue(first != null && first.startsWith("token "), "child said " + first);
                long pausedToken = Long.parseLong(first.substring(6));

                signal("STOP", child.pid());
                // The newer holder is granted once the server expires the paused one's lease.
                try (Lease newer = c.acquire("j.pause", new AcquireOptions().holder("newer").ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(20)))) {
                    assertTrue(newer.token() > pausedToken);
                    c.put("j.pause-key", "from the newer holder", newer.token(), "j.pause");
                    stdin.write("state\nput\n");
                    stdin.flush();
                    signal("CONT", child.pid());
                    List<String> got = new ArrayList<>();
                    while (got.size() < 3) {
                        String s = lines.poll(20, TimeUnit.SECONDS);
                        assertTrue(s != null, "child said only " + got);
                        got.add(s);
                    }
                    assertEquals("lost true", got.stream().filter(s -> s.startsWith("lost")).findFirst().orElse(""),
                            "the paused holder's first look must say lost: " + got);
                    assertTrue(got.contains("event lease_lost"), "no loss signal: " + got);
                    assertTrue(got.contains("put stale_token"), "late write not refused stale_token: " + got);
                    KvValue v = c.get("j.pause-key");
                    assertEquals(newer.token(), v.token());
                }
            } finally {
                signal("CONT", child.pid());
                child.destroyForcibly().waitFor();
            }
        }
    }

    private static void signal(String sig, long pid) throws Exception {
        assertEquals(0, new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start().waitFor());
    }
}
