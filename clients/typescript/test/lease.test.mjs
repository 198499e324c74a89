// The lease guarantees, against real nodes: a lease survives a leader kill,
// a paused holder sees its loss on its first look and its late fenced write
// is refused, a late grant is measured from a confirming renewal.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Cluster, poll } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

let cluster;
let client;
before(async () => {
  cluster = await Cluster.start(3);
  client = new fencer.Client(cluster.endpoints(), { holder: "ts-lease-test" });
});
after(() => cluster?.close());

test("a lease survives a leader kill during a hold", async () => {
  const ttlMs = 3000;
  const lease = await client.acquire("ts.failover", { ttlMs });
  const old = await cluster.leader();
  await cluster.kill(old);
  const next = await poll("a new leader", async () => {
    const l = await cluster.leader();
    return l.id !== old.id && l;
  }, 30000);
  assert.notEqual(next.id, old.id);
  // Two TTLs under the new leader: renewed through it, never lost.
  const until = performance.now() + 2 * ttlMs;
  while (performance.now() < until) {
    assert.equal(lease.lost, false, `lost under the new leader: ${lease.err?.message}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal((await client.check("ts.failover", lease.token)).current, true);
  await lease.release();
  assert.equal((await client.status("ts.failover")).held, false);
  cluster.startNode(old); // back for the tests after
  await poll("the old leader back", async () => (await fetch(`http://${old.http}/readyz`)).ok, 30000);
});

function busyWait(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // a frozen event loop: no timer, no renewal, runs
  }
}

test("a frozen holder sees its loss on its first look, and its late write is refused", async () => {
  const ttlMs = 1000;
  const lease = await client.acquire("ts.frozen", { ttlMs });
  await lease.put("ts.frozen.key", "first");
  busyWait(ttlMs + 500);
  // No timer has run since the freeze: the first look reads the clock.
  assert.equal(lease.lost, true);
  assert.equal(lease.reason, "deadline");
  assert.equal(lease.signal.aborted, true);
  assert.ok(lease.err instanceof fencer.LeaseLostError);
  await assert.rejects(lease.put("ts.frozen.key", "late"), fencer.LeaseLostError);
  const other = new fencer.Client(cluster.endpoints(), { holder: "ts-next" });
  const next = await other.acquire("ts.frozen", { ttlMs: 3000, waitMs: 5000 });
  assert.ok(next.token > lease.token);
  await next.put("ts.frozen.key", "next");
  await assert.rejects(client.put("ts.frozen.key", "late", lease.token), fencer.StaleTokenError);
  assert.equal(new TextDecoder().decode((await client.get("ts.frozen.key")).value), "next");
  await next.release();
});

test("a holder paused by SIGSTOP past its TTL: lost on its first look, late fenced write stale_token", async () => {
  const ttlMs = 1500;
  const child = spawn(process.execPath, [fileURLToPath(new URL("./holder.mjs", import.meta.url))], {
    env: { ...process.env, FENCER_ADDRS: cluster.endpoints().join(","), FENCER_LOCK: "ts.paused", FENCER_TTL_MS: String(ttlMs), FENCER_KEY: "ts.paused.key" },
    stdio: ["pipe", "pipe", "inherit"],
  });
  try {
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const read = async () => JSON.parse((await lines.next()).value);
    const { token } = await read();
    child.kill("SIGSTOP");
    const other = new fencer.Client(cluster.endpoints(), { holder: "ts-after-pause" });
    const next = await other.acquire("ts.paused", { ttlMs: 5000, waitMs: 10000 });
    assert.ok(next.token > token);
    await next.put("ts.paused.key", "after the pause");
    child.kill("SIGCONT");
    child.stdin.write("look\n");
    assert.deepEqual(await read(), { lost: true, reason: "deadline" });
    child.stdin.write("put\n");
    assert.deepEqual(await read(), { code: "stale_token" });
    assert.equal(new TextDecoder().decode((await other.get("ts.paused.key")).value), "after the pause");
    await next.release();
  } finally {
    child.kill("SIGKILL");
  }
});

test("a late grant is confirmed by a renewal and measured from it", async () => {
  const ttlMs = 1500;
  const first = await client.acquire("ts.late", { ttlMs });
  const other = new fencer.Client(cluster.endpoints(), { holder: "ts-late-waiter" });
  const waiting = other.acquire("ts.late", { ttlMs, waitMs: 10000 });
  await new Promise((r) => setTimeout(r, ttlMs)); // the waiter's send ages past TTL/3
  await first.release();
  const late = await waiting;
  // Measured from the acquire's send, the lease would be (nearly) over.
  assert.equal(late.lost, false);
  assert.ok(late.deadline - performance.now() > ttlMs / 2, `deadline only ${Math.round(late.deadline - performance.now())}ms away`);
  await late.release();
});

test("withLock runs fn under the lock, aborts it on loss, and releases", async () => {
  const got = await client.withLock("ts.with", { ttlMs: 2000 }, async (signal, lease) => {
    assert.equal(signal.aborted, false);
    await lease.put("ts.with.key", "under the lock");
    return lease.token;
  });
  assert.equal((await client.status("ts.with")).held, false);
  assert.equal((await client.get("ts.with.key")).token, got);
  // A loss (here a revoke) aborts the signal and rejects withLock at once.
  let aborted;
  await assert.rejects(client.withLock("ts.with", { ttlMs: 1500 }, async (signal, lease) => {
    await client.revoke("ts.with", lease.token);
    await new Promise((r) => signal.addEventListener("abort", r));
    aborted = signal.reason;
    await new Promise(() => {}); // never ends by itself
  }), fencer.RevokedError);
  assert.ok(aborted instanceof fencer.RevokedError);
});

test("a leader frozen by SIGSTOP (connections open, no answers): the lease holds through the next leader", async () => {
  const ttlMs = 3000;
  const lease = await client.acquire("ts.frozen-leader", { ttlMs });
  const old = await cluster.leader();
  old.proc.kill("SIGSTOP");
  try {
    await poll("a new leader", async () => {
      for (const nd of cluster.nodes) {
        if (nd === old || !cluster.running(nd)) continue;
        const st = await (await fetch(`http://${nd.http}/v1/cluster`, { signal: AbortSignal.timeout(1000) })).json();
        if (st.leader && st.leader !== old.id) return true;
      }
      return false;
    }, 30000);
    const until = performance.now() + 2 * ttlMs;
    while (performance.now() < until) {
      assert.equal(lease.lost, false, `lost: ${lease.err?.message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await client.check("ts.frozen-leader", lease.token)).current, true);
  } finally {
    old.proc.kill("SIGCONT");
  }
  await lease.release();
});
