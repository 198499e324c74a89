import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Cluster, poll } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

let cluster;
let client;
before(async () => {
  cluster = await Cluster.start(3);
  client = new fencer.Client(cluster.endpoints(), { holder: "ts-test" });
});
after(() => cluster?.close());

test("acquire, fenced write, release", async () => {
  const lease = await client.acquire("ts.basic", { ttlMs: 3000 });
  assert.ok(lease.token >= 1);
  assert.equal(lease.lost, false);
  const st = await client.status("ts.basic");
  assert.equal(st.holder, "ts-test");
  assert.equal(st.token, lease.token);
  await lease.put("ts.basic.key", "v1");
  const got = await client.get("ts.basic.key");
  assert.equal(new TextDecoder().decode(got.value), "v1");
  assert.equal(got.token, lease.token);
  assert.deepEqual(await client.check("ts.basic", lease.token).then((c) => c.current), true);
  await lease.release();
  assert.equal(lease.reason, "released");
  assert.equal((await client.status("ts.basic")).held, false);
});
