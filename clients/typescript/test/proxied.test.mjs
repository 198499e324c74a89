// Guarantees that need a member made slow, mute or dead to the client: each
// node stands behind a proxy the cluster advertises as its HTTP address.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Cluster, poll } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

let cluster;
before(async () => {
  cluster = await Cluster.start(3, { proxied: true });
});
after(() => cluster?.close());

function proxies() {
  return cluster.nodes.map((nd) => nd.proxy);
}

test("the local deadline counts from the acquire's send time, not its answer's arrival", async () => {
  const client = new fencer.Client(cluster.endpoints(), { holder: "ts-deadline" });
  await client.cluster(); // leader known before the proxies slow down
  const ttlMs = 3000;
  let sentAt = 0;
  for (const p of proxies()) {
    p.delayMs = 800;
    p.onRequest = (text, at) => {
      if (text.startsWith("POST /v1/locks/ts.deadline/acquire") && sentAt === 0) sentAt = at;
    };
  }
  try {
    const lease = await client.acquire("ts.deadline", { ttlMs });
    for (const p of proxies()) p.silent = true;
    await new Promise((r) => lease.signal.addEventListener("abort", r, { once: true }));
    const lostAfter = performance.now() - sentAt;
    // ttl - margin (2700 ms) after the send, give or take a timer's lateness;
    // counted from the answer's arrival it would be some 3500 ms.
    assert.equal(lease.reason, "deadline");
    assert.ok(lostAfter <= ttlMs - fencer.margin(ttlMs) + 150, `lost ${Math.round(lostAfter)}ms after the acquire was sent`);
    assert.ok(lostAfter >= ttlMs - fencer.margin(ttlMs) - 50, `lost too early: ${Math.round(lostAfter)}ms`);
  } finally {
    for (const p of proxies()) {
      p.delayMs = 0;
      p.silent = false;
      p.onRequest = () => {};
    }
  }
});

test("an acquire whose answer was lost is retried with its request id: one grant, existing", async () => {
  const client = new fencer.Client(cluster.endpoints(), { holder: "ts-retry" });
  await client.cluster();
  for (const p of proxies()) p.dropAnswerOf = /^POST \/v1\/locks\/ts\.retry\/acquire/;
  const lease = await client.acquire("ts.retry", { ttlMs: 5000 });
  for (const p of proxies()) p.dropAnswerOf = undefined;
  assert.equal(lease.existing, true);
  const grants = await client.history("ts.retry");
  assert.equal(grants.length, 1);
  assert.equal(grants[0].token, lease.token);
  await lease.release();
});

test("a watch resumes at another member with Last-Event-ID: every event once, in order", async () => {
  // The watch reads from its first endpoint: a follower, whose death
  // leaves the cluster writable.
  const leader = await cluster.leader();
  const dead = cluster.nodes.find((nd) => nd !== leader);
  const order = [dead, ...cluster.nodes.filter((nd) => nd !== dead)].map((nd) => nd.addr);
  const client = new fencer.Client(order, { holder: "ts-watch" });
  const lease = await client.acquire("ts.watch", { ttlMs: 10000 });
  const w = client.watch({ prefix: "ts.watch" });
  const seen = [];
  const done = (async () => {
    for await (const ev of w) {
      if (ev.type === "put") seen.push(ev);
    }
  })();
  const want = [];
  await poll("the watch started", () => w.index !== undefined);
  for (let i = 0; i < 3; i++) want.push(await client.put(`ts.watch.k${i}`, "v", lease.token));
  await poll("the first writes seen", () => seen.length === 3);
  dead.proxy.kill();
  for (let i = 3; i < 6; i++) await client.put(`ts.watch.k${i}`, "v", lease.token);
  await poll("every write seen", () => seen.length >= 6, 20000);
  w.close();
  await done;
  assert.deepEqual(seen.map((e) => e.key), [0, 1, 2, 3, 4, 5].map((i) => `ts.watch.k${i}`));
  const idx = seen.map((e) => e.index);
  assert.deepEqual(idx, [...idx].sort((a, b) => a - b));
  assert.equal(new Set(idx).size, idx.length);
  await lease.release();
});
