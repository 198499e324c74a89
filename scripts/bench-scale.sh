#!/usr/bin/env bash
# bench-scale.sh: what a million held locks cost a 3-node fencer (issue 27),
# with each lock's own lease and under sessions.
#
#   scripts/bench-scale.sh                   both modes, 10k, 100k, 300k, 1M locks (5-10 minutes a mode)
#   scripts/bench-scale.sh --quick           both modes, 10k and 100k, snapshots awaited at 100k only (under 3 minutes)
#   scripts/bench-scale.sh --mode sessions   one mode (leases or sessions)
#
# For each mode it starts 3 `fencer serve` processes on loopback (own ports,
# data dirs and bolt log files), and internal/bench/scalebench acquires
# locks up to each point: in mode leases each lock with a lease of its own,
# in mode sessions PER_SESSION (100) locks under each session, 10,000
# sessions at 1,000,000 locks. At each point it waits until every member has
# taken a raft snapshot that covers the locks (raft checks every 30-60 s),
# then reports each member's VmRSS (/proc/PID/status) and live Go heap
# (go_memstats_heap_alloc_bytes of /metrics right after a collection the
# heap profile endpoint forces), and the bytes each costs per lock. After
# the last point it renews what is held, round robin, as fast as CLIENTS
# clients get answers (each lock's lease, or each session), and reports the
# rate the leader sustained and the CPU each process used per 10,000
# renewals. Then it restarts the leader (SIGTERM, start on the same data
# dir) and times it until its /readyz answers 200.
#
# Output: progress on stderr, a table per mode at the end, and one JSON line
# per point in $work/points.jsonl, also printed after the table (the table
# again: go run ./internal/bench/scalebench table FILE…), and the top of
# the leader's heap profile at the last point of each mode. The servers run
# every default but --pprof, --rate-limit 0 (one client address sends
# everything), --max-locks (room for the largest point) and
# --snapshot-threshold 1024 (8,192 by default: a snapshot is then at most
# 1,024 entries short of a point, which matters at 10,000 locks; raft's
# 30-60 s check is what times snapshots under load, so it costs nothing
# else). The whole run stops by itself after LIMIT seconds, and everything
# it started is stopped by pid when it exits, on error too. Not part of
# `make test`.
#
# Knobs (environment): POINTS (10000,100000,300000,1000000; --quick:
# 10000,100000), CLIENTS (256), PER_SESSION (100), RENEW_FOR (15s; --quick
# 5s), SNAPSHOT_WAIT (150s a point), LIMIT (seconds for the whole run: 1200
# a mode, --quick 180 in all), PORT_BASE (17500: HTTP +1..3, Raft
# +11..13), BENCH_DIR (kept), KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

