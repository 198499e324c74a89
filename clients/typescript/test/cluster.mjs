// Real fencer nodes for the tests: `fencer serve` processes on free
// loopback ports in a temporary directory (as clients/python/tests/cluster.py).
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, rmSync, existsSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = join(here, "..", "..", "..");
export const BIN = process.env.FENCER_BIN ?? join(REPO, "bin", "fencer");

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** poll calls cond until it returns a truthy value, or fails after timeoutMs. */
export async function poll(what, cond, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await cond();
      if (v) return v;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function getJSON(addr, path) {
  const r = await fetch(`http://${addr}${path}`, { signal: AbortSignal.timeout(2000) });
  if (!r.ok) return undefined;
  return r.json();
}

/**
 * Proxy stands before one node's HTTP API: requests pass at once, answers
 * are held `delayMs` (in order), or with `silent` never sent, so a test can
 * make a member slow or dead to the client.
 */
export class Proxy {
  delayMs = 0;
  silent = false;
  /** The next request matching it has its answer lost: the connection is reset as the answer comes. */
  dropAnswerOf = undefined;
  /** Called with each request's first bytes, and when they arrived. */
  onRequest = (_text, _at) => {};

  static async start(port, upstream) {
    const p = new Proxy();
    p.sockets = new Set();
    p.server = createServer((down) => {
      const up = connect(upstream.port, upstream.host);
      p.sockets.add(down).add(up);
      let drop = false;
      down.on("data", (b) => {
        const text = b.toString("latin1", 0, 200);
        p.onRequest(text, performance.now());
        if (p.dropAnswerOf?.test(text)) {
          p.dropAnswerOf = undefined;
          drop = true;
        }
        up.write(b);
      });
      up.on("data", (b) => {
        if (drop) return end(); // the request was handled; its answer is lost
        if (p.silent) return;
        if (p.delayMs > 0) setTimeout(() => !p.silent && down.write(b), p.delayMs);
        else down.write(b);
      });
      const end = () => { down.destroy(); up.destroy(); p.sockets.delete(down); p.sockets.delete(up); };
      down.on("close", end).on("error", end);
      up.on("close", end).on("error", end);
    });
    await new Promise((r) => p.server.listen(port, "127.0.0.1", r));
    return p;
  }

  /** kill makes the member dead to the client: every connection reset, new ones refused. */
  kill() {
    this.server.close();
    for (const s of this.sockets) s.resetAndDestroy?.() ?? s.destroy();
  }

  close() {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

export class Cluster {
  /** start starts n nodes; with proxied, each behind a Proxy that it advertises as its HTTP address. */
  static async start(n = 3, { proxied = false } = {}) {
    if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run make build (or set FENCER_BIN)`);
    const c = new Cluster();
    c.dir = mkdtempSync(join(tmpdir(), "fencer-ts-"));
    c.nodes = [];
    for (let i = 1; i <= n; i++) {
      c.nodes.push({ id: `n${i}`, http: `127.0.0.1:${await freePort()}`, raft: `127.0.0.1:${await freePort()}`, proc: undefined, args: [] });
    }
    for (const nd of c.nodes) {
      nd.addr = nd.http;
      if (proxied) {
        const port = await freePort();
        nd.proxy = await Proxy.start(port, { host: "127.0.0.1", port: Number(nd.http.split(":")[1]) });
        nd.addr = `127.0.0.1:${port}`;
      }
    }
    const initial = c.nodes.map((nd) => `${nd.id}=${nd.raft}@${nd.addr}`).join(",");
    for (const nd of c.nodes) {
      nd.args = n === 1 ? ["--bootstrap", "--http-advertise-addr", nd.addr] : ["--initial-cluster", initial, "--http-advertise-addr", nd.addr];
      c.startNode(nd);
    }
    try {
      await poll("a leader every node knows", async () => {
        for (const nd of c.nodes) if (!(await getJSON(nd.http, "/readyz"))) return false;
        return true;
      }, 30000);
    } catch (e) {
      c.close(true);
      throw e;
    }
    return c;
  }

  startNode(nd) {
    const log = openSync(join(this.dir, nd.id + ".log"), "a");
    nd.proc = spawn(BIN, ["serve", "--id", nd.id, "--data-dir", join(this.dir, nd.id), "--http-addr", nd.http,
      "--raft-addr", nd.raft, "--election-timeout", "500ms", ...nd.args], { stdio: ["ignore", log, log] });
    nd.exited = new Promise((r) => nd.proc.once("exit", r));
  }

  /** endpoints are the addresses a client is given: the proxies', when proxied. */
  endpoints() {
    return this.nodes.map((nd) => nd.addr);
  }

  running(nd) {
    return nd.proc !== undefined && nd.proc.exitCode === null && nd.proc.signalCode === null;
  }

  /** leader returns the node a running node names as leader, once it runs and is ready. */
  leader() {
    return poll("a running leader", async () => {
      for (const nd of this.nodes) {
        if (!this.running(nd)) continue;
        const st = await getJSON(nd.http, "/v1/cluster");
        const l = this.nodes.find((x) => x.id === st?.leader);
        if (l && this.running(l) && (await getJSON(l.http, "/readyz"))) return l;
      }
      return undefined;
    }, 30000);
  }

  async kill(nd) {
    if (this.running(nd)) {
      nd.proc.kill("SIGKILL");
      await nd.exited;
    }
  }

  close(keep = false) {
    for (const nd of this.nodes) {
      if (this.running(nd)) nd.proc.kill("SIGKILL");
      nd.proxy?.close();
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}
