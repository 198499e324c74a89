// The surface beyond one lock, against real nodes: shared locks, semaphores,
// multi-locks, sessions, elections, revoke, history, token lookup, and the
// typed error every provoked code comes back as.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Cluster, REPO } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

let cluster;
let client;
before(async () => {
  cluster = await Cluster.start(1);
  client = new fencer.Client(cluster.endpoints(), { holder: "ts-prim" });
});
after(() => cluster?.close());

test("every code of api/wire has an error class of its own family", () => {
  const src = readFileSync(join(REPO, "api", "wire", "errors.go"), "utf8");
  const codes = [...src.matchAll(/^\s*Code\w+\s*=\s*"([a-z_]+)"/gm)].map((m) => m[1]);
  assert.ok(codes.length > 40);
  for (const code of codes) {
    assert.ok(fencer.CODE_ERRORS[code], `no error class for ${code}`);
    const e = fencer.errorFromAnswer(409, { code, error: "x" }, "test");
    assert.ok(e instanceof fencer.FencerError);
    assert.equal(e.code, code);
    assert.equal(e.status, 409);
    assert.equal(e.serverMessage, "x");
  }
});

test("shared locks: many readers, no writer, and a reader cannot fence a write", async () => {
  const a = await client.acquire("ts.shared", { mode: "shared", holder: "r1", ttlMs: 3000 });
  const b = await client.acquire("ts.shared", { mode: "shared", holder: "r2", ttlMs: 3000 });
  assert.equal(a.mode, "shared");
  await assert.rejects(client.acquire("ts.shared", { holder: "w", ttlMs: 3000 }), fencer.LockHeldError);
  await assert.rejects(client.put("ts.shared.k", "v", b.token, { lock: "ts.shared" }), fencer.NotLockHolderError);
  await assert.rejects(client.acquire("ts.shared", { mode: "bogus" }), fencer.InvalidModeError);
  await a.release();
  await b.release();
});

test("semaphores: limit permits, each with its own token", async () => {
  const p1 = await client.acquirePermit("ts.sem", 2, { ttlMs: 3000 });
  const p2 = await client.acquirePermit("ts.sem", 2, { ttlMs: 3000 });
  assert.notEqual(p1.token, p2.token);
  await assert.rejects(client.acquirePermit("ts.sem", 2, { ttlMs: 3000 }), fencer.SemaphoreFullError);
  await assert.rejects(client.acquirePermit("ts.sem", 3, { ttlMs: 3000 }), fencer.LimitMismatchError);
  assert.equal(await client.checkPermit("ts.sem", p1.token), true);
  await p1.release();
  await p2.release();
});

test("multi-locks: every name or none, one token", async () => {
  const m = await client.multiLock(["ts.m1", "ts.m2"], { ttlMs: 3000 });
  assert.equal((await client.status("ts.m1")).token, m.token);
  assert.equal((await client.status("ts.m2")).token, m.token);
  await assert.rejects(client.multiLock(["ts.m2", "ts.m3"], { ttlMs: 3000 }), fencer.LockHeldError);
  await assert.rejects(client.release("locks", "ts.m1", m.token, m.secret), fencer.MultiGrantError);
  await assert.rejects(client.multiLock(["ts.m1", "ts.m1"]), fencer.InvalidNamesError);
  await m.put("ts.m.k", "v", "ts.m2");
  await m.release();
  assert.equal((await client.status("ts.m1")).held, false);
});

test("sessions: grants live as long as the session; closing ends them all", async () => {
  const s = await client.session({ ttlMs: 2000 });
  const l = await s.lock("ts.s.lock");
  const p = await s.acquirePermit("ts.s.sem", 3);
  const e = await s.campaign("ts.s.el", "addr-1");
  assert.equal((await client.getSession(s.id)).grants.length, 3);
  await new Promise((r) => setTimeout(r, 2500)); // past a TTL: the session's renewals keep them
  assert.equal(l.lost || p.lost || e.lost, false);
  const released = await s.close();
  assert.equal(released.length, 3);
  assert.equal(l.lost && p.lost && e.lost, true);
  assert.equal(l.reason, "released");
  await assert.rejects(s.lock("ts.s.lock2"), fencer.LeaseLostError);
  await assert.rejects(client.getSession(s.id), (err) => err instanceof fencer.UnknownSessionError || err instanceof fencer.SessionExpiredError);
});

test("elections: campaign, proclaim, observe, leader", async () => {
  await assert.rejects(client.leader("ts.el"), fencer.NotFoundError);
  const term = await client.campaign("ts.el", "addr-1", { ttlMs: 3000 });
  const ac = new AbortController();
  const seen = [];
  const watching = (async () => {
    for await (const l of client.observe("ts.el", { signal: ac.signal })) {
      seen.push(l.value);
      if (seen.length === 2) ac.abort();
    }
  })();
  await new Promise((r) => setTimeout(r, 300));
  await term.proclaim("addr-2");
  await watching;
  assert.deepEqual(seen, ["addr-1", "addr-2"]);
  assert.deepEqual(await client.leader("ts.el"), { holder: "ts-prim", value: "addr-2", token: term.token });
  await term.resign();
});

test("revoke, history and token lookup", async () => {
  const l = await client.acquire("ts.rev", { ttlMs: 3000 });
  await client.revoke("ts.rev", l.token);
  await new Promise((r) => l.signal.addEventListener("abort", r, { once: true }));
  assert.equal(l.reason, "revoked");
  assert.ok(l.err instanceof fencer.RevokedError);
  await assert.rejects(l.release(), fencer.RevokedError);
  const h = await client.history("ts.rev");
  assert.equal(h[0].token, l.token);
  assert.equal(h[0].ended, "revoked");
  const t = await client.tokenInfo(l.token);
  assert.equal(t.lock, "ts.rev");
  await assert.rejects(client.tokenInfo(999999), fencer.UnknownTokenError);
  await assert.rejects(client.get("ts.never-written"), fencer.NotFoundError);
  await assert.rejects(client.acquire("bad name!"), fencer.InvalidNameError);
  await assert.rejects(client.acquire("ts.ttl", { ttlMs: 5 }), fencer.InvalidTTLError);
});

test("a session revoked by an operator ends every grant under it, revoked", async () => {
  const s = await client.session({ ttlMs: 1500 });
  const l = await s.lock("ts.srev.lock");
  const p = await s.acquirePermit("ts.srev.sem", 2);
  await client.revokeSession(s.id);
  await new Promise((r) => (s.signal.aborted ? r() : s.signal.addEventListener("abort", r, { once: true })));
  assert.equal(s.reason, "revoked");
  assert.equal(l.reason, "revoked");
  assert.equal(p.reason, "revoked");
  assert.ok(l.err instanceof fencer.RevokedError);
  assert.equal(l.signal.aborted, true);
});

test("a frozen session's grants are lost on their first look", async () => {
  const s = await client.session({ ttlMs: 600 });
  const l = await s.lock("ts.sfrozen");
  const end = performance.now() + 900;
  while (performance.now() < end) {
    // no timer runs
  }
  assert.equal(l.lost, true);
  assert.equal(l.reason, "session");
  assert.equal(s.reason, "deadline");
  await s.close().catch(() => {});
});
