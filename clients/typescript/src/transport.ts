// The transport carries requests to the cluster's leader (api/client/doc.go,
// "Leader following" and "What is retried"): it asks GET /v1/cluster who
// leads and sends there, follows Fencer-Leader, leaves a member that could
// not be reached for another at once, backs off after 5xx answers and after
// a round of members none of which answered, and gives up an attempt at a
// leader that hangs once the other members name another. Only a 2xx answer
// is a success, and no redirect is followed.

import { BadAnswerError, errorFromAnswer, FencerError, TimeoutError, UnavailableError, type ErrorBody } from "./errors.js";
import { obj } from "./answer.js";

/** now is the monotonic clock the client measures every lease on, in ms. */
export const now = (): number => performance.now();

/** Options of the transport, with defaults applied by the Client. */
export interface TransportOptions {
  endpoints: string[];
  token?: string;
  attemptTimeoutMs: number;
  attempts: number;
  maxAnswerBytes: number;
}

/** One logical request, sent in one or more attempts. */
export interface Request {
  method: string;
  path: string;
  json?: unknown;
  body?: Uint8Array;
  headers?: Record<string, string>;
  /** Added to each attempt's timeout (an acquire's wait). */
  extraMs?: number;
  /** Replaces the client's per-attempt timeout. */
  attemptTimeoutMs?: number;
  /** The whole call ends by this time on the monotonic clock. */
  deadline?: number;
  signal?: AbortSignal;
}

/** An answer, read in full. */
export interface Response {
  status: number;
  headers: Headers;
  body: Uint8Array;
  /** Send time of the attempt that was answered. */
  sent: number;
  /** Send time of the first attempt. */
  firstSent: number;
  /** Attempts before this one whose answer was lost (or 5xx): the request may have happened. */
  uncertain: boolean;
}

const LEADER_CHECK_AFTER = 1000;
const LEADER_CHECK_EVERY = 8000;
const MIN_BACKOFF = 50;
const MAX_BACKOFF = 1000;

/** baseURL turns "host:port" or an http(s) URL into a base URL. */
export function baseURL(ep: string): string {
  const u = new URL(ep.includes("://") ? ep : "http://" + ep);
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
    throw new TypeError(`endpoint ${JSON.stringify(ep)}: want host:port or an http(s) URL`);
  }
  return `${u.protocol}//${u.host}`;
}

/** sleep waits ms, or until signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function backoff(n: number): number {
  const d = Math.min(MIN_BACKOFF * 2 ** Math.min(n - 1, 20), MAX_BACKOFF);
  return d / 2 + Math.random() * (d / 2);
}

/** An attempt that reached no node: refused, reset, timed out, cut short. */
class NoAnswer extends Error {
  constructor(message: string, readonly dial: boolean, readonly leaderMoved = false) {
    super(message);
  }
}

export class Transport {
  readonly endpoints: string[];
  private leader = "";
  private next = 0;
  private discovering: Promise<string> | undefined;

  constructor(readonly opts: TransportOptions) {
    this.endpoints = opts.endpoints.map(baseURL);
    if (this.endpoints.length === 0) throw new TypeError("no endpoints");
  }

  /** do sends req to the leader, retrying as the file comment says. */
  async do(req: Request): Promise<Response> {
    const what = `${req.method} ${req.path}`;
    let last: FencerError | undefined;
    let unanswered = "";
    let pauses = 0;
    let skipped = 0;
    let firstSent = 0;
    let uncertain = false;
    for (let attempt = 1; ; attempt++) {
      this.checkEnd(req, what, last);
      const base = await this.target(unanswered, req);
      const sent = now();
      if (attempt === 1) firstSent = sent;
      let resp: { status: number; headers: Headers; body: Uint8Array } | undefined;
      try {
        resp = await this.send(base, req, base === this.leader && req.path !== "/v1/cluster");
      } catch (e) {
        if (!(e instanceof NoAnswer)) throw e; // a BadAnswerError: an answer, not believed
        this.checkEnd(req, what, last);
        last = new UnavailableError(`${what} via ${base}: ${e.message}`, "unavailable");
        if (!e.dial) uncertain = true;
        unanswered = base;
      }
      if (resp) {
        const leader = resp.headers.get("fencer-leader");
        if (leader) this.leader = new URL(base).protocol + "//" + leader;
        if (!retryable(resp)) {
          if (resp.status >= 200 && resp.status < 300) {
            return { ...resp, sent, firstSent, uncertain };
          }
          const err = answerError(resp, `${what} via ${base}`);
          err.lostAnswers = uncertain ? 1 : 0;
          throw err;
        }
        // A forwarding node answers no_leader also when the leader vanished
        // mid-request, so any 5xx may hide a landed write.
        last = answerError(resp, `${what} via ${base}`);
        uncertain = true;
        unanswered = "";
      }
      this.forget(base);
      if (attempt >= this.opts.attempts) {
        last!.lostAnswers = uncertain ? 1 : 0;
        throw last!;
      }
      if (unanswered !== "" && skipped < this.endpoints.length - 1) {
        skipped++;
        continue; // no pause: another node answers now
      }
      skipped = 0;
      pauses++;
      let pause = backoff(pauses);
      const ra = resp?.headers.get("retry-after");
      if (ra && /^[0-9]+$/.test(ra)) pause = Math.max(pause, Number(ra) * 1000);
      if (req.deadline !== undefined) pause = Math.min(pause, req.deadline - now());
      await sleep(pause, req.signal);
    }
  }

