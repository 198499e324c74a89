// The package as a user gets it: `npm pack` yields a tarball that installs
// into an empty project, and the README's example runs from it against real
// nodes (the docs page shows the same example).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Cluster, REPO } from "./cluster.mjs";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
let cluster;
let dir;
before(async () => {
  cluster = await Cluster.start(1);
  dir = mkdtempSync(join(tmpdir(), "fencer-ts-pack-"));
});
after(() => {
  cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** example returns the README's complete example: the first js block under its heading. */
function example(file) {
  const text = readFileSync(file, "utf8");
  const m = /## A complete example\s+```js\n([\s\S]*?)```/.exec(text);
  assert.ok(m, `${file} has no complete example`);
  return m[1];
}

test("npm pack yields a tarball that installs and runs the README example", () => {
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: pkg, encoding: "utf8" });
  const tgz = join(dir, JSON.parse(out)[0].filename);
  const app = join(dir, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tgz], { cwd: app, stdio: "inherit" });
  assert.ok(existsSync(join(app, "node_modules", "@fencer-io", "client", "dist", "index.d.ts")));
  const code = example(join(pkg, "README.md"));
  assert.equal(example(join(REPO, "docs", "clients", "typescript.md")), code);
  writeFileSync(join(app, "example.mjs"), code);
  const got = execFileSync(process.execPath, ["example.mjs"], {
    cwd: app, encoding: "utf8", env: { ...process.env, FENCER_ENDPOINTS: cluster.endpoints().join(",") }, timeout: 30000,
  });
  assert.equal(got.trim(), "wrote 3 parts under the lock");
});
