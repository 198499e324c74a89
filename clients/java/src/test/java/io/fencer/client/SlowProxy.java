package io.fencer.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * SlowProxy forwards one loopback port to a member, delaying the member's
 * answers or dropping them (a blackhole), as the conformance harness's proxy
 * does. It rewrites the member's address in answers to its own, byte for
 * byte (both are 127.0.0.1 with five-digit ports), so that a client that
 * follows the leader stays behind it.
 */
final class SlowProxy implements AutoCloseable {
    private final ServerSocket ln;
    private final byte[] member;
    private final byte[] self;
    private final String target;
    volatile long delayMillis;
    volatile boolean blackhole;

    SlowProxy(String target) throws IOException {
        this.target = target;
        this.ln = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.member = target.getBytes(StandardCharsets.US_ASCII);
        this.self = addr().getBytes(StandardCharsets.US_ASCII);
        if (member.length != self.length) {
            throw new IOException("addresses of different lengths: " + target + ", " + addr());
        }
        Thread t = new Thread(this::accept, "slow-proxy");
        t.setDaemon(true);
        t.start();
    }

    String addr() {
        return "127.0.0.1:" + ln.getLocalPort();
    }

    private void accept() {
        while (!ln.isClosed()) {
            try {
                Socket c = ln.accept();
                String[] hp = target.split(":");
                Socket m = new Socket(hp[0], Integer.parseInt(hp[1]));
                pump(c.getInputStream(), m.getOutputStream(), false);
                pump(m.getInputStream(), c.getOutputStream(), true);
            } catch (IOException e) {
                return;
            }
        }
    }

    private void pump(InputStream in, OutputStream out, boolean answers) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[64 << 10];
            try {
                for (int n; (n = in.read(buf)) > 0;) {
                    if (answers) {
                        if (delayMillis > 0) {
                            Thread.sleep(delayMillis);
                        }
                        if (blackhole) {
                            continue;
                        }
                        rewrite(buf, n);
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // The connection ended.
            } finally {
                try {
                    out.close();
                } catch (IOException e) {
                    // Closed already.
                }
            }
        }, "slow-proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private void rewrite(byte[] b, int n) {
        for (int i = 0; i + member.length <= n; i++) {
            int j = 0;
            while (j < member.length && b[i + j] == member[j]) {
                j++;
            }
            if (j == member.length) {
                System.arraycopy(self, 0, b, i, self.length);
            }
        }
    }

    @Override
    public void close() throws IOException {
        ln.close();
    }
}
