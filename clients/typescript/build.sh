#!/usr/bin/env bash
# Build and test the TypeScript client: npm ci (from the npm registry), tsc,
# an `npm pack` check, then its tests against real bin/fencer nodes.
# scripts/build-clients.sh runs it from `make test`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"

export FENCER_BIN="${FENCER_BIN:-$repo/bin/fencer}"
if [[ ! -x "$FENCER_BIN" ]]; then
  echo "build.sh: $FENCER_BIN is missing; building it" >&2
  (cd "$repo" && go build -o "$FENCER_BIN" ./cmd/fencer)
fi

npm ci --no-audit --no-fund
npm run build
# The tarball must hold the built package and its declarations.
npm pack --dry-run --json | node -e '
  const files = JSON.parse(require("fs").readFileSync(0, "utf8"))[0].files.map((f) => f.path);
  for (const want of ["dist/index.js", "dist/index.d.ts", "package.json", "README.md"]) {
    if (!files.includes(want)) { console.error("npm pack: " + want + " is missing from the tarball"); process.exit(1); }
  }'
npm test
