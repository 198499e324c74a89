#!/usr/bin/env bash
# ensure-prometheus.sh: make sure Prometheus's `prometheus` and `promtool`
# binaries are on PATH for fencer's Prometheus tests (test/prometheus_test.go),
# installing Debian's prometheus package when they are missing (root on
# Debian/Ubuntu). make test runs it before the tests.
#
# The tests run their own Prometheus on 127.0.0.1 with a temporary storage
# dir; this script starts nothing. Installing the package would normally start
# Debian's prometheus service (on :9090): while it installs, a policy-rc.d
# that refuses service starts is put in place unless the machine has one, and
# removed afterwards. Recommended packages (the node exporter) are not
# installed.
set -euo pipefail

log() { printf 'ensure-prometheus: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
	exit 0
fi
command -v apt-get >/dev/null || die "prometheus/promtool missing and apt-get not available"
[[ $(id -u) -eq 0 ]] || die "prometheus/promtool missing; must run as root to install them (apt-get install prometheus)"

policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	trap 'rm -f "$policy"' EXIT
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
fi
export DEBIAN_FRONTEND=noninteractive
log "installing prometheus with apt-get"
if ! apt-get install -y -qq --no-install-recommends prometheus >&2; then
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends prometheus >&2
fi
command -v prometheus >/dev/null && command -v promtool >/dev/null || die "prometheus installed but prometheus/promtool not on PATH"
log "installed: $(prometheus --version 2>&1 | head -n1)"
