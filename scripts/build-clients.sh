#!/usr/bin/env bash
# build-clients.sh: build every client that has a build step of its own
# (clients/*/build.sh: the TypeScript package, the Java jar), so that their
# conformance agents run; make test runs it before the Go tests. Fails on
# the first client whose build fails. Clients without a build.sh (Go, the
# Python ones) need nothing built.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
for build in "$repo"/clients/*/build.sh; do
	[[ -e $build ]] || continue
	echo "build-clients: $build" >&2
	(cd "$(dirname "$build")" && bash "$build") || { echo "build-clients: $build failed" >&2; exit 1; }
done
