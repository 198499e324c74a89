// A keeper keeps one lease alive on the server, a grant's or a session's
// (api/client/doc.go, "Leases and the local deadline" and "Renewals"): it
// measures the lease from the send time of its last confirmed renewal (or of
// the acquire) on the monotonic clock, and aborts its signal at that time
// plus TTL minus a margin (TTL/10, at least 50 ms), before the server could
// expire it. Renewals go out at about TTL/3 with jitter, each bounded by the
// deadline; a refused one ends the lease at once. The deadline is enforced
// by a timer and checked again on every look (`lost`, `check()`), so a
// process that was paused past it sees the loss first, before any timer
// runs.

import { FencerError, LeaseLostError } from "./errors.js";
import { now, type Response } from "./transport.js";

/** margin is how long before the server could expire a lease the client gives it up. */
export function margin(ttlMs: number): number {
  return Math.min(Math.max(ttlMs / 10, 50), ttlMs / 2);
}

/** Why a lease is no longer held. */
export type LostReason = "deadline" | "lease_lost" | "revoked" | "session" | "released";

/** released is the error a released (or closed) lease's signal aborts with: not a loss. */
export class ReleasedError extends LeaseLostError {}

export abstract class Keeper {
  /** The TTL as granted, in milliseconds. */
  readonly ttlMs: number;
  /** How long before the TTL the client stops believing, in milliseconds. */
  readonly marginMs: number;
  private confirmed: number;
  private due: number;
  private readonly ctl = new AbortController();
  private deadlineTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private keepAlive = false;
  private why: LostReason | undefined;

  protected constructor(ttlMs: number, start: number, readonly what: string) {
    this.ttlMs = ttlMs;
    this.marginMs = margin(ttlMs);
    this.confirmed = start;
    this.due = start + this.interval();
  }

  /** sendRenewal renews the lease once, by deadline. */
  protected abstract sendRenewal(deadline: number, attemptTimeoutMs: number, signal?: AbortSignal): Promise<Response>;
  /** giveBack releases (or closes) the lease on the server. */
  protected abstract giveBack(): Promise<void>;
  /** ends says whether a refused renewal means the lease is gone. */
  protected ends(err: FencerError): boolean {
    return err instanceof LeaseLostError;
  }
  /** onEnd runs once, as the lease ends, before its signal aborts. */
  protected onEnd(_cause: FencerError): void {}

  /** The local deadline on performance.now()'s clock. */
  get deadline(): number {
    return this.confirmed + this.ttlMs - this.marginMs;
  }

  /** signal aborts as soon as the lease may be lost (and at release); its reason is the error. */
  get signal(): AbortSignal {
    this.checkDeadline();
    return this.ctl.signal;
  }

  /** lost is true once the lease is no longer believed held (lost, revoked or released). */
  get lost(): boolean {
    this.checkDeadline();
    return this.ctl.signal.aborted;
  }

  /** err is why the lease ended (a LeaseLostError; a ReleasedError for a release), or undefined while held. */
  get err(): FencerError | undefined {
    this.checkDeadline();
    return this.ctl.signal.aborted ? (this.ctl.signal.reason as FencerError) : undefined;
  }

  /** reason says in a word why the lease ended, or undefined while held. */
  get reason(): LostReason | undefined {
    this.checkDeadline();
    return this.why;
  }

  /** check throws the error the lease ended with, if it has. */
  check(): void {
    const e = this.err;
    if (e) throw e;
  }

  protected interval(): number {
    return (this.ttlMs / 3) * (0.8 + 0.2 * Math.random());
  }

  protected attemptTimeout(): number {
    // A third of the TTL per attempt, so that a hung node leaves time to
    // renew through another before the deadline.
    return Math.max(this.ttlMs / 3, 100);
  }

  protected confirm(sent: number): void {
    if (this.ctl.signal.aborted || sent <= this.confirmed) return;
    this.confirmed = sent;
    this.due = sent + this.interval();
    this.arm();
  }

  protected checkDeadline(): void {
    if (!this.ctl.signal.aborted && now() >= this.deadline) {
      const late = Math.round(now() - this.confirmed);
      const e = new LeaseLostError(`${this.what}: no renewal confirmed before the local deadline (last confirmed ${late}ms ago, ttl ${this.ttlMs}ms, margin ${this.marginMs}ms)`, "lease_lost");
      e.local = true;
      this.lose(e, "deadline");
    }
  }

  /** lose ends the lease with cause, once. */
  lose(cause: FencerError, why: LostReason): void {
    if (this.ctl.signal.aborted) return;
    this.why = why;
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.renewTimer);
    this.onEnd(cause);
    this.ctl.abort(cause);
  }

  /** start arms the deadline timer and, with keepAlive, the renewals. */
  protected start(keepAlive: boolean): void {
    this.keepAlive = keepAlive;
    this.arm();
  }

  private arm(): void {
    if (this.ctl.signal.aborted) return;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), Math.max(0, this.deadline - now()) + 1);
    this.deadlineTimer.unref?.();
    if (this.keepAlive && this.renewTimer === undefined) {
      this.renewTimer = setTimeout(() => void this.tick(), Math.max(0, this.due - now()));
    }
  }

  private async tick(): Promise<void> {
    this.checkDeadline();
    if (this.ctl.signal.aborted) return;
    try {
      await this.renew();
      this.renewTimer = undefined;
    } catch {
      // Retry soon; the deadline still rules.
      this.due = now() + Math.min(this.ttlMs / 10, 1000);
      this.renewTimer = undefined;
    }
    this.arm();
  }

  /** renew renews now, bounded by the local deadline; a refusal ends the lease and is thrown. */
  async renew(): Promise<void> {
    this.checkDeadline();
    this.check();
    try {
      const r = await this.sendRenewal(this.deadline, this.attemptTimeout(), this.ctl.signal);
      this.confirm(r.sent);
    } catch (e) {
      if (e instanceof FencerError && this.ends(e)) this.lose(e, e.code === "revoked" ? "revoked" : "lease_lost");
      throw e;
    }
    this.check();
  }

  /**
   * confirmLate confirms a late grant by one renewal before it is handed
   * out, and gives the grant back if that fails. The renewal is bounded by
   * a TTL after the grant arrived, not by the stale deadline: the server
   * started the lease before it answered.
   */
  protected async confirmLate(received: number, signal?: AbortSignal): Promise<void> {
    try {
      const r = await this.sendRenewal(received + this.ttlMs, this.attemptTimeout(), signal);
      this.confirm(r.sent);
      this.check();
    } catch (e) {
      const cause = e instanceof FencerError ? e : new FencerError(String(e), "lease_lost");
      this.lose(cause instanceof LeaseLostError ? cause : new LeaseLostError(cause.message, "lease_lost"), "lease_lost");
      let after = "gave it back";
      try {
        await this.giveBack();
      } catch (g) {
        after = g instanceof LeaseLostError ? "it had ended already" : `giving it back failed too (${(g as Error).message}); the server frees it within ${this.ttlMs}ms`;
      }
      throw new LeaseLostError(`${this.what} was granted, but the grant could not be confirmed: ${cause.message}; ${after}`, cause.code || "lease_lost", cause.status, cause.body, { cause });
    }
  }

  /** halt stops renewing without giving the lease back. */
  protected halt(): void {
    this.keepAlive = false;
    clearTimeout(this.renewTimer);
    clearTimeout(this.deadlineTimer);
  }
}
