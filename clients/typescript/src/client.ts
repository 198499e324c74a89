// The client: one object per cluster, with every primitive of the API on it.
// The rules it keeps are api/client/doc.go's; README.md says what they
// guarantee.

import { hostname } from "node:os";
import * as answer from "./answer.js";
import {
  BadAnswerError, InvalidModeError, InvalidNamesError, LeaseLostError, LockDelayError,
  LockHeldError, NotFoundError, OutcomeUnknownError, RevokedError, StaleTokenError, TimeoutError,
} from "./errors.js";
import { Lease, MultiLock, underLease, type Kind } from "./lease.js";
import {
  checkTTL, checkWait, DEFAULT_TTL, MAX_NAMES, MAX_WAIT, requestId, seg,
  type AcquireOptions, type ClientOptions, type ElectionLeader, type GrantRecord,
} from "./options.js";
import { Session, sessionGrants, type SessionAcquireOptions, type SessionGrant } from "./session.js";
import { now, sleep, Transport, type Request, type Response } from "./transport.js";
import { Watch, type WatchOptions } from "./watch.js";

/** Client is a client of one fencer cluster. */
export class Client {
  readonly transport: Transport;
  readonly holder: string;

  /** endpoints: the HTTP addresses of some members ("127.0.0.1:7001" or "https://10.0.0.1:7001"). */
  constructor(endpoints: string[] | string, opts: ClientOptions = {}) {
    const eps = typeof endpoints === "string" ? endpoints.split(",").filter((e) => e !== "") : endpoints;
    this.transport = new Transport({
      endpoints: eps,
      token: opts.token,
      attemptTimeoutMs: opts.attemptTimeoutMs ?? 10000,
      attempts: Math.max(1, opts.attempts ?? 10),
      maxAnswerBytes: opts.maxAnswerBytes ?? 4 << 20,
    });
    this.holder = opts.holder ?? `${hostname()}:${process.pid}`;
  }

  /** request sends one API call to the leader (lower level than the rest). */
  request(req: Request): Promise<Response> {
    return this.transport.do(req);
  }

  private async json(req: Request): Promise<answer.Obj> {
    return answer.obj((await this.request(req)).body, `${req.method} ${req.path}`);
  }

  // ---- locks, permits, elections -------------------------------------------

  /**
   * acquire takes lock name, queueing up to waitMs, and keeps it alive.
   * LockHeldError when it stays held. The lease is believed until the send
   * time of its last confirmed acquire or renewal plus TTL minus a margin;
   * a grant that arrives more than TTL/3 after its request was sent is
   * confirmed by one renewal first (and given back if that fails).
   */
  acquire(name: string, opts: AcquireOptions = {}): Promise<Lease> {
    return this.acquireKind("locks", name, opts);
  }

  /** acquirePermit takes one of limit permits of semaphore name: acquire's rules. */
  acquirePermit(name: string, limit: number, opts: AcquireOptions = {}): Promise<Lease> {
    return this.acquireKind("semaphores", name, { ...opts, limit });
  }

  private async acquireKind(kind: Kind, name: string, opts: AcquireOptions & { limit?: number }): Promise<Lease> {
    const ttlMs = opts.ttlMs ?? DEFAULT_TTL;
    checkTTL(ttlMs);
    const body = this.acquireBody(kind, opts);
    body.ttl_ms = ttlMs;
    const { grant, r } = await this.sendAcquire(kind, name, body, opts, ttlMs);
    // The server starts the lease after the request that asked for it was
    // sent: the attempt answered, or for a retry answered with an earlier
    // grant, the first attempt.
    const start = grant.existing === true ? r.firstSent : r.sent;
    const lease = new Lease(this, grant, start, kind);
    const received = now();
    if (received - start > lease.ttlMs / 3) await lease.confirmGrant(received, opts.signal);
    lease.begin(opts.keepAlive ?? true);
    return lease;
  }

  /** @internal acquireUnder takes a grant under a session. */
  async acquireUnder(s: Session, kind: Kind, name: string, opts: SessionAcquireOptions & { limit?: number }): Promise<Lease> {
    // An acquire under a session that may have ended would be refused, or
    // worse, granted for a moment the client could not trust.
    s.check();
    const body = this.acquireBody(kind, opts);
    body.session = s.id;
    body.session_lease = s.secret;
    const { grant, r } = await this.sendAcquire(kind, name, body, opts, s.ttlMs, s.id);
    const lease = new Lease(this, grant, grant.existing === true ? r.firstSent : r.sent, kind, s);
    // The grant lives on the session's lease, whose deadline a late grant
    // does not move: nothing of its own to confirm or renew.
    s.attach(lease);
    return lease;
  }

