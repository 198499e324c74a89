#!/usr/bin/env bash
# bench-streams.sh: what unread event streams and parked blocking reads cost
# a node (issue 26's F1 and F2, measured the way the review measured them).
#
#   scripts/bench-streams.sh                      this tree's build
#   FENCER=/tmp/old/fencer scripts/bench-streams.sh   another build
#
# It starts one `fencer serve` on loopback (every default but --rate-limit
# 0, which the load needs, and the stream and parked-read limits per
# principal, raised so that one client may open them all: without an ACL
# every loopback client is one principal), fills its event history with
# EVENTS events (lock cycles: acquire, release), then:
#   - for each N in STREAMS, opens N streams GET /v1/events?since=41 that
#     never read a byte, and samples the node's Go heap (heap in use, from
#     /metrics), its RSS (/proc), goroutines and open streams about 1, 2, 5,
#     10, 15 and HOLD seconds after the last one opened (each sample names
#     its time), then the answers (200, 429, closed) and the
#     kernel's TCP buffer memory (/proc/net/sockstat);
#   - times REQS blocking reads with an old wait_index (41) and with a
#     current one, in node CPU per request (/proc/PID/stat);
#   - parks PARKED blocking reads (wait=5m) and samples the same figures.
# A run stops opening streams when the node's RSS passes MAX_RSS_MB (a build
# that copies the history per stream would take the machine's memory).
# Everything it started is stopped by pid when it exits, on error too.
#
# Knobs: EVENTS (50000), STREAMS ("100 1000"), HOLD (20), REQS (200),
# PARKED (300), MAX_RSS_MB (6000), PORT_BASE (17600), FENCER, BENCH_DIR,
# KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/bench.sh
source scripts/lib/bench.sh
EVENTS=${EVENTS:-50000}
STREAMS=${STREAMS:-100 1000}
HOLD=${HOLD:-20}
REQS=${REQS:-200}
PARKED=${PARKED:-300}
MAX_RSS_MB=${MAX_RSS_MB:-6000}
PORT_BASE=${PORT_BASE:-17600}

bench_workdir fencer-streams 'n1' '*.log'
pids=()
cleanup() {
	local status=$?
	bench_stop "${pids[@]}"
	bench_remove_workdir
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z ${FENCER:-} ]]; then
	go build -o "$work/fencer" ./cmd/fencer
	FENCER=$work/fencer
fi
addr=127.0.0.1:$PORT_BASE
flags=()
# A build with per-principal limits gets them raised to the most this run
# opens; the per-node limits keep their defaults.
if "$FENCER" serve --help 2>&1 | grep -q -- --max-event-streams-per-principal; then
	flags+=(--max-event-streams-per-principal 100000 --max-blocking-reads-per-principal 100000)
fi
FENCER_RATE_LIMIT=0 "$FENCER" serve --id n1 --bootstrap --data-dir "$work/n1" --http-addr "$addr" \
	--raft-addr "127.0.0.1:$((PORT_BASE + 1))" "${flags[@]}" >"$work/n1.log" 2>&1 &
node=$!
pids+=("$node")
ready "http://$addr/readyz" ready

metric() { curl -fsS "http://$addr/metrics" | awk -v m="$1" '$1 == m {printf "%.0f", $2}'; }
heap() { echo $(($(metric go_memstats_heap_inuse_bytes) >> 20)); }
rss() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$node/status"; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$node/stat"; }
tcpmem() { awk '$1 == "TCP:" {for (i = 2; i < NF; i++) if ($i == "mem") printf "%.0f", $(i + 1) * 4 / 1024}' /proc/net/sockstat; }
applied() { curl -fsS "http://$addr/v1/cluster" | sed -n 's/.*"applied_index":\([0-9]*\).*/\1/p'; }
sample() {
	local open
	open=$(metric fencer_event_streams_open)
	echo "$1: heap $(heap) MB, RSS $(rss) MB, goroutines $(metric go_goroutines)${open:+, streams open $open, blocking reads $(metric fencer_blocking_reads_open)}, kernel TCP $(tcpmem) MB"
}

