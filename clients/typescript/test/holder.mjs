// A lock holder in a process of its own, for the paused-holder test: it
// acquires FENCER_LOCK, prints its token, and on each stdin line ("look",
// "put") prints what the client believes and what a late write gets.
import { createInterface } from "node:readline";
import { Client } from "../dist/index.js";

const client = new Client(process.env.FENCER_ADDRS.split(","), { holder: "paused-holder" });
const lease = await client.acquire(process.env.FENCER_LOCK, { ttlMs: Number(process.env.FENCER_TTL_MS) });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
out({ token: lease.token });
createInterface({ input: process.stdin }).on("line", async (cmd) => {
  if (cmd === "look") {
    out({ lost: lease.lost, reason: lease.reason ?? "" });
  } else if (cmd === "put") {
    try {
      await client.put(process.env.FENCER_KEY, "late write", lease.token);
      out({ ok: true });
    } catch (e) {
      out({ code: e.code });
    }
  }
});
