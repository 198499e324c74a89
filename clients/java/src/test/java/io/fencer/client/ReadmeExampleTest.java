package io.fencer.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * The example of clients/java/README.md (and docs/clients/java.md, which
 * must show the same) compiles against the jar and runs against real nodes.
 */
class ReadmeExampleTest {
    static String example(Path doc) throws Exception {
        String md = Files.readString(doc);
        int start = md.indexOf("```java\n");
        assertTrue(start >= 0, doc + " has no java example");
        return md.substring(start + 8, md.indexOf("```", start + 8));
    }

    @Test
    void readmeExampleRuns() throws Exception {
        Path here = Path.of(System.getProperty("user.dir"));
        Path root = Files.exists(here.resolve("clients/java/README.md")) ? here : here.resolve("../..").normalize();
        String code = example(root.resolve("clients/java/README.md"));
        assertEquals(code, example(root.resolve("docs/clients/java.md")), "docs/clients/java.md shows another example");

        Path dir = Files.createTempDirectory("fencer-java-example-");
        Files.writeString(dir.resolve("Example.java"), code);
        String cp = System.getenv().getOrDefault("FENCER_JAVA_CP", "build/fencer-client.jar");
        int rc = ToolProvider.getSystemJavaCompiler().run(null, null, null, "-d", dir.toString(), "-cp", cp, dir.resolve("Example.java").toString());
        assertEquals(0, rc, "the README example does not compile");

        try (Cluster cluster = new Cluster(1); FencerClient c = FencerClient.builder().endpoints(cluster.endpoints()).build()) {
            String java = ProcessHandle.current().info().command().orElse("java");
            ProcessBuilder pb = new ProcessBuilder(java, "-cp", dir + File.pathSeparator + cp, "Example").redirectErrorStream(true);
            pb.environment().put("FENCER_ADDRS", String.join(",", cluster.endpoints()));
            Process p = pb.start();
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the example did not finish");
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertEquals(0, p.exitValue(), out);
            assertTrue(out.startsWith("wrote 3 batches with token "), out);
            KvValue v = c.get("billing-batch-3");
            assertEquals("done", new String(v.value(), StandardCharsets.UTF_8));
            assertEquals(out.trim().substring("wrote 3 batches with token ".length()), Long.toString(v.token()));
            assertTrue(!c.lock("billing-run").held(), "the example left the lock held");
        }
        try (var walk = Files.walk(dir)) {
            walk.sorted(java.util.Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
