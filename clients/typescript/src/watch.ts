// A watch follows GET /v1/events (Server-Sent Events) as an async iterator.
// Every member emits the same events with the same indexes, so when its
// member dies or the stream stalls the watch reconnects to another with
// Last-Event-ID, resuming after the last entry it delivered in full: each
// event arrives once and in order. Events of one entry are delivered
// together, once the entry's last event (the one with the id) has arrived.

import { createParser, type EventSourceMessage } from "eventsource-parser";
import * as answer from "./answer.js";
import { BadAnswerError, FencerError } from "./errors.js";
import { answerError, readBody, sleep, type Transport } from "./transport.js";

/** One event of the stream (wire.Event); fields a type does not use are absent. */
export interface WatchEvent {
  index: number;
  type: string;
  lock?: string;
  key?: string;
  holder?: string;
  token?: number;
  value?: string;
  semaphore?: string;
  session?: number;
  mode?: string;
  [field: string]: unknown;
}

export interface WatchOptions {
  /** Deliver events after this index (default: from now, the leader's index when the watch starts). */
  from?: number;
  /** Only locks, semaphores and keys with this prefix. */
  prefix?: string;
  /** Ends the watch. */
  signal?: AbortSignal;
  /** A stream silent this long is taken for dead and resumed elsewhere (default 35000; the server comments every 15 s). */
  idleTimeoutMs?: number;
}

export class Watch implements AsyncIterable<WatchEvent> {
  private readonly ctl = new AbortController();
  private last: number | undefined;
  private cur = 0;

  /** @internal */
  constructor(private readonly transport: Transport, private readonly opts: WatchOptions) {
    this.last = opts.from;
    if (opts.signal) {
      if (opts.signal.aborted) this.ctl.abort();
      else opts.signal.addEventListener("abort", () => this.ctl.abort(), { once: true });
    }
  }

  /** The index of the last entry delivered in full (where a new watch would resume). */
  get index(): number | undefined {
    return this.last;
  }

  /** close ends the watch; an iteration in progress returns. */
  close(): void {
    this.ctl.abort();
  }

  [Symbol.asyncIterator](): AsyncIterator<WatchEvent> {
    return this.events();
  }

  private async *events(): AsyncGenerator<WatchEvent> {
    try {
      if (this.last === undefined) await this.startIndex();
      let failures = 0;
      const eps = this.transport.endpoints;
      while (!this.ctl.signal.aborted) {
        const base = eps[this.cur % eps.length];
        let connected = false;
        try {
          for await (const ev of this.stream(base)) {
            connected = true;
            yield ev;
          }
        } catch (e) {
          if (this.ctl.signal.aborted) return;
          if (e instanceof FencerError && !(e instanceof Retry)) throw e;
        }
        if (this.ctl.signal.aborted) return;
        this.cur++;
        failures = connected ? 0 : failures + 1;
        if (failures > 0 && failures % eps.length === 0) await sleep(Math.min(100 * 2 ** (failures / eps.length), 2000), this.ctl.signal);
      }
    } finally {
      this.ctl.abort();
    }
  }

  /** startIndex reads the leader's index, for a watch "from now" that can resume without a gap. */
  private async startIndex(): Promise<void> {
    const r = await this.transport.do({ method: "GET", path: "/v1/locks", signal: this.ctl.signal });
    this.last = answer.indexHeader(r.headers.get("fencer-index"), "GET /v1/locks");
  }

  /** stream yields the events of one connection to base, until it ends. */
  private async *stream(base: string): AsyncGenerator<WatchEvent> {
    const q = new URLSearchParams();
    if (this.opts.prefix) q.set("prefix", this.opts.prefix);
    const path = "/v1/events" + (q.size ? "?" + q.toString() : "");
    const conn = new AbortController();
    const stop = () => conn.abort();
    this.ctl.signal.addEventListener("abort", stop, { once: true });
    const idle = this.opts.idleTimeoutMs ?? 35000;
    let timer = setTimeout(stop, idle);
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream", "Last-Event-ID": String(this.last ?? 0) };
      let resp: globalThis.Response;
      try {
        resp = await this.transport.open(base, path, headers, conn.signal);
      } catch (e) {
        throw new Retry(`GET ${path} via ${base}: ${(e as Error).message}`);
      }
      if (resp.status !== 200) {
        const body = await readBody(resp, this.transport.opts.maxAnswerBytes, `GET ${path}`, conn.signal).catch(() => new Uint8Array());
        if (resp.status >= 500) throw new Retry(`GET ${path} via ${base}: HTTP ${resp.status}`);
        if (resp.status < 400) throw new BadAnswerError(`GET ${path} via ${base}: HTTP ${resp.status} is not an event stream`, "status", resp.status);
        throw answerError({ status: resp.status, body }, `GET ${path} via ${base}`);
      }
      if (!resp.body) return;
      const ready: WatchEvent[] = [];
      let entry: WatchEvent[] = [];
      let lagged = false;
      let bad: FencerError | undefined;
      const parser = createParser({
        onEvent: (m: EventSourceMessage) => {
          if (lagged || bad) return;
          let ev: WatchEvent;
          try {
            ev = answer.obj(new TextEncoder().encode(m.data), "GET /v1/events") as WatchEvent;
            if (typeof ev.index !== "number" || typeof ev.type !== "string") throw new BadAnswerError("GET /v1/events: an event without an index or type");
          } catch (e) {
            bad = e as FencerError;
            return;
          }
          if (m.event === "lagged" || ev.type === "lagged") {
            // Every event up to its index was sent: resume from it.
            lagged = true;
            this.last = ev.index;
            return;
          }
          if (this.last !== undefined && ev.index <= this.last) return; // delivered already
          entry.push(ev);
          if (m.id !== undefined) {
            ready.push(...entry);
            entry = [];
          }
        },
      });
      const reader = resp.body.getReader();
      const text = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read().catch((e: Error) => {
          throw new Retry(`GET ${path} via ${base}: ${e.message}`);
        });
        if (done) return;
        clearTimeout(timer);
        timer = setTimeout(stop, idle);
        parser.feed(text.decode(value, { stream: true }));
        while (ready.length > 0) {
          const ev = ready.shift()!;
          this.last = ev.index;
          yield ev;
        }
        if (bad) throw bad;
        if (lagged) throw new Retry("the stream fell behind");
      }
    } finally {
      clearTimeout(timer);
      this.ctl.signal.removeEventListener("abort", stop);
      conn.abort();
    }
  }
}

/** Retry: the stream ended in a way that another member may serve. */
class Retry extends FencerError {
  constructor(message: string) {
    super(message, "unavailable");
  }
}
