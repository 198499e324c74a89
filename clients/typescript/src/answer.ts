// What an answer must say before the client believes it (api/client/doc.go,
// "What is believed"): a grant names the lock and holder asked for, the
// request's id, a token from 1 to 2^53-1 (JavaScript numbers hold no more
// exactly, and a rounded token would fence the wrong writes), a 32-digit
// hexadecimal secret and a TTL no longer than asked; a renewal the grant it
// renewed and its TTL; a fenced write the key and token sent. Anything else
// is a BadAnswerError, never a TypeError.

import { BadAnswerError } from "./errors.js";

/** A decoded JSON object answer. */
export type Obj = Record<string, unknown>;

const SECRET = /^[0-9a-f]{32}$/;
const TOKEN_HEADER = /^[1-9][0-9]{0,19}$/;

/** obj decodes an answer's body, which for every fencer answer is a JSON object. */
export function obj(body: Uint8Array, what: string): Obj {
  if (body.length === 0) {
    throw new BadAnswerError(`${what}: the answer has no body; a fencer node answers with a JSON object`);
  }
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (e) {
    throw new BadAnswerError(`${what}: the answer is not JSON (${(e as Error).message})`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new BadAnswerError(`${what}: the answer is JSON but not an object`);
  }
  return v as Obj;
}

/** token checks a fencing token: an integer from 1 to Number.MAX_SAFE_INTEGER. */
export function token(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
    throw new BadAnswerError(`${what}: token ${JSON.stringify(v)} is not an integer from 1 to 2^53-1`);
  }
  return v;
}

/** tokenHeader checks a Fencing-Token header: canonical decimal. */
export function tokenHeader(v: string | null, what: string): number {
  if (v === null || !TOKEN_HEADER.test(v)) {
    throw new BadAnswerError(`${what}: Fencing-Token header ${JSON.stringify(v)} is not a token`);
  }
  return token(Number(v), what);
}

/** indexHeader checks a Fencer-Index header: a decimal log index. */
export function indexHeader(v: string | null, what: string): number {
  if (v === null || !/^[0-9]{1,16}$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw new BadAnswerError(`${what}: Fencer-Index header ${JSON.stringify(v)} is not an index`);
  }
  return Number(v);
}

/** objects returns field of an answer as a list of objects (absent: none). */
export function objects(body: Obj, field: string, what: string): Obj[] {
  const v = body[field] ?? [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "object" && x !== null && !Array.isArray(x))) {
    throw new BadAnswerError(`${what}: ${field} is not a list of objects`);
  }
  return v as Obj[];
}

/** str returns field as a string ("" when absent). */
export function str(body: Obj, field: string, what: string): string {
  const v = body[field] ?? "";
  if (typeof v !== "string") throw new BadAnswerError(`${what}: ${field} is not a string`);
  return v;
}

/** bool returns field as a boolean (false when absent). */
export function bool(body: Obj, field: string, what: string): boolean {
  const v = body[field] ?? false;
  if (typeof v !== "boolean") throw new BadAnswerError(`${what}: ${field} is not a boolean`);
  return v;
}

/** positive returns field as a positive integer. */
export function positive(body: Obj, field: string, what: string): number {
  const v = body[field];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
    throw new BadAnswerError(`${what}: ${field} ${JSON.stringify(v)} is not a positive integer`);
  }
  return v;
}

/** equal checks that field says exactly what was asked. */
export function equal(body: Obj, field: string, want: unknown, what: string): void {
  const got = body[field];
  if (got !== want) {
    throw new BadAnswerError(`${what}: the answer's ${field} is ${JSON.stringify(got)}, not ${JSON.stringify(want)} as asked`, "mismatch");
  }
}

/** secret checks a lease secret: 32 lowercase hexadecimal digits. */
export function secret(body: Obj, what: string): string {
  const s = body.lease;
  if (typeof s !== "string" || !SECRET.test(s)) {
    throw new BadAnswerError(`${what}: lease is not 32 hexadecimal digits`);
  }
  return s;
}

/** ttlAtMost checks a TTL no longer than asked: a longer one would keep the client believing in a grant the server was asked to end sooner. */
export function ttlAtMost(body: Obj, asked: number, what: string): number {
  const got = positive(body, "ttl_ms", what);
  if (got > asked) throw new BadAnswerError(`${what}: ttl_ms ${got} is above the ${asked} asked for`, "mismatch");
  return got;
}

/** What an acquire asked for, to check its grant against. */
export interface GrantAsk {
  kind: "locks" | "semaphores";
  name: string;
  holder: string;
  ttlMs: number;
  requestId: string;
  limit?: number;
  session?: number;
  mode?: string;
}

/** grant checks an acquire's answer (a Grant or PermitGrant) against the request. */
export function grant(body: Obj, ask: GrantAsk): Obj {
  const noun = ask.kind === "semaphores" ? "semaphore" : "lock";
  const what = `acquire ${noun} ${JSON.stringify(ask.name)}`;
  equal(body, noun, ask.name, what);
  equal(body, "holder", ask.holder, what);
  token(body.token, what);
  secret(body, what);
  if (ask.session !== undefined) {
    equal(body, "session", ask.session, what);
  } else if ((body.session ?? 0) !== 0) {
    throw new BadAnswerError(`${what}: the grant names a session, and none was asked for`, "mismatch");
  }
  ttlAtMost(body, ask.ttlMs, what);
  if ("request_id" in body) equal(body, "request_id", ask.requestId, what);
  bool(body, "existing", what);
  str(body, "value", what);
  if (ask.mode !== undefined && (body.mode ?? "") !== ask.mode) {
    // An exclusive grant where a shared one was asked would block writers;
    // a shared one where an exclusive was asked would not fence.
    throw new BadAnswerError(`${what}: the grant is in mode ${JSON.stringify(body.mode ?? "")}, not ${JSON.stringify(ask.mode)}`, "mismatch");
  }
  if (ask.limit !== undefined) {
    equal(body, "limit", ask.limit, what);
    if (positive(body, "held", what) > ask.limit) throw new BadAnswerError(`${what}: held is above the limit`, "mismatch");
  }
  return body;
}

/** renewal checks a renewal's answer: the grant renewed, and its TTL. */
export function renewal(body: Obj, noun: string, name: string, tok: number, ttlMs: number): void {
  const what = `renew ${noun} ${JSON.stringify(name)} token ${tok}`;
  if (noun !== "multi-lock") equal(body, noun, name, what);
  equal(body, "token", tok, what);
  equal(body, "ttl_ms", ttlMs, what);
}
