// Held grants: a lock's (exclusive or shared, an election's term), a
// semaphore's permit, and a multi-lock's; each on its own keeper, except a
// grant under a session, which lives on the session's.

import { NotLockHolderError, type FencerError } from "./errors.js";
import { Keeper, ReleasedError, type LostReason } from "./keeper.js";
import * as answer from "./answer.js";
import type { Client } from "./client.js";
import type { Session } from "./session.js";
import type { Response } from "./transport.js";

/** Kind says what a Lease holds. */
export type Kind = "locks" | "semaphores";

/** The fields of a lease that a fenced write or a caller reads. */
export interface Held {
  readonly token: number;
  readonly signal: AbortSignal;
  readonly lost: boolean;
}

/**
 * Lease is a held grant of a lock or a semaphore permit: `token` (pass it
 * to every write the lock protects), `signal` (aborts as soon as the lease
 * may be lost, before the server can expire it), `lost`, `err`, `reason`.
 * Under a session its deadline and signal follow the session's.
 */
export class Lease extends Keeper implements Held {
  readonly kind: Kind;
  readonly name: string;
  readonly holder: string;
  readonly token: number;
  /** The grant's secret, for renew and release; never logged. */
  readonly secret: string;
  readonly existing: boolean;
  /** "shared" or "exclusive" (always "exclusive" for a permit). */
  readonly mode: string;
  /** A permit's semaphore limit (1 for a lock). */
  readonly limit: number;
  /** The value published with the grant (an election's leader's). */
  value: string;
  private released = false;

  /** @internal */
  constructor(private readonly client: Client, grant: answer.Obj, start: number, kind: Kind, readonly session?: Session) {
    const name = String(kind === "locks" ? grant.lock : grant.semaphore);
    super(Number(grant.ttl_ms), start, `${kind === "locks" ? "lock" : "semaphore"} ${JSON.stringify(name)} token ${grant.token}`);
    this.kind = kind;
    this.name = name;
    this.holder = String(grant.holder);
    this.token = Number(grant.token);
    this.secret = String(grant.lease);
    this.existing = grant.existing === true;
    this.mode = grant.mode === "shared" ? "shared" : "exclusive";
    this.limit = typeof grant.limit === "number" ? grant.limit : 1;
    this.value = typeof grant.value === "string" ? grant.value : "";
  }

  override get deadline(): number {
    return this.session ? this.session.deadline : super.deadline;
  }

  protected override checkDeadline(): void {
    // A grant under a session is lost when the session is: the session's
    // own check ends it, and every grant under it.
    if (this.session) this.session.peek();
    else super.checkDeadline();
  }

  protected sendRenewal(deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response> {
    return this.client.renew(this, deadline, attemptTimeoutMs, signal);
  }

  protected giveBack(): Promise<void> {
    return this.client.release(this.kind, this.name, this.token, this.secret);
  }

  /** @internal */
  begin(keepAlive: boolean): void {
    this.start(keepAlive);
  }

  /** @internal */
  confirmGrant(received: number, signal?: AbortSignal): Promise<void> {
    return this.confirmLate(received, signal);
  }

  /** renew renews now (a grant under a session: the session). */
  override async renew(): Promise<void> {
    if (this.session) {
      await this.session.renew();
      this.check();
      return;
    }
    await super.renew();
  }

  /**
   * release stops renewing and gives the grant back. It throws the loss
   * when the lease was lost before (the release is still sent: a lease the
   * client gave up at its deadline may be held on the server a moment
   * longer), else the release's own error; a second release does nothing.
   */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const lost = this.err;
    this.halt();
    this.lose(new ReleasedError(`${this.what}: released`, "lease_lost"), "released");
    this.session?.detach(this);
    await releaseReporting(() => this.giveBack(), lost);
  }

  /** [Symbol.asyncDispose] releases, for `await using lease = ...`. */
  async [Symbol.for("nodejs.asyncDispose")](): Promise<void> {
    await this.release().catch(() => {});
  }

