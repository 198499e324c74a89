#!/usr/bin/env bash
# cluster.sh: start, inspect and stop a local cluster of separate
# `fencer serve` processes on loopback.
#
#   scripts/cluster.sh start [3|5]   build bin/fencer, start the nodes
#   scripts/cluster.sh status        GET /v1/cluster from each node
#   scripts/cluster.sh stop          SIGTERM each node (by its pid file)
#
# Node i listens on HTTP 127.0.0.1:(7000+i) and Raft 127.0.0.1:(8000+i);
# data, logs and pid files live in ${FENCER_CLUSTER_DIR:-/tmp/fencer-cluster}.
# The nodes start together with one --initial-cluster; restarting them with
# `start` again reuses their data dirs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FENCER_CLUSTER_DIR:-/tmp/fencer-cluster}
bin=./bin/fencer

start() {
	local n=${1:-3}
	[[ $n == 3 || $n == 5 ]] || { echo "cluster size must be 3 or 5" >&2; exit 2; }
	go build -o "$bin" ./cmd/fencer
	mkdir -p "$dir"
	local initial=""
	for i in $(seq 1 "$n"); do
		initial+="${initial:+,}n$i=127.0.0.1:$((8000 + i))@127.0.0.1:$((7000 + i))"
	done
	for i in $(seq 1 "$n"); do
		if [[ -f $dir/n$i.pid ]] && kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then
			echo "n$i already running (pid $(cat "$dir/n$i.pid"))"
			continue
		fi
		"$bin" serve --id "n$i" --data-dir "$dir/n$i" \
			--http-addr "127.0.0.1:$((7000 + i))" --raft-addr "127.0.0.1:$((8000 + i))" \
			--initial-cluster "$initial" >>"$dir/n$i.log" 2>&1 &
		echo $! >"$dir/n$i.pid"
		echo "n$i started (pid $!), http://127.0.0.1:$((7000 + i)), log $dir/n$i.log"
	done
	for _ in $(seq 1 100); do
		if curl -fsS "http://127.0.0.1:7001/readyz" >/dev/null 2>&1; then
			echo "cluster ready"
			return 0
		fi
		sleep 0.1
	done
	echo "cluster not ready after 10 s; see $dir/*.log" >&2
	exit 1
}

status() {
	for pidfile in "$dir"/n*.pid; do
		[[ -e $pidfile ]] || { echo "no nodes"; return; }
		local id=${pidfile##*/}; id=${id%.pid}
		local port=$((7000 + ${id#n}))
		printf '%s: ' "$id"
		curl -fsS "http://127.0.0.1:$port/v1/cluster" || echo "down"
		echo
	done
}

stop() {
	for pidfile in "$dir"/n*.pid; do
		[[ -e $pidfile ]] || continue
		local pid
		pid=$(cat "$pidfile")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid"
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			echo "stopped ${pidfile##*/} ($pid)"
		fi
		rm -f "$pidfile"
	done
}

case ${1:-} in
start) start "${2:-3}" ;;
status) status ;;
stop) stop ;;
*) echo "usage: $0 start [3|5] | status | stop" >&2; exit 2 ;;
esac