# hog N PATH SECONDS OUT: N connections that each send GET PATH and read
# nothing for SECONDS; then the first bytes of each answer are classified
# into OUT (JSON). It writes OUT.ready once every request is sent.
hog() {
	python3 - "$@" <<'EOF'
import json, socket, sys, time
n, path, hold, out = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
host, port = sys.argv[5].rsplit(":", 1)
socks = []
for _ in range(n):
    s = socket.create_connection((host, int(port)))
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, sys.argv[5])).encode())
    socks.append(s)
open(out + ".ready", "w").close()
time.sleep(hold)
counts = {}
for s in socks:
    s.settimeout(0.05)
    try:
        head = s.recv(12)
        kind = head.decode(errors="replace")[9:12] if head else "closed"
    except socket.timeout:
        kind = "no answer yet"
    except OSError:
        kind = "closed"
    counts[kind] = counts.get(kind, 0) + 1
json.dump(counts, open(out, "w"))
EOF
}
# run_hog N PATH LABEL: opens them, samples while they are held, reports.
run_hog() {
	local out=$work/hog-$RANDOM
	hog "$1" "$2" "$HOLD" "$out" "$addr" &
	local h=$!
	pids+=("$h")
	local t0=$EPOCHREALTIME
	for _ in $(seq 1 1200); do
		[[ -e $out.ready ]] && break
		kill -0 "$h" 2>/dev/null || break
		if (($(rss) > MAX_RSS_MB)); then
			echo "$3: node RSS $(rss) MB passed MAX_RSS_MB=$MAX_RSS_MB while opening; stopping the streams"
			bench_stop "$h"
			return 0
		fi
		sleep 0.05
	done
	echo "$3: $1 opened in $(echo "$EPOCHREALTIME - $t0" | bc) s"
	# Each sample says when it was taken: a node busy writing backlogs
	# answers /metrics late.
	local start=$EPOCHREALTIME at
	for at in 1 2 5 10 15 "$HOLD"; do
		((at <= HOLD)) || continue
		while (($(echo "$EPOCHREALTIME - $start < $at" | bc))); do
			if (($(rss) > MAX_RSS_MB)); then
				sample "$3 RSS past MAX_RSS_MB at +$(echo "$EPOCHREALTIME - $start" | bc | cut -c1-4)s"
				bench_stop "$h"
				return 0
			fi
			sleep 0.1
		done
		sample "$3 +$(echo "$EPOCHREALTIME - $start" | bc | cut -c1-4)s"
	done
	wait "$h" || true
	echo "$3 answers: $(cat "$out")"
	sleep 2
	sample "$3 closed +2s"
}

log "filling the event history with $EVENTS events (lock cycles)"
"$FENCER" bench --endpoints "$addr" -w uncontended -c 16 --warmup 0 --ops $((EVENTS / 2)) -d 10m >"$work/bench.txt"
# f2.lock changes last: a blocking read of it from any older index answers
# at once, after finding (or scanning to) the lock's newest event.
curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' "http://$addr/v1/locks/f2.lock/acquire" -d '{"holder":"f2","ttl_ms":600000}'
echo "history: applied index $(applied), $EVENTS events of lock cycles"
sleep 2
sample "baseline"

for n in $STREAMS; do
	run_hog "$n" "/v1/events?since=41" "$n unread streams"
done

log "blocking reads: CPU per request"
now=$(applied)
for wi in 41 $((now - 1)); do
	c0=$(cpu)
	for _ in $(seq 1 "$REQS"); do
		curl -fsS -o /dev/null "http://$addr/v1/locks/f2.lock?wait_index=$wi&wait=1s"
	done
	c1=$(cpu)
	echo "wait_index=$wi (applied $now): $(echo "($c1 - $c0) * 1000 / $REQS" | bc -l | cut -c1-5) ms of node CPU per request over $REQS"
done
c0=$(cpu)
run_hog "$PARKED" "/v1/locks/f2.idle?wait_index=$now&wait=5m" "$PARKED parked reads"
echo "$PARKED parked reads: $(echo "$(cpu) - $c0" | bc) s of node CPU over the hold"