  private acquireBody(kind: Kind, opts: AcquireOptions & { limit?: number }): answer.Obj {
    const waitMs = opts.waitMs ?? 0;
    checkWait(waitMs);
    const body: answer.Obj = { holder: opts.holder ?? this.holder, wait_ms: waitMs, request_id: requestId() };
    if (kind === "semaphores") body.limit = opts.limit;
    if (opts.lockDelayMs) body.lock_delay_ms = opts.lockDelayMs;
    if (opts.value !== undefined) body.value = opts.value;
    if (opts.mode !== undefined && opts.mode !== "exclusive" && opts.mode !== "shared") {
      throw new InvalidModeError(`mode ${JSON.stringify(opts.mode)}: want "shared" or "exclusive"`, "invalid_mode");
    }
    if (opts.mode === "shared") body.mode = "shared";
    return body;
  }

  private async sendAcquire(kind: Kind, name: string, body: answer.Obj, opts: AcquireOptions, ttlMs: number, session?: number) {
    // One request id across every attempt: a retry after a lost answer is
    // answered with the first grant, never a second token.
    const r = await this.request({ method: "POST", path: `/v1/${kind}/${seg(name)}/acquire`, json: body, extraMs: Number(body.wait_ms), signal: opts.signal });
    // A grant that does not match the request is not used: the client
    // cannot tell what, if anything, it holds; one the server made expires.
    const grant = answer.grant(answer.obj(r.body, `acquire ${name}`), {
      kind, name, holder: String(body.holder), ttlMs, requestId: String(body.request_id),
      limit: kind === "semaphores" ? Number(body.limit) : undefined, session,
      mode: kind === "locks" ? String(body.mode ?? "") : undefined,
    });
    return { grant, r };
  }

  /**
   * multiLock takes every lock of names or none, in one entry, with one
   * token and one lease (at most 64 names, none twice). It does not wait.
   */
  async multiLock(names: string[], opts: { ttlMs?: number; holder?: string; keepAlive?: boolean; signal?: AbortSignal } = {}): Promise<MultiLock> {
    const ttlMs = opts.ttlMs ?? DEFAULT_TTL;
    checkTTL(ttlMs);
    if (names.length < 1 || names.length > MAX_NAMES || new Set(names).size !== names.length) {
      throw new InvalidNamesError(`names ${JSON.stringify(names)}: want 1 to ${MAX_NAMES} lock names, none twice`, "invalid_names");
    }
    const holder = opts.holder ?? this.holder;
    const body = { names, holder, ttl_ms: ttlMs, request_id: requestId() };
    const r = await this.request({ method: "POST", path: "/v1/locks/acquire", json: body, signal: opts.signal });
    const what = `multi-lock ${names.join(",")}`;
    const g = answer.obj(r.body, what);
    if (!Array.isArray(g.names) || g.names.length !== names.length || g.names.some((n, i) => n !== names[i])) {
      throw new BadAnswerError(`${what}: the answer names locks ${JSON.stringify(g.names)}`, "mismatch");
    }
    answer.equal(g, "holder", holder, what);
    answer.token(g.token, what);
    answer.secret(g, what);
    answer.ttlAtMost(g, ttlMs, what);
    if ("request_id" in g) answer.equal(g, "request_id", body.request_id, what);
    const start = g.existing === true ? r.firstSent : r.sent;
    const m = new MultiLock(this, g, start);
    const received = now();
    if (received - start > m.ttlMs / 3) await m.confirmGrant(received, opts.signal);
    m.begin(opts.keepAlive ?? true);
    return m;
  }

  /** @internal releaseMulti releases multi-grant token; one found gone after a lost answer counts as released. */
  async releaseMulti(token: number, secret: string): Promise<void> {
    try {
      await this.request({ method: "POST", path: "/v1/locks/release", json: { lease: secret, token } });
    } catch (e) {
      if (!(e instanceof LeaseLostError) || !e.lostAnswers) throw e;
    }
  }