  /**
   * proclaim changes the value this holder publishes (an election's); the
   * token, its term, stays. The server decides whether the grant still
   * holds (410 lease_lost when it does not), as the Go client's Proclaim.
   */
  async proclaim(value: string): Promise<void> {
    this.value = await this.client.proclaim(this, value);
  }

  /** resign steps down from an election: release. */
  resign(): Promise<void> {
    return this.release();
  }

  /** headers returns the fencing headers of a write the lock protects. */
  headers(): Record<string, string> {
    const h: Record<string, string> = { "Fencing-Token": String(this.token) };
    if (this.kind === "locks") h["Fencing-Lock"] = this.name;
    return h;
  }

  /** put is a fenced write of key with this lease's token and lock; it checks the lease first. */
  async put(key: string, value: string | Uint8Array): Promise<number> {
    this.check();
    if (this.mode === "shared") {
      throw new NotLockHolderError(`${this.what}: a shared grant cannot write under the lock`, "not_lock_holder");
    }
    return this.client.put(key, value, this.token, { lock: this.kind === "locks" ? this.name : undefined });
  }
}

/** MultiLock is a held multi-lock: every name, one token, one lease. */
export class MultiLock extends Keeper implements Held {
  readonly names: string[];
  readonly holder: string;
  readonly token: number;
  readonly secret: string;
  readonly existing: boolean;
  private released = false;

  /** @internal */
  constructor(private readonly client: Client, grant: answer.Obj, start: number) {
    const names = (grant.names as string[]).slice();
    super(Number(grant.ttl_ms), start, `multi-lock ${names.join(",")} token ${grant.token}`);
    this.names = names;
    this.holder = String(grant.holder);
    this.token = Number(grant.token);
    this.secret = String(grant.lease);
    this.existing = grant.existing === true;
  }

  protected async sendRenewal(deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response> {
    const r = await this.client.request({ method: "POST", path: "/v1/locks/renew", json: { lease: this.secret, token: this.token }, deadline, attemptTimeoutMs, signal });
    answer.renewal(answer.obj(r.body, "renew " + this.what), "multi-lock", "", this.token, this.ttlMs);
    return r;
  }

  protected giveBack(): Promise<void> {
    return this.client.releaseMulti(this.token, this.secret);
  }

  /** @internal */
  begin(keepAlive: boolean): void {
    this.start(keepAlive);
  }

  /** @internal */
  confirmGrant(received: number, signal?: AbortSignal): Promise<void> {
    return this.confirmLate(received, signal);
  }

  /** release gives every name back in one entry, reporting as Lease.release does. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const lost = this.err;
    this.halt();
    this.lose(new ReleasedError(`${this.what}: released`, "lease_lost"), "released");
    await releaseReporting(() => this.giveBack(), lost);
  }

  async [Symbol.for("nodejs.asyncDispose")](): Promise<void> {
    await this.release().catch(() => {});
  }

  /** put is a fenced write with the token, checked against lock (one of names; the first by default). */
  async put(key: string, value: string | Uint8Array, lock?: string): Promise<number> {
    this.check();
    return this.client.put(key, value, this.token, { lock: lock ?? this.names[0] });
  }
}

/** releaseReporting gives a grant back, then throws the loss it had (if any), else the give-back's error. */
async function releaseReporting(giveBack: () => Promise<void>, lost: FencerError | undefined): Promise<void> {
  try {
    await giveBack();
  } catch (e) {
    if (!lost) throw e;
  }
  if (lost) throw lost;
}

/** underLease runs fn under a held lease, rejecting with its loss as soon as the lease is lost. */
export async function underLease<T, H extends Held>(held: H, fn: (signal: AbortSignal, held: H) => Promise<T> | T): Promise<T> {
  const signal = held.signal;
  let onAbort: () => void = () => {};
  const lost = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  const run = Promise.resolve().then(() => fn(signal, held));
  run.catch(() => {}); // after a loss, fn's own end is nobody's to report
  lost.catch(() => {});
  try {
    return await Promise.race([run, lost]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

export type { LostReason };
