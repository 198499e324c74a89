// A session: one lease, kept alive by one keeper, for many grants. The
// server ties each grant's life to the session's, so only the session is
// renewed, and when it ends every grant under it ends in the same moment:
// the session's signal and each grant's abort together, before the server
// can expire it (api/client/DESIGN.md, "Sessions").

import { BadAnswerError, FencerError, LeaseLostError, SessionExpiredError, SessionMismatchError, UnknownSessionError } from "./errors.js";
import { Keeper, ReleasedError } from "./keeper.js";
import * as answer from "./answer.js";
import type { Client } from "./client.js";
import type { AcquireOptions } from "./options.js";
import type { Lease } from "./lease.js";
import type { Response } from "./transport.js";

/** A grant a session answer names. */
export interface SessionGrant {
  kind: "lock" | "semaphore";
  name: string;
  token: number;
}

/** Options of a grant under a session: an acquire's, without a TTL. */
export type SessionAcquireOptions = Omit<AcquireOptions, "ttlMs" | "keepAlive">;

export class Session extends Keeper {
  /** The session's id: the index of the entry that created it. */
  readonly id: number;
  readonly holder: string;
  /** The session's secret; never logged. */
  readonly secret: string;
  readonly existing: boolean;
  private readonly grants = new Set<Lease>();
  private closed = false;

  /** @internal */
  constructor(private readonly client: Client, created: answer.Obj, start: number) {
    super(Number(created.ttl_ms), start, `session ${created.session}`);
    this.id = Number(created.session);
    this.holder = String(created.holder);
    this.secret = String(created.lease);
    this.existing = created.existing === true;
  }

  protected sendRenewal(deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response> {
    return this.client.renewSession(this, deadline, attemptTimeoutMs, signal);
  }

  protected override ends(err: FencerError): boolean {
    // Gone, forgotten, or no longer ours: no later renewal can succeed.
    return err instanceof LeaseLostError || err instanceof UnknownSessionError || err instanceof SessionMismatchError;
  }

  protected async giveBack(): Promise<void> {
    await this.client.closeSession(this.id, this.secret);
  }

  protected override onEnd(cause: FencerError): void {
    // Every grant under the session is lost before its signal aborts, so
    // that a caller woken by it finds them lost.
    const lost = cause instanceof LeaseLostError ? cause : new SessionExpiredError(`${this.what} ended: ${cause.message}`, "session_expired", cause.status, cause.body);
    const why = cause instanceof ReleasedError ? "released" : cause.code === "revoked" ? "revoked" : "session";
    for (const g of this.grants) g.lose(lost, why);
  }

  /** peek checks the session's deadline (a grant under it looks through it). @internal */
  peek(): void {
    this.checkDeadline();
  }

  /** @internal */
  begin(keepAlive: boolean): void {
    this.start(keepAlive);
  }

  /** @internal */
  confirmGrant(received: number, signal?: AbortSignal): Promise<void> {
    return this.confirmLate(received, signal);
  }

  /** @internal */
  attach(g: Lease): void {
    if (this.lost) {
      // The session ended while the acquire was out: the server ended the
      // grant with it (or will, at the same deadline).
      g.lose(this.err!, "session");
      return;
    }
    this.grants.add(g);
  }

  /** @internal */
  detach(g: Lease): void {
    this.grants.delete(g);
  }

  /** held lists the grants this client holds under the session. */
  get held(): Lease[] {
    return [...this.grants];
  }

  /**
   * close stops renewing and ends the session, and every grant under it, in
   * one entry; it returns what the server released. Closing a session
   * already ended is not an error.
   */
  async close(): Promise<SessionGrant[]> {
    if (this.closed) return [];
    this.closed = true;
    const wasLost = this.lost;
    const held = this.held.map((g) => ({ kind: g.kind === "locks" ? "lock" : "semaphore", name: g.name, token: g.token }) as SessionGrant);
    this.halt();
    this.lose(new ReleasedError(`${this.what}: closed`, "session_expired"), "released");
    try {
      return await this.client.closeSession(this.id, this.secret);
    } catch (e) {
      if (e instanceof SessionExpiredError || e instanceof UnknownSessionError) {
        if (e.lostAnswers) return held;
        if (wasLost) return [];
      }
      throw e;
    }
  }

  async [Symbol.for("nodejs.asyncDispose")](): Promise<void> {
    await this.close().catch(() => {});
  }

  /** lock takes lock name under the session (the grant lives as long as it). */
  lock(name: string, opts: SessionAcquireOptions = {}): Promise<Lease> {
    return this.client.acquireUnder(this, "locks", name, opts);
  }

  /** acquirePermit takes one of limit permits of semaphore name under the session. */
  acquirePermit(name: string, limit: number, opts: SessionAcquireOptions = {}): Promise<Lease> {
    return this.client.acquireUnder(this, "semaphores", name, { ...opts, limit });
  }

  /** campaign leads election name with value published, under the session. */
  campaign(name: string, value: string, opts: SessionAcquireOptions & { timeoutMs?: number } = {}): Promise<Lease> {
    return this.client.campaignWith((waitMs) => this.lock(name, { ...opts, value, waitMs }), opts.timeoutMs, opts.signal);
  }
}

/** sessionGrants checks the grants a session answer lists: each a kind, a name and a token. */
export function sessionGrants(b: answer.Obj, field: string, what: string): SessionGrant[] {
  const out = answer.objects(b, field, what);
  for (const g of out) {
    if ((g.kind !== "lock" && g.kind !== "semaphore") || typeof g.name !== "string" || g.name === "") {
      throw new BadAnswerError(`${what}: ${field} holds something that is not a lock or semaphore grant by name`);
    }
    answer.token(g.token, what);
  }
  return out as unknown as SessionGrant[];
}
