// Leader following by the answer's Fencer-Leader header, and leaving a member
// that cannot be reached at once, against two fake members that record what
// reaches them (a real cluster's forwarding hides both).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { freePort } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

async function fakeMember(leaderHeader) {
  const seen = [];
  const srv = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    const headers = { "Content-Type": "application/json" };
    if (leaderHeader()) headers["Fencer-Leader"] = leaderHeader();
    if (req.url === "/v1/cluster") {
      res.writeHead(404, headers).end(JSON.stringify({ error: "no such route", code: "not_found" }));
      return;
    }
    res.writeHead(200, headers).end(JSON.stringify({ lock: "x", held: false }));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return { addr: `127.0.0.1:${srv.address().port}`, seen, close: () => srv.close() };
}

test("an answer's Fencer-Leader sends the next request to the leader it names", async () => {
  let leaderAddr = "";
  const leader = await fakeMember(() => "");
  const follower = await fakeMember(() => leaderAddr);
  leaderAddr = leader.addr;
  try {
    const client = new fencer.Client([follower.addr]);
    await client.status("x");
    assert.deepEqual(follower.seen.filter((s) => s.startsWith("GET /v1/locks")), ["GET /v1/locks/x"]);
    await client.status("x");
    assert.deepEqual(leader.seen, ["GET /v1/locks/x"]);
  } finally {
    leader.close();
    follower.close();
  }
});

test("a member that refuses connections is left at once for the next", async () => {
  const alive = await fakeMember(() => "");
  const dead = `127.0.0.1:${await freePort()}`; // nothing listens
  try {
    const client = new fencer.Client([dead, alive.addr], { attempts: 2 });
    const started = performance.now();
    await client.status("x");
    assert.ok(performance.now() - started < 500, `took ${Math.round(performance.now() - started)}ms`);
    assert.ok(alive.seen.includes("GET /v1/locks/x"));
  } finally {
    alive.close();
  }
});
