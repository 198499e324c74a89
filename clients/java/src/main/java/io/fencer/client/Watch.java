package io.fencer.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Watch keeps one watch of GET /v1/events going on a thread of its own: it
 * parses the Server-Sent Events by hand, reconnects across members, and
 * resumes with Last-Event-ID after the last entry delivered in full, so that
 * each event arrives once and in order (api/client/internal/watch). Only an
 * entry's last event carries an id: a stream cut within an entry resumes
 * before it, and the events of it already delivered are skipped. A stream
 * silent for 45 s (members send a comment every 15 s) is taken for dead.
 * {@link #close()} stops it.
 */
public final class Watch implements AutoCloseable {
    private static final long IDLE_NANOS = TimeUnit.SECONDS.toNanos(45);

    private final Transport tr;
    private final String prefix;
    private final Consumer<Event> onEvent;
    private final Consumer<FencerException> onError;
    private final Thread thread;

    private long since;
    private long last;
    private long partialIndex;
    private long partial;
    private long skip;
    private long retry;
    private volatile boolean stopped;
    private volatile InputStream open;
    private volatile long lastRead;

    Watch(Transport tr, String prefix, long since, Consumer<Event> onEvent, Consumer<FencerException> onError) {
        this.tr = tr;
        this.prefix = prefix;
        this.since = since;
        this.last = since;
        this.onEvent = onEvent;
        this.onError = onError;
        this.thread = new Thread(this::run, "fencer-watch");
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    /** The index of the last entry delivered in full: where a new watch would resume. */
    public synchronized long lastIndex() {
        return last;
    }

    /** Stops the watch; no event is delivered after it returns, but for one being delivered. */
    @Override
    public void close() {
        stopped = true;
        closeStream();
        thread.interrupt();
    }

    private void closeStream() {
        InputStream in = open;
        if (in != null) {
            try {
                in.close();
            } catch (IOException e) {
                // Closing is all we wanted.
            }
        }
    }

    private void run() {
        int failures = 0;
        for (int attempt = 0; !stopped; attempt++) {
            String base = tr.endpoints().get(attempt % tr.endpoints().size());
            boolean[] connected = {false};
            FencerException err;
            try {
                if (stream(base, connected)) {
                    failures = 0; // lagged: resume at once
                    continue;
                }
                err = FencerException.unavailable("watch " + prefix + " at " + base + ": the stream ended");
            } catch (FencerException e) {
                err = e;
            }
            if (stopped) {
                return;
            }
            if (err instanceof BadAnswerException || (err.status() >= 400 && err.status() < 500 && err.status() != 429)) {
                onError.accept(err); // a refusal, or a malformed event: it would come again
                return;
            }
            failures = connected[0] ? 1 : failures + 1;
            if (failures >= 8) {
                onError.accept(FencerException.unavailable("watch " + prefix + " after index " + last + ": " + failures
                        + " connections failed: " + err.getMessage()));
                return;
            }
            try {
                Transport.sleepNanos(retry > 0 ? retry : tr.backoff(failures));
            } catch (FencerException e) {
                return; // interrupted by close
            }
        }
    }

    /**
     * Makes one connection to base and delivers its events. True after a
     * lagged event (resume now); it throws why the stream ended otherwise.
     */
    private boolean stream(String base, boolean[] connected) {
        if (since == FencerClient.FROM_NOW) {
            // Resolved once, so that a reconnection resumes from the same place.
            long applied = tr.clusterStatus(base).num("applied_index");
            synchronized (this) {
                since = applied;
                last = applied;
            }
        }
        Transport.Request r = new Transport.Request("GET", "/v1/events");
        r.query = "since=" + since + (prefix.isEmpty() ? "" : "&prefix=" + URLEncoder.encode(prefix, StandardCharsets.UTF_8));
        r.headers = Map.of("Accept", "text/event-stream", "Last-Event-ID", Long.toString(lastIndex()));
        r.attemptTimeout = tr.timeout();
        HttpResponse<InputStream> resp;
        try {
            resp = tr.open(base, r);
        } catch (IOException e) {
            throw FencerException.unavailable("watch via " + base + ": " + Transport.describe(e));
        } catch (InterruptedException e) {
            throw FencerException.unavailable("watch stopped");
        }
        open = resp.body();
        if (stopped) {
            closeStream();
        }
        lastRead = System.nanoTime();
        ScheduledFuture<?> idle = null;
        try (InputStream in = resp.body()) {
            if (resp.statusCode() != 200) {
                byte[] b = in.readNBytes(1 << 20);
                Json body;
                try {
                    body = Json.parse(b, "watch");
                } catch (BadAnswerException e) {
                    body = Json.of(Json.object(), "watch");
                }
                throw FencerException.ofAnswer(resp.statusCode(), body.node(), "watch via " + base);
            }
            connected[0] = true;
            synchronized (this) {
                skip = partial;
                partial = 0;
            }
            idle = Idle.schedule(this);
            BufferedReader lines = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            Sse ev = new Sse();
            for (String line; (line = lines.readLine()) != null;) {
                lastRead = System.nanoTime();
                if (!ev.line(line)) {
                    continue;
                }
                if (ev.retry > 0) {
                    retry = ev.retry;
                }
                boolean lagged = deliver(ev);
                ev = new Sse();
                if (lagged) {
                    return true;
                }
            }
            throw FencerException.unavailable("watch via " + base + ": the stream ended");
        } catch (IOException e) {
            throw FencerException.unavailable("watch via " + base + ": " + Transport.describe(e));
        } finally {
            if (idle != null) {
                idle.cancel(false);
            }
            open = null;
        }
    }

    /** Hands one event to the listener; true when the member cut the stream off as lagged. */
    private boolean deliver(Sse ev) {
        String data = ev.data.toString();
        if (data.endsWith("\n")) {
            data = data.substring(0, data.length() - 1);
        }
        if (data.isEmpty() || stopped) {
            return false;
        }
        Event e = Event.of(Json.parse(data.getBytes(StandardCharsets.UTF_8), "watch event"), ev.type);
        synchronized (this) {
            if (e.type().equals("lagged")) {
                last = Math.max(last, e.index());
                return true;
            }
            if (ev.id == null) {
                if (e.index() != partialIndex) {
                    partialIndex = e.index();
                    partial = 0;
                }
                partial++;
                if (skip > 0 && e.index() == partialIndex) {
                    skip--;
                    return false; // delivered before the reconnection
                }
            } else {
                if (!ev.id.matches("[0-9]{1,19}")) {
                    throw FencerException.badAnswer("watch", "malformed event id \"" + ev.id + "\"");
                }
                last = Long.parseLong(ev.id);
                partial = 0;
                skip = 0;
            }
        }
        onEvent.accept(e);
        return false;
    }

    /** Idle closes a stream that has been silent for too long, so that the watch reconnects. */
    private static final class Idle {
        static ScheduledFuture<?> schedule(Watch w) {
            return SHARED.scheduleAtFixedRate(() -> {
                if (System.nanoTime() - w.lastRead > IDLE_NANOS) {
                    w.closeStream();
                }
            }, 1, 1, TimeUnit.SECONDS);
        }

        private static final java.util.concurrent.ScheduledExecutorService SHARED =
                java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "fencer-watch-idle");
                    t.setDaemon(true);
                    return t;
                });
    }

    /** Sse gathers the fields of one Server-Sent Event, line by line. */
    private static final class Sse {
        String type = "";
        final StringBuilder data = new StringBuilder();
        String id;
        long retry;

        /**
         * Adds one line; true when it ended the event (a blank line).
         * Comments and unknown fields are skipped. Unlike a browser's, the id
         * counts only once its event is complete.
         */
        boolean line(String l) {
            if (l.isEmpty()) {
                return true;
            }
            if (l.charAt(0) == ':') {
                return false;
            }
            int colon = l.indexOf(':');
            String field = colon < 0 ? l : l.substring(0, colon);
            String value = colon < 0 ? "" : l.substring(colon + 1);
            if (value.startsWith(" ")) {
                value = value.substring(1);
            }
            switch (field) {
                case "event" -> type = value;
                case "data" -> data.append(value).append('\n');
                case "id" -> {
                    if (value.indexOf('\0') < 0) {
                        id = value;
                    }
                }
                case "retry" -> {
                    if (value.matches("[0-9]{1,9}")) {
                        retry = Duration.ofMillis(Long.parseLong(value)).toNanos();
                    }
                }
                default -> {
                }
            }
            return false;
        }
    }
}
