// clients/testdata/bad_server.json: answers a fencer client must not believe
// (redirects, empty and malformed bodies, grants that do not match, huge and
// dripped answers), played by a fake node as raw HTTP/1.1 bytes; the format
// is in that directory's README.md, and the Go and Python clients run the
// same table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { REPO } from "./cluster.mjs";
import * as fencer from "../dist/index.js";

const table = JSON.parse(readFileSync(join(REPO, "clients", "testdata", "bad_server.json"), "utf8"));
const REASONS = { 200: "OK", 204: "No Content", 302: "Found", 304: "Not Modified", 404: "Not Found" };

function opOf(method, path) {
  path = path.split("?")[0];
  if (path.startsWith("/v1/kv/")) return method === "PUT" || method === "GET" ? "put" : "other";
  for (const op of ["acquire", "renew", "release"]) {
    if (new RegExp(`^/v1/(locks|semaphores)/[^/]+/${op}$`).test(path)) return op;
  }
  return "other";
}

/** BadServer plays one scenario; counts counts each operation's requests. */
async function badServer(scenario) {
  const counts = {};
  const grant = { ttl_ms: table.grant.ttl_ms, token: 7 };
  const sockets = new Set();
  const server = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let buf = Buffer.alloc(0);
    sock.on("data", (b) => {
      buf = Buffer.concat([buf, b]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.subarray(0, end).toString("latin1").split("\r\n");
      const headers = Object.fromEntries(head.slice(1).map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      const length = Number(headers["content-length"] ?? 0);
      if (buf.length < end + 4 + length) return;
      const body = buf.subarray(end + 4, end + 4 + length).toString("utf8");
      buf = Buffer.alloc(0);
      let [method, path] = head[0].split(" ");
      const redirected = path.startsWith("/redirected/");
      if (redirected) path = path.slice("/redirected".length);
      let req = {};
      try {
        req = JSON.parse(body || "{}") ?? {};
      } catch {
        // not JSON
      }
      const op = opOf(method, path);
      counts[op] = (counts[op] ?? 0) + 1;
      if (op === "acquire") grant.ttl_ms = req.ttl_ms ?? grant.ttl_ms;
      const values = {
        name: path.split("?")[0].split("/")[3] ?? "",
        holder: req.holder ?? "",
        ttl_ms: grant.ttl_ms,
        request_id: req.request_id ?? "",
        token: req.token || headers["fencing-token"] || grant.token,
        key: op === "put" ? path.split("?")[0].slice("/v1/kv/".length) : "",
      };
      let spec = { ...table.defaults[op] };
      if (op === scenario.call && scenario.answer && !redirected) {
        spec = { ...spec, ...scenario.answer };
        if (!("body" in scenario.answer)) spec.body = table.defaults[op].body;
      }
      write(sock, spec, values);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    endpoint: `127.0.0.1:${server.address().port}`,
    counts,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

function write(sock, spec, values) {
  const body = Buffer.from((spec.body ?? "").replace(/\$\{(\w+)\}/g, (_, k) => String(values[k])), "utf8");
  const pad = Number(spec.pad_bytes ?? 0);
  const headers = { "Content-Type": "application/json", ...(spec.headers ?? {}) };
  if (!spec.no_length) headers["Content-Length"] = String(Math.max(body.length, pad));
  headers.Connection = "close";
  const head = Buffer.from(`HTTP/1.1 ${spec.status} ${REASONS[spec.status] ?? "Status"}\r\n` + Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n", "latin1");
  const all = Buffer.concat([head, body]);
  if (spec.drip_ms) {
    let i = 0;
    const t = setInterval(() => {
      if (i >= all.length || sock.destroyed) return clearInterval(t), sock.end();
      sock.write(all.subarray(i, ++i));
    }, spec.drip_ms);
    return;
  }
  sock.write(all);
  let left = pad - body.length;
  const chunk = Buffer.alloc(64 << 10, " ");
  const more = () => {
    while (left > 0 && !sock.destroyed) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!sock.write(chunk.subarray(0, n))) return sock.once("drain", more);
    }
    sock.end();
  };
  more();
}

function acquire(client, opts = {}) {
  return client.acquire(table.grant.name, { ttlMs: table.grant.ttl_ms, keepAlive: false, ...opts });
}

for (const sc of table.scenarios) {
  test(`bad server: ${sc.name} (${sc.expect})`, async () => {
    const srv = await badServer(sc);
    const client = new fencer.Client([srv.endpoint], { attempts: 3 });
    const timeoutMs = sc.timeout_ms ?? 2000;
    try {
      let call;
      if (sc.call === "acquire") {
        call = () => acquire(client, { signal: AbortSignal.timeout(timeoutMs) });
      } else if (sc.call === "put") {
        call = () => client.put(table.put.key, table.put.value, table.put.token);
      } else {
        const lease = await acquire(client);
        call = () => lease.renew();
      }
      const started = performance.now();
      if (sc.expect === "ok") {
        const got = await call();
        if (sc.call === "acquire") {
          assert.equal(got.token, 7);
          assert.equal(got.name, table.grant.name);
          assert.equal(got.ttlMs, table.grant.ttl_ms);
        }
      } else if (sc.expect === "bad_answer") {
        await assert.rejects(call(), (e) => e instanceof fencer.BadAnswerError && e.code === "bad_answer");
      } else {
        await assert.rejects(call(), fencer.FencerError);
        assert.ok(performance.now() - started <= timeoutMs + 1000, `took ${Math.round(performance.now() - started)}ms`);
      }
      if (sc.call !== "renew") return;
      // Kept alive: a lease whose renewals are not believed ends at its
      // local deadline, after a bounded number of renewals.
      const before = srv.counts.renew ?? 0;
      const sent = performance.now();
      const lease = await acquire(client, { keepAlive: true });
      const ttl = table.grant.ttl_ms;
      if (sc.expect === "ok") {
        await new Promise((r) => setTimeout(r, 2 * ttl + 200));
        assert.equal(lease.lost, false);
        await lease.release();
      } else {
        await new Promise((r) => (lease.signal.aborted ? r() : lease.signal.addEventListener("abort", r, { once: true })));
        assert.ok(performance.now() - sent <= ttl, `lost ${Math.round(performance.now() - sent)}ms after the acquire`);
        const renewals = (srv.counts.renew ?? 0) - before;
        assert.ok(renewals >= 1 && renewals <= 20, `${renewals} renewals`);
      }
    } finally {
      srv.close();
    }
  });
}
