// The TypeScript client's conformance agent: it speaks
// test/conformance/PROTOCOL.md on stdin and stdout, one JSON object a line,
// and does every operation through the client's public API (dist/).
// Requests run concurrently and are answered by id; diagnostics go to stderr.
import { createInterface } from "node:readline";
import * as fencer from "../dist/index.js";

const client = new fencer.Client((process.env.FENCER_ADDRS ?? "").split(",").filter((a) => a !== ""));
const handles = new Map(); // h1…: Lease, MultiLock or Session
const watches = new Map(); // w1…: Watch
let nextHandle = 0;
let nextWatch = 0;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

/** hold names a held grant (or session) and prints its loss, once, unless it was released. */
function hold(h) {
  const name = `h${++nextHandle}`;
  handles.set(name, h);
  const report = () => {
    if (h.reason === "released") return;
    emit({ event: "lost", handle: name, code: h.reason === "revoked" ? "revoked" : "lease_lost", class: h.err?.constructor.name ?? "LeaseLostError" });
  };
  if (h.signal.aborted) report();
  else h.signal.addEventListener("abort", report, { once: true });
  return name;
}

function handle(args, field = "handle") {
  const h = handles.get(args[field]);
  if (!h) throw new fencer.InvalidRequestError(`no handle ${JSON.stringify(args[field])}`, "invalid_request");
  return h;
}

function session(args) {
  return args.session === undefined ? undefined : handle(args, "session");
}

const ops = {
  async acquire(a) {
    const opts = { holder: a.holder, waitMs: a.wait_ms ?? 0, mode: a.mode };
    const s = session(a);
    const l = s ? await s.lock(a.name, opts) : await client.acquire(a.name, { ...opts, ttlMs: a.ttl_ms });
    return { handle: hold(l), token: l.token, ttl_ms: l.ttlMs };
  },
  async multi_acquire(a) {
    const m = await client.multiLock(a.names, { holder: a.holder, ttlMs: a.ttl_ms });
    return { handle: hold(m), token: m.token };
  },
  async sem_acquire(a) {
    const opts = { holder: a.holder, waitMs: a.wait_ms ?? 0 };
    const s = session(a);
    const l = s ? await s.acquirePermit(a.name, a.limit, opts) : await client.acquirePermit(a.name, a.limit, { ...opts, ttlMs: a.ttl_ms });
    return { handle: hold(l), token: l.token };
  },
  async campaign(a) {
    const opts = { holder: a.holder, timeoutMs: a.wait_ms ?? 0 };
    const s = session(a);
    const l = s ? await s.campaign(a.name, a.value, opts) : await client.campaign(a.name, a.value, { ...opts, ttlMs: a.ttl_ms });
    return { handle: hold(l), token: l.token };
  },
  async proclaim(a) {
    await handle(a).proclaim(a.value);
    return {};
  },
  async leader(a) {
    const l = await client.leader(a.name);
    return { holder: l.holder, value: l.value, token: l.token };
  },
  async release(a) {
    const h = handle(a);
    if (a.name !== undefined && h instanceof fencer.MultiLock) {
      // One name of a multi-lock, through the lock's own release: the
      // server refuses it (multi_grant).
      await client.release("locks", a.name, h.token, h.secret);
    } else {
      await (h instanceof fencer.Session ? h.close() : h.release());
    }
    return {};
  },
  async lease_state(a) {
    const h = handle(a);
    return { lost: h.lost, token: h.token ?? h.id };
  },
  async session_open(a) {
    const s = await client.session({ holder: a.holder, ttlMs: a.ttl_ms });
    return { session: hold(s), id: s.id };
  },
  async session_close(a) {
    await handle(a, "session").close();
    return {};
  },
  async put(a) {
    if (a.token === undefined) throw new fencer.InvalidTokenError("the client has no unfenced put: a write carries a token", "invalid_token");
    return { token: await client.put(a.key, a.value, a.token, { lock: a.lock }) };
  },
  async get(a) {
    const got = await client.get(a.key);
    return { value: new TextDecoder().decode(got.value), token: got.token };
  },
  async check(a) {
    const c = await client.check(a.name, a.token);
    const st = await client.status(a.name);
    const shared = (st.shared_holders ?? []).find((g) => g.token === a.token);
    return { current: c.current, holder: st.token === a.token ? st.holder : (shared?.holder ?? "") };
  },
  async token_info(a) {
    const g = await client.tokenInfo(a.token);
    const out = { kind: g.semaphore ? "semaphore" : "lock", name: g.semaphore || g.lock, holder: g.holder };
    if (g.mode) out.mode = g.mode;
    return out;
  },
  async history(a) {
    const grants = await client.history(a.name);
    return { grants: grants.reverse().map((g) => ({ token: g.token, holder: g.holder, ended: g.ended })) };
  },
  async revoke(a) {
    if (a.kind === "session") {
      const h = handles.get(a.name);
      await client.revokeSession(h instanceof fencer.Session ? h.id : Number(a.name));
    } else {
      await client.revoke(a.name, a.token, a.kind === "semaphore" ? "semaphores" : "locks");
    }
    return {};
  },
  async watch(a) {
    const w = client.watch({ from: a.from, prefix: a.prefix });
    const name = `w${++nextWatch}`;
    watches.set(name, w);
    const it = w[Symbol.asyncIterator]();
    // The first event waits for the stream; the watch is answered once its
    // start index is known, so nothing written after the answer is missed.
    const first = it.next();
    await waitStarted(w);
    (async () => {
      try {
        for (let r = await first; !r.done; r = await it.next()) {
          const ev = r.value;
          emit({ event: "watch", watch: name, index: ev.index, type: ev.type, key: ev.key ?? "", name: ev.lock || ev.semaphore || "", token: ev.token ?? 0 });
        }
      } catch (e) {
        emit({ event: "watch_error", watch: name, code: e.code ?? "internal" });
      }
    })();
    return { watch: name };
  },
  async watch_stop(a) {
    watches.get(a.watch)?.close();
    watches.delete(a.watch);
    return {};
  },
  async exit() {
    setImmediate(() => process.exit(0));
    return {};
  },
};

async function waitStarted(w) {
  const end = Date.now() + 10000;
  while (w.index === undefined && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}

function errorOf(e) {
  if (e instanceof fencer.FencerError) return { code: e.code, class: e.constructor.name, message: e.message };
  return { code: "internal", class: e?.constructor?.name ?? "Error", message: String(e?.stack ?? e) };
}

async function serve(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    process.stderr.write(`agent: not JSON: ${line}\n`);
    return;
  }
  const op = ops[req.op];
  if (!op) {
    emit({ id: req.id, ok: false, error: { code: "unsupported", class: "UnsupportedError", message: `op ${req.op}` } });
    return;
  }
  try {
    emit({ id: req.id, ok: true, result: await op(req.args ?? {}) });
  } catch (e) {
    process.stderr.write(`agent: ${req.op} #${req.id}: ${e?.stack ?? e}\n`);
    emit({ id: req.id, ok: false, error: errorOf(e) });
  }
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line.trim() !== "") void serve(line);
});
rl.on("close", () => process.exit(0));
emit({ event: "ready", client: "typescript", version: fencer.VERSION });