quick=0 modes="leases sessions"
while (($#)); do
	case $1 in
	--quick) quick=1 ;;
	--mode) modes=${2:?--mode needs leases or sessions}; shift ;;
	--mode=*) modes=${1#*=} ;;
	-h | --help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "bench-scale.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
for m in $modes; do
	[[ $m == leases || $m == sessions ]] || { echo "bench-scale.sh: --mode $m: want leases or sessions" >&2; exit 2; }
done
nmodes=$(wc -w <<<"$modes")
snap_flags=()
if ((quick)); then
	POINTS=${POINTS:-10000,100000} RENEW_FOR=${RENEW_FOR:-5s} LIMIT=${LIMIT:-180}
	# Raft's first snapshot check comes 30-60 s after a start: waiting for
	# one at each point would take a minute a point.
	snap_flags=(-snapshot-last-only)
else
	POINTS=${POINTS:-10000,100000,300000,1000000} RENEW_FOR=${RENEW_FOR:-15s} LIMIT=${LIMIT:-$((1200 * nmodes))}
fi
CLIENTS=${CLIENTS:-256}
PER_SESSION=${PER_SESSION:-100}
SNAPSHOT_WAIT=${SNAPSHOT_WAIT:-150s}
PORT_BASE=${PORT_BASE:-17500}
THRESHOLD=1024
largest=${POINTS##*,}

bench_workdir fencer-scale 'n[123]' '*.log' points.jsonl 'heap-*.pprof'
declare -A pid
bg="" # the step running in the background, waited for so that a signal is taken at once
cleanup() {
	local status=$?
	# Nothing here may fail under set -e before the members are stopped:
	# the watchdog that sent the TERM has exited already.
	if [[ -n ${watchdog:-} ]]; then kill "$watchdog" 2>/dev/null || true; fi
	if [[ -n $bg ]]; then bench_stop "$bg"; fi
	bench_stop "${pid[@]}"
	bench_remove_workdir
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'echo "bench-scale.sh: stopped (signal, or the time limit of $LIMIT s)" >&2; exit 124' TERM
# The watchdog's own sleep goes with it when cleanup stops it.
(
	trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
	sleep "$LIMIT" &
	sleeper=$!
	wait "$sleeper"
	kill -TERM $$
) &
watchdog=$!

log "building fencer and scalebench in $work"
go build -o "$work/fencer" ./cmd/fencer
go build -o "$work/scalebench" ./internal/bench/scalebench
http() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
raft() { echo "127.0.0.1:$((PORT_BASE + 10 + $1))"; }
initial="" members=""
for i in 1 2 3; do
	initial+="${initial:+,}n$i=$(raft "$i")@$(http "$i")"
	members+="${members:+,}n$i=$(http "$i")"
done

start() { # node
	FENCER_RATE_LIMIT=0 FENCER_PPROF=1 FENCER_MAX_LOCKS=$((largest + 1000)) FENCER_SNAPSHOT_THRESHOLD=$THRESHOLD \
		"$work/fencer" serve --id "n$1" --data-dir "$work/n$1" --http-addr "$(http "$1")" \
		--raft-addr "$(raft "$1")" --initial-cluster "$initial" >>"$work/n$1.log" 2>&1 &
	pid[$1]=$!
}
stop() { # node
	bench_stop "${pid[$1]}"
	unset "pid[$1]"
}
# wait_ready NODE: prints the seconds until its /readyz answers 200, at
# most 120.
wait_ready() {
	local t0=$EPOCHREALTIME
	for _ in $(seq 1 2400); do
		if curl -fsS -o /dev/null "http://$(http "$1")/readyz" 2>/dev/null; then
			echo "$EPOCHREALTIME - $t0" | bc
			return 0
		fi
		sleep 0.05
	done
	echo "n$1 not ready after 120 s; see $work/n$1.log" >&2
	return 1
}
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/${pid[$1]}/status"; }
leader() { curl -fsS "http://$(http 1)/v1/cluster" | sed -n 's/.*"leader":"n\([0-9]\)".*/\1/p'; }
# run CMD...: runs it in the background and waits, so that the time
# limit's TERM ends the run at once rather than when CMD ends.
run() {
	local rc=0
	"$@" &
	bg=$!
	wait "$bg" || rc=$?
	bg=""
	return "$rc"
}

failed=""
for mode in $modes; do
	rm -rf "$work"/n[123]
	for i in 1 2 3; do start "$i"; done
	for i in 1 2 3; do wait_ready "$i" >/dev/null; done
	# The grant history starts when the leader sets the cluster's settings,
	# a second or so after the members register: wait for it (at most 30
	# s), so that every lock is in it, as on a cluster that has run a while.
	for _ in $(seq 1 600); do
		curl -sS "http://$(http 1)/v1/tokens/1" 2>/dev/null | grep -q '"no_history"' || break
		sleep 0.05
	done
	log "$mode: 3 nodes ready; acquiring to $POINTS"
	if ! run "$work/scalebench" -mode "$mode" -members "$members" -pids "n1=${pid[1]},n2=${pid[2]},n3=${pid[3]}" \
		-points "$POINTS" -clients "$CLIENTS" -per-session "$PER_SESSION" -renew-for "$RENEW_FOR" \
		-snapshot-threshold "$THRESHOLD" -snapshot-wait "$SNAPSHOT_WAIT" "${snap_flags[@]}" \
		-heap-profile "$work/heap-$mode.pprof" >>"$work/points.jsonl"; then
		# The other mode's figures still stand: report them, and fail at the end.
		log "$mode: scalebench failed (above); its points so far are kept"
		failed+=" $mode"
		for i in 1 2 3; do stop "$i"; done
		continue
	fi
	l=$(leader)
	stop "$l"
	start "$l"
	ready=$(wait_ready "$l")
	log "$mode: restarted leader n$l ready in $ready s, RSS $(rss "$l") MB"
	printf '{"mode":"%s","point":"restart","time":"%s","load1":"%s","locks":%d,"node":"n%d","ready_s":%.3f,"rss_mb":%s}\n' \
		"$mode" "$(date -u +%FT%TZ)" "$(cut -d' ' -f1 /proc/loadavg)" "$largest" "$l" "$ready" "$(rss "$l")" >>"$work/points.jsonl"
	for i in 1 2 3; do stop "$i"; done
done

"$work/scalebench" table "$work/points.jsonl"
for mode in $modes; do
	[[ -s $work/heap-$mode.pprof ]] || continue
	echo
	echo "$mode: the leader's live heap at $largest locks ($work/heap-$mode.pprof; KEEP=1 or BENCH_DIR keeps it):"
	go tool pprof -sample_index=inuse_space -top -nodecount 10 "$work/fencer" "$work/heap-$mode.pprof" 2>/dev/null |
		sed -n '/^Showing nodes/,$p' | sed 's/^/  /'
done
echo
cat "$work/points.jsonl"
if [[ -n $failed ]]; then
	echo "bench-scale.sh: failed:$failed" >&2
	exit 1
fi
