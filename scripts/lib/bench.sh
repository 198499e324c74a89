# shellcheck shell=bash
# scripts/lib/bench.sh: what the benchmark scripts share, sourced from the
# repository root: their work dir, stopping what they started by pid,
# readiness polls, and etcd with its benchmark client (scripts/etcdbench).

# log MESSAGE: a progress line on stderr.
log() { echo "== $*" >&2; }

# bench_workdir PREFIX STALE...: sets work to $BENCH_DIR, created, with the
# STALE globs of an earlier run removed from it; without BENCH_DIR, to a new
# temporary dir /tmp/PREFIX.XXXXXX.
bench_workdir() {
	local prefix=$1 stale
	shift
	if [[ -n ${BENCH_DIR:-} ]]; then
		work=$BENCH_DIR
		mkdir -p "$work"
		for stale in "$@"; do
			# shellcheck disable=SC2086 # the glob must expand
			rm -rf "$work"/$stale
		done
	else
		work=$(mktemp -d "/tmp/$prefix.XXXXXX")
	fi
}

# bench_remove_workdir removes the work dir, unless it is $BENCH_DIR or
# KEEP=1, in which case it says where it is.
bench_remove_workdir() {
	if [[ -z ${BENCH_DIR:-} && ${KEEP:-0} != 1 ]]; then
		rm -rf "$work"
	else
		echo "kept $work"
	fi
}

# bench_stop PID...: SIGTERM to each, then SIGKILL to any still running 5 s
# later.
bench_stop() {
	local p
	for p in "$@"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

# ready URL PATTERN: waits up to 30 s for URL to answer a body matching
# PATTERN.
ready() {
	for _ in $(seq 1 300); do
		if curl -fsS "$1" 2>/dev/null | grep -q "$2"; then return 0; fi
		sleep 0.1
	done
	echo "not ready after 30s: $1; logs in $work" >&2
	return 1
}

# ensure_etcd installs Debian's etcd-server when etcd is missing, keeping the
# package from starting its own etcd service.
ensure_etcd() {
	command -v etcd >/dev/null && return
	log "installing Debian's etcd-server"
	local policy=""
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		policy=/usr/sbin/policy-rc.d
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
	if [[ -n $policy ]]; then rm -f "$policy"; fi
}

# build_etcdbench builds scripts/etcdbench as $work/etcdbench. etcdbench is
# its own module and shares fencer's internal/bench/load through a replace
# directive, so a change to fencer's go.mod can leave its go.mod behind: it
# builds a copy whose requirements go may update (-mod=mod), which keeps the
# checked-in files untouched.
build_etcdbench() {
	local root=$PWD
	rm -rf "$work/etcdbench-src"
	cp -r scripts/etcdbench "$work/etcdbench-src"
	(cd "$work/etcdbench-src" && go mod edit -replace "github.com/fencer-io/fencer=$root" &&
		go build -mod=mod -o "$work/etcdbench" .)
}
