package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;

/**
 * Cluster is real fencer nodes for the tests: {@code fencer serve} processes
 * on free loopback ports in a temporary directory (as
 * clients/python/tests/cluster.py starts them). FENCER_BIN names the binary.
 */
final class Cluster implements AutoCloseable {
    static final String BIN = System.getenv().getOrDefault("FENCER_BIN", "../../bin/fencer");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();

    /** Node is one member: its id, addresses and process. */
    static final class Node {
        final String id;
        final String http;
        final String raft;
        Process proc;

        Node(String id) throws IOException {
            this.id = id;
            this.http = "127.0.0.1:" + freePort();
            this.raft = "127.0.0.1:" + freePort();
        }

        boolean running() {
            return proc != null && proc.isAlive();
        }

        void kill() throws InterruptedException {
            if (running()) {
                proc.destroyForcibly();
                proc.waitFor();
            }
        }
    }

    final Path dir;
    final Map<String, Node> nodes = new LinkedHashMap<>();

    Cluster(int n) throws Exception {
        if (!new File(BIN).canExecute()) {
            throw new IllegalStateException(BIN + " is missing: go build -o bin/fencer ./cmd/fencer (or set FENCER_BIN)");
        }
        dir = Files.createTempDirectory("fencer-java-");
        for (int i = 1; i <= n; i++) {
            nodes.put("n" + i, new Node("n" + i));
        }
        StringBuilder initial = new StringBuilder();
        for (Node nd : nodes.values()) {
            initial.append(initial.length() == 0 ? "" : ",").append(nd.id).append('=').append(nd.raft).append('@').append(nd.http);
        }
        for (Node nd : nodes.values()) {
            List<String> cmd = new ArrayList<>(List.of(BIN, "serve", "--id", nd.id, "--data-dir", dir.resolve(nd.id).toString(),
                    "--http-addr", nd.http, "--raft-addr", nd.raft, "--election-timeout", "500ms"));
            if (n == 1) {
                cmd.add("--bootstrap");
            } else {
                cmd.addAll(List.of("--initial-cluster", initial.toString()));
            }
            nd.proc = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(nd.id + ".log").toFile())).start();
        }
        poll("a leader every node knows", Duration.ofSeconds(30), () -> nodes.values().stream().allMatch(this::ready));
    }

    List<String> endpoints() {
        return nodes.values().stream().map(nd -> nd.http).toList();
    }

    JsonNode get(Node nd, String path) {
        try {
            HttpResponse<byte[]> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + nd.http + path)).timeout(Duration.ofSeconds(2)).build(),
                    HttpResponse.BodyHandlers.ofByteArray());
            return r.statusCode() == 200 ? JSON.readTree(r.body()) : null;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    boolean ready(Node nd) {
        return nd.running() && get(nd, "/readyz") != null;
    }

    /** The running leader every running member can reach, once there is one. */
    Node leader() {
        Node[] found = new Node[1];
        poll("a running leader", Duration.ofSeconds(30), () -> {
            for (Node nd : nodes.values()) {
                JsonNode st = nd.running() ? get(nd, "/v1/cluster") : null;
                Node l = st == null ? null : nodes.get(st.path("leader").asText());
                if (l != null && ready(l)) {
                    found[0] = l;
                    return true;
                }
            }
            return false;
        });
        return found[0];
    }

    /** Polls cond every 50 ms until it holds, or fails after timeout. */
    static void poll(String what, Duration timeout, BooleanSupplier cond) {
        long end = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() - end < 0) {
            if (cond.getAsBoolean()) {
                return;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
        throw new AssertionError("timed out waiting for " + what);
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    @Override
    public void close() throws Exception {
        for (Node nd : nodes.values()) {
            nd.kill();
        }
        try (var walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
