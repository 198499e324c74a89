// sse.js: GET /v1/events read with fetch().
//
// EventSource cannot send an Authorization header, and the alternatives
// leak the token (a query parameter ends up in logs) or make it ambient (a
// cookie rides along on cross-site requests). So the stream is fetched with
// the bearer token like every other request, its body read as it arrives
// and parsed as Server-Sent Events here; a dropped stream is resumed with
// Last-Event-ID, as EventSource does, so no event is missed or repeated.

import { APIError, authHeaders } from "./api.js";

// parse turns chunks of an SSE body into events {id, type, data}; comment
// lines (the keepalives) are skipped.
export class SSEParser {
  constructor() {
    this.buf = "";
    this.reset();
  }
  reset() {
    this.type = "";
    this.data = [];
    this.id = null;
  }
  push(chunk) {
    this.buf += chunk;
    const out = [];
    let nl;
    while ((nl = this.buf.search(/\r\n|\n|\r/)) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + (this.buf.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (this.data.length > 0 || this.type) {
          out.push({ id: this.id, type: this.type || "message", data: this.data.join("\n") });
        }
        this.reset();
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.type = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id") this.id = value;
    }
    return out;
  }
}

// EventStream follows the node's events from `since` and calls
// onEvent(event) for each (event is the parsed JSON data, with its type),
// onState("live" | "connecting" | "down", detail) as the connection changes,
// onCompacted() when the node no longer has the events after `since` (the
// caller re-lists and calls start again), and onAuth(err) on 401/403.
export class EventStream {
  constructor({ onEvent, onState, onCompacted, onAuth }) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.onCompacted = onCompacted;
    this.onAuth = onAuth;
    this.ctl = null;
    this.lastId = null;
  }

  start(since) {
    this.stop();
    this.lastId = since == null ? null : String(since);
    const ctl = new AbortController();
    this.ctl = ctl;
    this.loop(ctl.signal);
  }

  stop() {
    if (this.ctl) this.ctl.abort();
    this.ctl = null;
  }

  async loop(signal) {
    let backoff = 500;
    while (!signal.aborted) {
      this.onState("connecting");
      try {
        const headers = { Accept: "text/event-stream", ...authHeaders() };
        if (this.lastId != null) headers["Last-Event-ID"] = this.lastId;
        const resp = await fetch("/v1/events", { headers, signal, cache: "no-store", credentials: "omit" });
        if (!resp.ok) {
          let body = null;
          try {
            body = await resp.json();
          } catch {
            body = null;
          }
          const err = new APIError(resp.status, body && body.code, (body && body.error) || resp.statusText, body);
          if (resp.status === 410) {
            this.onCompacted(err);
            return;
          }
          if (resp.status === 401 || resp.status === 403) {
            this.onState("down", err.message);
            this.onAuth(err);
            return;
          }
          throw err;
        }
        this.onState("live");
        backoff = 500;
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        const parser = new SSEParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const ev of parser.push(value)) {
            if (ev.id != null) this.lastId = ev.id;
            if (ev.type === "lagged") break; // the node cut us off: resume from lastId
            let data;
            try {
              data = JSON.parse(ev.data);
            } catch {
              continue;
            }
            this.onEvent({ ...data, type: ev.type });
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        this.onState("down", err.message || String(err));
      }
      if (signal.aborted) return;
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 5000);
    }
  }
}