  /** @internal renew renews a grant once; the answer must name it and its TTL. */
  async renew(l: Lease, deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response> {
    const r = await this.request({ method: "POST", path: `/v1/${l.kind}/${seg(l.name)}/renew`, json: { lease: l.secret, token: l.token }, deadline, attemptTimeoutMs, signal });
    answer.renewal(answer.obj(r.body, "renew " + l.what), l.kind === "locks" ? "lock" : "semaphore", l.name, l.token, l.ttlMs);
    return r;
  }

  /** release releases a grant by its token and secret; one found gone after a lost answer counts as released. */
  async release(kind: Kind, name: string, token: number, secret: string): Promise<void> {
    try {
      await this.request({ method: "POST", path: `/v1/${kind}/${seg(name)}/release`, json: { lease: secret, token } });
    } catch (e) {
      if (!(e instanceof LeaseLostError) || !e.lostAnswers) throw e;
    }
  }

  /** @internal proclaim publishes value for a held lock; returns the value the server stored. */
  async proclaim(l: Lease, value: string): Promise<string> {
    const b = await this.json({ method: "POST", path: `/v1/locks/${seg(l.name)}/value`, json: { lease: l.secret, token: l.token, value } });
    answer.equal(b, "token", l.token, "proclaim " + l.what);
    return answer.str(b, "value", "proclaim " + l.what);
  }

  /** status reads a lock: held, holder, token, ttl_ms, remaining_ms, value, shared_holders. */
  status(name: string): Promise<answer.Obj> {
    return this.json({ method: "GET", path: `/v1/locks/${seg(name)}` });
  }

  /** locks lists the held locks. */
  async locks(): Promise<answer.Obj[]> {
    return answer.objects(await this.json({ method: "GET", path: "/v1/locks" }), "locks", "GET /v1/locks");
  }

  /** semaphore reads a semaphore: limit, holders, waiters. */
  semaphore(name: string): Promise<answer.Obj> {
    return this.json({ method: "GET", path: `/v1/semaphores/${seg(name)}` });
  }

  /**
   * check says whether token is lock name's current grant; token is the
   * lock's exclusive grant's (0 when free or shared), mode the asked
   * token's mode when it is current.
   */
  async check(name: string, token: number): Promise<{ current: boolean; token: number; mode: string }> {
    const b = await this.json({ method: "GET", path: `/v1/locks/${seg(name)}/check?token=${token}` });
    const what = `check ${name}`;
    return { current: answer.bool(b, "current", what), token: Number(b.token ?? 0), mode: answer.str(b, "mode", what) };
  }

  /** checkPermit says whether token is one of semaphore name's current permits. */
  async checkPermit(name: string, token: number): Promise<boolean> {
    return answer.bool(await this.json({ method: "GET", path: `/v1/semaphores/${seg(name)}/check?token=${token}` }), "current", "check " + name);
  }

  /** history lists a lock's last grants, newest first (or a semaphore's, with kind "semaphores"). */
  async history(name: string, opts: { limit?: number; kind?: Kind } = {}): Promise<GrantRecord[]> {
    const q = opts.limit !== undefined ? `?limit=${opts.limit}` : "";
    const b = await this.json({ method: "GET", path: `/v1/${opts.kind ?? "locks"}/${seg(name)}/history${q}` });
    const grants = answer.objects(b, "grants", "history of " + name);
    for (const g of grants) answer.token(g.token, "history of " + name);
    return grants as unknown as GrantRecord[];
  }

  /** tokenInfo says which lock or semaphore and holder got token, and how the grant ended (UnknownTokenError). */
  async tokenInfo(token: number): Promise<GrantRecord> {
    const b = await this.json({ method: "GET", path: `/v1/tokens/${token}` });
    answer.equal(b, "token", token, `GET /v1/tokens/${token}`);
    return b as unknown as GrantRecord;
  }

  /**
   * revoke ends another's grant with token now, as its expiry would
   * (operators only); kind "semaphores" for a permit. A retry that finds it
   * revoked after a lost answer counts as revoked.
   */
  async revoke(name: string, token: number, kind: Kind = "locks"): Promise<answer.Obj> {
    try {
      const b = await this.json({ method: "POST", path: `/v1/${kind}/${seg(name)}/revoke`, json: { token } });
      answer.equal(b, "token", token, `revoke ${name}`);
      return b;
    } catch (e) {
      if (e instanceof RevokedError && e.lostAnswers) return { token };
      throw e;
    }
  }

  /** revokeSession ends session id and every grant under it now (operators only); returns the grants it ended. */
  async revokeSession(id: number): Promise<SessionGrant[]> {
    try {
      const b = await this.json({ method: "POST", path: `/v1/sessions/${id}/revoke`, json: {} });
      return sessionGrants(b, "revoked", `revoke session ${id}`);
    } catch (e) {
      if (e instanceof RevokedError && e.lostAnswers) return [];
      throw e;
    }
  }

  /**
   * campaign blocks until this caller leads election name with value
   * published (queueing a minute at a time, waiting out a lock-delay), or
   * until timeoutMs has passed (then the last refusal). The lease's token
   * is the term; proclaim changes the value, resign steps down.
   */
  campaign(name: string, value: string, opts: Omit<AcquireOptions, "value" | "waitMs" | "mode"> & { timeoutMs?: number } = {}): Promise<Lease> {
    return this.campaignWith((waitMs) => this.acquire(name, { ...opts, value, waitMs }), opts.timeoutMs, opts.signal);
  }

  /** @internal */
  async campaignWith(acquire: (waitMs: number) => Promise<Lease>, timeoutMs?: number, signal?: AbortSignal): Promise<Lease> {
    const end = timeoutMs === undefined ? Infinity : now() + timeoutMs;
    for (;;) {
      const waitMs = Math.floor(Math.max(0, Math.min(MAX_WAIT, end - now())));
      try {
        return await acquire(waitMs);
      } catch (e) {
        if (e instanceof LockDelayError) {
          if (now() + e.retryAfterMs >= end) throw e;
          await sleep(e.retryAfterMs, signal);
        } else if (e instanceof LockHeldError || (e instanceof TimeoutError && e.status === 504)) {
          if (now() >= end || signal?.aborted) throw e;
        } else {
          throw e;
        }
      }
    }
  }

  /** leader reads election name's leader now; NotFoundError when nobody leads. */
  async leader(name: string): Promise<ElectionLeader> {
    const st = await this.status(name);
    if (st.held !== true) throw new NotFoundError(`election ${JSON.stringify(name)} has no leader`, "not_found");
    return { holder: answer.str(st, "holder", name), value: answer.str(st, "value", name), token: answer.token(st.token, "lock " + name) };
  }

  /**
   * observe yields election name's leader now (if any) and then each new
   * leader or value, in term order: the lock list and the index it was
   * read at, then the events after that index, so nothing is missed or
   * seen twice. It ends when signal aborts.
   */
  async *observe(name: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<ElectionLeader> {
    const r = await this.request({ method: "GET", path: "/v1/locks", signal: opts.signal });
    const index = answer.indexHeader(r.headers.get("fencer-index"), "GET /v1/locks");
    let last: ElectionLeader | undefined;
    for (const st of answer.objects(answer.obj(r.body, "GET /v1/locks"), "locks", "GET /v1/locks")) {
      if (st.lock === name && st.held === true) {
        last = { holder: String(st.holder ?? ""), value: String(st.value ?? ""), token: answer.token(st.token, "lock " + name) };
        yield last;
      }
    }
    const w = this.watch({ from: index, prefix: name, signal: opts.signal });
    try {
      for await (const ev of w) {
        if (ev.lock !== name || !["acquired", "handed_off", "value_set"].includes(ev.type)) continue;
        const cur = { holder: String(ev.holder ?? ""), value: String(ev.value ?? ""), token: answer.token(ev.token, "event of " + name) };
        // A proclaim retried after a lost answer applies twice: the same
        // state again is no change.
        if (last && cur.holder === last.holder && cur.value === last.value && cur.token === last.token) continue;
        last = cur;
        yield cur;
      }
    } finally {
      w.close();
    }
  }

  // ---- sessions ---------------------------------------------------------------

  /**
   * session opens a session of ttlMs and keeps it alive; grants taken with
   * its lock, acquirePermit and campaign live as long as it.
   */
  async session(opts: { ttlMs?: number; holder?: string; lockDelayMs?: number; keepAlive?: boolean; signal?: AbortSignal } = {}): Promise<Session> {
    const ttlMs = opts.ttlMs ?? DEFAULT_TTL;
    checkTTL(ttlMs);
    const holder = opts.holder ?? this.holder;
    const body: answer.Obj = { holder, ttl_ms: ttlMs, request_id: requestId() };
    if (opts.lockDelayMs) body.lock_delay_ms = opts.lockDelayMs;
    const r = await this.request({ method: "POST", path: "/v1/sessions", json: body, signal: opts.signal });
    const what = `create session for ${JSON.stringify(holder)}`;
    const c = answer.obj(r.body, what);
    answer.token(c.session, what + ": session");
    answer.equal(c, "holder", holder, what);
    answer.secret(c, what);
    answer.ttlAtMost(c, ttlMs, what);
    if ("request_id" in c) answer.equal(c, "request_id", body.request_id, what);
    const start = c.existing === true ? r.firstSent : r.sent;
    const s = new Session(this, c, start);
    const received = now();
    if (received - start > s.ttlMs / 3) await s.confirmGrant(received, opts.signal);
    s.begin(opts.keepAlive ?? true);
    return s;
  }

  /** @internal renewSession renews a session once; the answer must name it and its TTL. */
  async renewSession(s: Session, deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response> {
    const r = await this.request({ method: "POST", path: `/v1/sessions/${s.id}/renew`, json: { lease: s.secret }, deadline, attemptTimeoutMs, signal });
    const b = answer.obj(r.body, "renew " + s.what);
    answer.equal(b, "session", s.id, "renew " + s.what);
    answer.equal(b, "ttl_ms", s.ttlMs, "renew " + s.what);
    return r;
  }

  /** closeSession ends session id and every grant under it; returns what it released. */
  async closeSession(id: number, secret: string): Promise<SessionGrant[]> {
    const b = await this.json({ method: "POST", path: `/v1/sessions/${id}/close`, json: { lease: secret } });
    answer.equal(b, "session", id, `close session ${id}`);
    return sessionGrants(b, "released", `close session ${id}`);
  }

  /** getSession reads a session: holder, ttl_ms, remaining_ms, grants (UnknownSessionError). */
  async getSession(id: number): Promise<answer.Obj> {
    const b = await this.json({ method: "GET", path: `/v1/sessions/${id}` });
    answer.equal(b, "session", id, `GET session ${id}`);
    sessionGrants(b, "grants", `GET session ${id}`);
    return b;
  }

  // ---- fenced keys ------------------------------------------------------------

  /**
   * put is a fenced write: stored only if token is above the key's last
   * token (and, with lock, is that lock's current grant). StaleTokenError,
   * NotLockHolderError; OutcomeUnknownError when an attempt's answer was
   * lost and a retry was refused as stale (the first may have landed).
   */
  async put(key: string, value: string | Uint8Array, token: number, opts: { lock?: string; signal?: AbortSignal } = {}): Promise<number> {
    const headers: Record<string, string> = { "Fencing-Token": String(token), "Content-Type": "application/octet-stream" };
    if (opts.lock) headers["Fencing-Lock"] = opts.lock;
    const body = typeof value === "string" ? new TextEncoder().encode(value) : value;
    let r: Response;
    try {
      r = await this.request({ method: "PUT", path: `/v1/kv/${seg(key)}`, body, headers, signal: opts.signal });
    } catch (e) {
      if (e instanceof StaleTokenError && e.lostAnswers) {
        throw new OutcomeUnknownError(`put ${JSON.stringify(key)} with token ${token}: an attempt's answer was lost and the retry was refused as stale: the first may have landed`, "outcome_unknown", e.status, e.body, { cause: e });
      }
      throw e;
    }
    // Only an answer that names the key and token is a stored write.
    const b = answer.obj(r.body, `put ${key}`);
    answer.equal(b, "key", key, `put ${key}`);
    answer.equal(b, "token", token, `put ${key}`);
    return token;
  }

  /** get reads a fenced key: its value and the token of the write that stored it (NotFoundError). */
  async get(key: string, opts: { signal?: AbortSignal } = {}): Promise<{ value: Uint8Array; token: number }> {
    const r = await this.request({ method: "GET", path: `/v1/kv/${seg(key)}`, signal: opts.signal });
    return { value: r.body, token: answer.tokenHeader(r.headers.get("fencing-token"), `GET /v1/kv/${key}`) };
  }

  /** delete removes a key and its mark (operators only with an ACL); returns the mark it had. */
  async delete(key: string): Promise<number> {
    const b = await this.json({ method: "DELETE", path: `/v1/kv/${seg(key)}` });
    const t = b.last_token ?? 0;
    return t === 0 ? 0 : answer.token(t, `delete ${key}`);
  }

  // ---- watching, and the cluster -------------------------------------------------

  /** watch follows every change in log order as an async iterator, resuming across members. */
  watch(opts: WatchOptions = {}): Watch {
    return new Watch(this.transport, opts);
  }

  /** cluster reads the answering member's view of the cluster (GET /v1/cluster). */
  cluster(): Promise<answer.Obj> {
    return this.json({ method: "GET", path: "/v1/cluster" });
  }

  /**
   * withLock runs fn(signal, lease) under lock name and releases the lock
   * after. The signal aborts as soon as the lease may be lost; withLock then
   * rejects with the loss at once, without waiting for fn (which must stop
   * on the signal: every write it makes should carry lease.token).
   */
  async withLock<T>(name: string, opts: AcquireOptions, fn: (signal: AbortSignal, lease: Lease) => Promise<T> | T): Promise<T> {
    const lease = await this.acquire(name, opts);
    try {
      return await underLease(lease, fn);
    } finally {
      await lease.release().catch(() => {});
    }
  }
}
