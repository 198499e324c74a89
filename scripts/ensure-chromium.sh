#!/usr/bin/env bash
# ensure-chromium.sh: make sure a Chromium for fencer's browser tests
# (test/ui_test.go, driven through chromedp) is installed, installing
# Debian's chromium package when it is missing (root on Debian/Ubuntu).
# make test runs it before the tests. It prints nothing on stdout; the tests
# find the browser on PATH (chromium) or through FENCER_CHROMIUM.
#
# The browser tests fail when no Chromium is found; they are skipped only
# when asked to with FENCER_SKIP_BROWSER_TESTS=1. With it comes a font
# (fonts-dejavu-core): a minimal machine has none, and a page drawn without
# one has no text to check or show.
set -euo pipefail

log() { printf 'ensure-chromium: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n ${FENCER_CHROMIUM:-} ]]; then
	[[ -x $FENCER_CHROMIUM ]] || die "FENCER_CHROMIUM=$FENCER_CHROMIUM is not an executable"
	exit 0
fi
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then
		exit 0
	fi
done
command -v apt-get >/dev/null || die "chromium missing and apt-get not available (install Chromium, or set FENCER_CHROMIUM)"
[[ $(id -u) -eq 0 ]] || die "chromium missing; must run as root to install it (apt-get install chromium)"

export DEBIAN_FRONTEND=noninteractive
log "installing chromium with apt-get"
# A fresh machine's package lists may be empty or stale: update once on failure.
if ! apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2; then
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi
command -v chromium >/dev/null || die "chromium installed but not on PATH"
log "installed: $(chromium --version 2>/dev/null | head -n1)"