  /** checkEnd throws once the call's deadline has passed or its signal aborted. */
  private checkEnd(req: Request, what: string, last: FencerError | undefined): void {
    const suffix = last ? ` (last error: ${last.message})` : "";
    if (req.signal?.aborted) {
      const r = req.signal.reason;
      if (r instanceof FencerError) throw r;
      throw new TimeoutError(`${what}: the call was aborted${suffix}`, "timeout", 0, {}, { cause: r });
    }
    if (req.deadline !== undefined && now() >= req.deadline) {
      throw new TimeoutError(`${what}: the call's time ran out${suffix}`, "timeout", 0, {}, { cause: last });
    }
  }

  /** target picks where an attempt goes: the leader, a discovered one, or the next endpoint. */
  private async target(unanswered: string, req: Request): Promise<string> {
    if (this.leader !== "" && this.leader !== unanswered) return this.leader;
    if (unanswered === "") {
      const l = await this.discover(req);
      if (l !== "") return l;
    }
    for (let i = 0; i < this.endpoints.length; i++) {
      const ep = this.endpoints[this.next % this.endpoints.length];
      if (ep !== unanswered) return ep;
      this.next++;
    }
    return this.endpoints[this.next % this.endpoints.length];
  }

  /** discover asks the endpoints in turn who leads; one discovery at a time. */
  private discover(req: Request): Promise<string> {
    this.discovering ??= (async () => {
      try {
        const start = this.next;
        for (let i = 0; i < this.endpoints.length; i++) {
          const ep = this.endpoints[(start + i) % this.endpoints.length];
          const l = await this.leaderOf(ep, req.signal);
          if (l !== "") {
            this.leader = l;
            this.next = start + i;
            return l;
          }
        }
        return "";
      } finally {
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }

  /** leaderOf asks the member at base, and only it, who leads ("" if it cannot say). */
  private async leaderOf(base: string, signal?: AbortSignal): Promise<string> {
    try {
      const r = await this.send(base, { method: "GET", path: "/v1/cluster", attemptTimeoutMs: Math.min(this.opts.attemptTimeoutMs, 2000), signal }, false);
      if (r.status !== 200) return "";
      const st = obj(r.body, "GET /v1/cluster");
      const members = Array.isArray(st.members) ? st.members : [];
      for (const m of members) {
        if (m && typeof m === "object" && m.id === st.leader && st.leader && typeof m.http_addr === "string" && m.http_addr) {
          return new URL(base).protocol + "//" + m.http_addr;
        }
      }
    } catch {
      // no answer, or not one to follow
    }
    return "";
  }

  private forget(base: string): void {
    if (this.leader === base) this.leader = "";
    this.next++;
  }

  /**
   * send performs one attempt against base, reading the answer in full
   * (refused past maxAnswerBytes). It throws NoAnswer when no answer
   * arrived, BadAnswerError for one it cannot read.
   */
  private async send(base: string, req: Request, watchLeader: boolean): Promise<{ status: number; headers: Headers; body: Uint8Array }> {
    const ctl = new AbortController();
    let timeout = (req.attemptTimeoutMs ?? this.opts.attemptTimeoutMs) + (req.extraMs ?? 0);
    if (req.deadline !== undefined) timeout = Math.min(timeout, req.deadline - now());
    const timer = setTimeout(() => ctl.abort(new NoAnswer(`no answer within ${Math.round(timeout)}ms`, false)), Math.max(0, timeout));
    const onAbort = () => ctl.abort(new NoAnswer("the call was aborted", false));
    req.signal?.addEventListener("abort", onAbort, { once: true });
    const stopWatch = watchLeader && this.endpoints.length > 1 ? this.watchLeader(base, ctl) : () => {};
    const headers: Record<string, string> = { Accept: "application/json", ...req.headers };
    if (this.opts.token) headers.Authorization = "Bearer " + this.opts.token;
    let body: Uint8Array | string | undefined = req.body;
    if (req.json !== undefined) {
      body = JSON.stringify(req.json);
      headers["Content-Type"] = "application/json";
    }
    const what = `${req.method} ${req.path} via ${base}`;
    try {
      let resp: globalThis.Response;
      try {
        resp = await fetch(base + req.path, { method: req.method, headers, body, redirect: "manual", signal: ctl.signal });
      } catch (e) {
        throw noAnswer(e, ctl.signal);
      }
      if (resp.status >= 300 && resp.status < 400) {
        await resp.body?.cancel().catch(() => {});
        const loc = resp.headers.get("location");
        throw new BadAnswerError(`${what}: HTTP ${resp.status} is neither a success nor an error${loc ? ` (Location: ${loc})` : ""}; the client follows no redirect`, "status", resp.status);
      }
      const b = await readBody(resp, this.opts.maxAnswerBytes, what, ctl.signal);
      return { status: resp.status, headers: resp.headers, body: b };
    } finally {
      clearTimeout(timer);
      stopWatch();
      req.signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * watchLeader aborts an attempt sent to base, the leader as this client
   * knew it, once the other members name another leader, and follows that
   * one: a leader that hangs without closing its connections (a frozen
   * process or host) holds the attempt only until the cluster has elected
   * another. It asks after a second, then at doubling intervals up to 8 s.
   */
  private watchLeader(base: string, ctl: AbortController): () => void {
    let every = LEADER_CHECK_AFTER;
    let stopped = false;
    let timer: NodeJS.Timeout;
    const check = async () => {
      for (const ep of this.endpoints) {
        if (ep === base || stopped) continue;
        const l = await this.leaderOf(ep, ctl.signal);
        if (l === "") continue;
        if (l !== base && !stopped) {
          if (this.leader === base) this.leader = l;
          ctl.abort(new NoAnswer("the other members name another leader", false, true));
          return;
        }
        break; // base still leads, as this member sees it
      }
      if (!stopped) {
        every = Math.min(2 * every, LEADER_CHECK_EVERY);
        timer = setTimeout(check, every);
      }
    };
    timer = setTimeout(check, every);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /** open sends one GET to base and hands back the open answer (for event streams). */
  async open(base: string, path: string, headers: Record<string, string>, signal: AbortSignal): Promise<globalThis.Response> {
    const h: Record<string, string> = { ...headers };
    if (this.opts.token) h.Authorization = "Bearer " + this.opts.token;
    return fetch(base + path, { method: "GET", headers: h, redirect: "manual", signal });
  }
}

function retryable(r: { status: number; body: Uint8Array }): boolean {
  if (r.status === 502 || r.status === 504) return true;
  if (r.status !== 503) return false;
  try {
    return (JSON.parse(new TextDecoder().decode(r.body)) as ErrorBody).code !== "internal";
  } catch {
    return true;
  }
}

/** answerError makes the error of a non-2xx answer. */
export function answerError(r: { status: number; body: Uint8Array }, what: string): FencerError {
  if (r.status < 400) {
    return new BadAnswerError(`${what}: HTTP ${r.status} is neither a success nor an error`, "status", r.status);
  }
  let body: ErrorBody = {};
  try {
    const v = JSON.parse(new TextDecoder().decode(r.body));
    if (v && typeof v === "object" && !Array.isArray(v)) body = v as ErrorBody;
  } catch {
    body = { error: new TextDecoder().decode(r.body.slice(0, 200)) };
  }
  return errorFromAnswer(r.status, body, what);
}

function noAnswer(e: unknown, signal: AbortSignal): NoAnswer {
  if (signal.aborted && signal.reason instanceof NoAnswer) return signal.reason;
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? "";
  const dial = code === "ECONNREFUSED" || code === "EHOSTUNREACH" || code === "ENETUNREACH" || code === "UND_ERR_CONNECT_TIMEOUT";
  return new NoAnswer(`${(e as Error).message}${cause?.message ? ": " + cause.message : ""}`, dial);
}

/** readBody reads an answer's body, refusing it once it passes limit bytes. */
export async function readBody(resp: globalThis.Response, limit: number, what: string, signal: AbortSignal): Promise<Uint8Array> {
  const length = resp.headers.get("content-length");
  if (length !== null && /^[0-9]+$/.test(length) && Number(length) > limit) {
    await resp.body?.cancel().catch(() => {});
    throw new BadAnswerError(`${what}: the answer's Content-Length ${length} is above the client's limit of ${limit} bytes (maxAnswerBytes)`, "too_large", resp.status);
  }
  if (!resp.body) return new Uint8Array();
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.length;
      if (n > limit) {
        await reader.cancel().catch(() => {});
        throw new BadAnswerError(`${what}: the answer is longer than the client's limit of ${limit} bytes (maxAnswerBytes)`, "too_large", resp.status);
      }
      chunks.push(value);
    }
  } catch (e) {
    if (e instanceof BadAnswerError) throw e;
    throw noAnswer(e, signal);
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}
