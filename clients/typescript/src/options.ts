// The options of the client's calls, and their checks before anything is
// sent: a request the client refuses carries the code the server would give.

import { randomBytes } from "node:crypto";
import { InvalidRequestError, InvalidTTLError } from "./errors.js";

/** The options of a Client. */
export interface ClientOptions {
  /** A bearer token from the cluster's ACL file. */
  token?: string;
  /** Each attempt's timeout, in ms (default 10000; an acquire's wait is added). */
  attemptTimeoutMs?: number;
  /** Attempts per request across members and leader changes (default 10). */
  attempts?: number;
  /** The holder name acquires use unless told otherwise (default host:pid). */
  holder?: string;
  /** The longest answer read (default 4 MiB); a longer one is a BadAnswerError. */
  maxAnswerBytes?: number;
}

/** The options of an acquire (a lock, a permit, an election). */
export interface AcquireOptions {
  /** The lease's TTL in ms, 100 to 86400000 (default 10000). */
  ttlMs?: number;
  /** How long to queue, in ms, 0 to 60000 (default 0: no wait). */
  waitMs?: number;
  holder?: string;
  /** Renew in the background (default true). */
  keepAlive?: boolean;
  /** If the grant ends by expiry, nobody may take the lock for this long. */
  lockDelayMs?: number;
  /** A value published with the grant (an election's leader's address). */
  value?: string;
  /** "exclusive" (default) or "shared". */
  mode?: "exclusive" | "shared";
  /** Ends the call (not the lease once granted). */
  signal?: AbortSignal;
}

/** An election's leader now. */
export interface ElectionLeader {
  holder: string;
  value: string;
  /** The term of office: the grant's token. */
  token: number;
}

/** One grant of the history (GET /v1/locks/{name}/history, /v1/tokens/{token}). */
export interface GrantRecord {
  token: number;
  lock: string;
  semaphore?: string;
  holder: string;
  granted_index: number;
  ended: string;
  ended_index?: number;
  mode?: string;
}

export const MAX_WAIT = 60000;
export const MAX_NAMES = 64;
export const DEFAULT_TTL = 10000;

export function requestId(): string {
  return randomBytes(16).toString("hex");
}

export function seg(s: string): string {
  return encodeURIComponent(s);
}

export function checkTTL(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs < 100 || ttlMs > 86400000) {
    throw new InvalidTTLError(`ttlMs ${ttlMs}: want an integer from 100 to 86400000`, "invalid_ttl");
  }
}

export function checkWait(waitMs: number): void {
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_WAIT) {
    throw new InvalidRequestError(`waitMs ${waitMs}: want an integer from 0 to ${MAX_WAIT}`, "invalid_wait");
  }
}
