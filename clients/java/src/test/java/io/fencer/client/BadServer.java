package io.fencer.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * BadServer plays one scenario of clients/testdata/bad_server.json (its
 * README gives the format): raw HTTP/1.1 answers, Connection: close.
 */
final class BadServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final ServerSocket ln;
    private final JsonNode table;
    private final String call;
    private final JsonNode answer;
    final Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();

    BadServer(JsonNode table, JsonNode scenario) throws IOException {
        this.table = table;
        this.call = scenario.path("call").asText();
        this.answer = scenario.get("answer");
        this.ln = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::accept, "bad-server");
        t.setDaemon(true);
        t.start();
    }

    String endpoint() {
        return "127.0.0.1:" + ln.getLocalPort();
    }

    int count(String op) {
        return seen.computeIfAbsent(op, k -> new AtomicInteger()).get();
    }

    private void accept() {
        while (!ln.isClosed()) {
            try {
                Socket s = ln.accept();
                Thread t = new Thread(() -> serve(s), "bad-server-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s) {
        try (s) {
            InputStream in = s.getInputStream();
            String head = readHead(in);
            if (head.isEmpty()) {
                return;
            }
            String[] first = head.split("\r\n")[0].split(" ");
            String method = first[0];
            String path = first[1].split("\\?")[0];
            int length = 0;
            String fencingToken = "";
            for (String h : head.split("\r\n")) {
                String lower = h.toLowerCase();
                if (lower.startsWith("content-length:")) {
                    length = Integer.parseInt(h.substring(15).trim());
                } else if (lower.startsWith("fencing-token:")) {
                    fencingToken = h.substring(14).trim();
                }
            }
            byte[] body = in.readNBytes(length);
            boolean redirected = path.startsWith("/redirected/");
            if (redirected) {
                path = path.substring("/redirected".length());
            }
            String op = op(method, path);
            seen.computeIfAbsent(op, k -> new AtomicInteger()).incrementAndGet();
            JsonNode def = table.path("defaults").path(op);
            JsonNode a = !redirected && op.equals(call) && answer != null ? answer : def;
            JsonNode req = op.equals("put") || body.length == 0 ? JSON.createObjectNode() : JSON.readTree(body);
            String bodyText = (a.has("body") ? a : def).path("body").asText("");
            bodyText = substitute(bodyText, path, req, fencingToken);
            if (a.has("pad_bytes")) {
                bodyText = bodyText + " ".repeat(Math.max(a.get("pad_bytes").asInt() - bodyText.length(), 0));
            }
            write(s.getOutputStream(), a, bodyText);
        } catch (IOException e) {
            // The client hung up.
        }
    }

    private static String op(String method, String path) {
        if (path.startsWith("/v1/kv/")) {
            return "put";
        }
        for (String op : new String[] {"acquire", "renew", "release"}) {
            if (method.equals("POST") && path.endsWith("/" + op)) {
                return op;
            }
        }
        return "other";
    }

    private String substitute(String b, String path, JsonNode req, String fencingToken) {
        String[] parts = path.split("/");
        String name = parts.length > 3 ? parts[3] : "";
        String key = path.startsWith("/v1/kv/") ? path.substring(7) : "";
        String token = req.has("token") ? req.get("token").asText() : !fencingToken.isEmpty() ? fencingToken : "7";
        String ttl = req.has("ttl_ms") ? req.get("ttl_ms").asText() : table.path("grant").path("ttl_ms").asText();
        return b.replace("${name}", name).replace("${holder}", req.path("holder").asText(""))
                .replace("${ttl_ms}", ttl).replace("${request_id}", req.path("request_id").asText(""))
                .replace("${token}", token).replace("${key}", key);
    }

    private static void write(OutputStream out, JsonNode a, String body) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int status = a.path("status").asInt(200);
        StringBuilder h = new StringBuilder("HTTP/1.1 " + status + " X\r\nConnection: close\r\n");
        for (Iterator<Map.Entry<String, JsonNode>> it = a.path("headers").fields(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            h.append(e.getKey()).append(": ").append(e.getValue().asText()).append("\r\n");
        }
        byte[] bb = body.getBytes(StandardCharsets.UTF_8);
        if (!a.path("no_length").asBoolean(false)) {
            h.append("Content-Length: ").append(bb.length).append("\r\n");
        }
        h.append("\r\n");
        b.write(h.toString().getBytes(StandardCharsets.US_ASCII));
        b.write(bb);
        byte[] all = b.toByteArray();
        long drip = a.path("drip_ms").asLong(0);
        if (drip == 0) {
            out.write(all);
            out.flush();
            return;
        }
        for (byte x : all) {
            out.write(x);
            out.flush();
            try {
                Thread.sleep(drip);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int n = 0;
        for (int c; (c = in.read()) >= 0;) {
            b.write(c);
            n = (c == '\r' || c == '\n') ? n + 1 : 0;
            if (n == 4) {
                break;
            }
        }
        return b.toString(StandardCharsets.US_ASCII);
    }

    @Override
    public void close() throws IOException {
        ln.close();
    }
}
