#!/usr/bin/env bash
# bench-hold.sh: a 3-node fencer holding LEASES leases at once, looked at
# closely: what acquiring them costs, where the memory goes, and how a
# restarted or lagging member catches up. The cost curve from 10,000 to
# 1,000,000 locks, with leases and under sessions, is scripts/bench-scale.sh.
#
#   scripts/bench-hold.sh                    LEASES=1000000 by default
#   LEASES=10000 scripts/bench-hold.sh       fewer
#
# It starts 3 `fencer serve` processes on loopback (own ports and data dirs,
# every default but --pprof and --max-locks), acquires LEASES locks with a long TTL and keeps
# them all held, then reports: the acquire rate, each node's resident memory
# (VmRSS) before and after every node snapshotted them, the CPU each process
# used while acquiring (and CPU profiles of the leader and the client), the leader's Go heap
# (a pprof heap profile, kept as heap.pprof, its top printed), the time and
# bytes of GET /v1/locks (streamed) and of a full snapshot download (GET
# /v1/cluster/snapshot, the format raft snapshots use), the raft snapshots the
# nodes took (fencer_snapshot_persist_seconds), the time a restarted follower
# and a restarted leader take until /readyz answers, and a lagging follower:
# stopped while LAG more leases are taken and the leader snapshots and
# compacts its log past it, then started again and timed until it has
# applied what the leader had (it needs the leader's snapshot to get there).
# The FSM-only numbers (heap per lease, snapshot persist and restore) are
# `go test -run '^$' -bench Snapshot -benchtime 1x ./internal/bench/`.
# Everything it started is stopped by pid when it exits, on error too.
#
# The acquiring is bound by CPU (three servers and the client share the
# machine): 256 clients keep enough acquires in flight that the leader
# batches up to 256 entries per log write and AppendEntries, which costs the
# followers a third less CPU per acquire than 64 clients did; each acquire
# is still one HTTP request and its own Raft entry.
#
# Knobs: LEASES (1000000), CLIENTS (256), LAG (20000; 0 skips), PORT_BASE
# (17500), PROFILE (10: seconds of the leader's CPU profile late in the
# acquiring), BENCH_DIR, KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
LEASES=${LEASES:-1000000}
CLIENTS=${CLIENTS:-256}
LAG=${LAG:-20000}
PORT_BASE=${PORT_BASE:-17500}
PROFILE=${PROFILE:-10}

if [[ -n ${BENCH_DIR:-} ]]; then
	work=$BENCH_DIR
	mkdir -p "$work"
	rm -rf "$work"/n[123] "$work"/*.log
else
	work=$(mktemp -d /tmp/fencer-scale.XXXXXX)
fi

declare -A pid
cleanup() {
	local status=$?
	for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pid[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [[ -z ${BENCH_DIR:-} && ${KEEP:-0} != 1 ]]; then rm -rf "$work"; else echo "kept $work"; fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/fencer" ./cmd/fencer
http() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
raft() { echo "127.0.0.1:$((PORT_BASE + 10 + $1))"; }
initial="" endpoints=""
for i in 1 2 3; do
	initial+="${initial:+,}n$i=$(raft $i)@$(http $i)"
	endpoints+="${endpoints:+,}$(http $i)"
done

start() { # node
	# Every default but the profiles, and room for the locks: --max-locks
	# is 1,000,000 by default (the hold workload's holders, one a client,
	# stay under --max-locks-per-holder).
	FENCER_RATE_LIMIT=0 FENCER_PPROF=1 FENCER_MAX_LOCKS=$((LEASES + LAG + 1000)) "$work/fencer" serve --id "n$1" --data-dir "$work/n$1" --http-addr "$(http "$1")" \
		--raft-addr "$(raft "$1")" --initial-cluster "$initial" --log-level info >>"$work/n$1.log" 2>&1 &
	pid[$1]=$!
}
stop() { # node
	kill -TERM "${pid[$1]}"
	wait "${pid[$1]}" 2>/dev/null || true
	unset "pid[$1]"
}
# wait_ready NODE: seconds until /readyz answers 200, at most 120.
wait_ready() {
	local t0=$EPOCHREALTIME
	for _ in $(seq 1 2400); do
		if curl -fsS -o /dev/null "http://$(http "$1")/readyz" 2>/dev/null; then
			echo "$EPOCHREALTIME - $t0" | bc
			return 0
		fi
		sleep 0.05
	done
	echo "n$1 not ready after 120s; see $work/n$1.log" >&2
	return 1
}
cpu() { # seconds of CPU the node used so far, user and system
	awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/${pid[$1]}/stat"
}
rss() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/${pid[$1]}/status"; }
# rss_parts NODE: its RSS as anonymous memory (the Go heap and runtime) and
# file pages (bolt's mapped log, the binary), and its peak RSS so far.
rss_parts() {
	awk '/VmHWM|RssAnon|RssFile/ {v[$1] = $2} END {printf "anon %.0f + file %.0f MB, peak %.0f", v["RssAnon:"] / 1024, v["RssFile:"] / 1024, v["VmHWM:"] / 1024}' "/proc/${pid[$1]}/status"
}
leader() { # asks NODE (default 1)
	curl -fsS "http://$(http "${1:-1}")/v1/cluster" | sed -n 's/.*"leader":"n\([0-9]\)".*/\1/p'
}
applied() { curl -fsS "http://$(http "$1")/v1/cluster" 2>/dev/null | sed -n 's/.*"applied_index":\([0-9]*\).*/\1/p'; }
metric() { # node name
	curl -fsS "http://$(http "$1")/metrics" 2>/dev/null | awk -v m="$2" '$1 == m {print $2}'
}

for i in 1 2 3; do start "$i"; done
for i in 1 2 3; do wait_ready "$i" >/dev/null; done
echo "3 nodes ready in $work; RSS MB before: n1 $(rss 1), n2 $(rss 2), n3 $(rss 3)"
# The grant history starts when the leader sets the cluster's settings, a
# second or so after the members register: wait (at most 30 s), so that
# every lease below is in it (--grant-history 0 answers no_history for good).
for _ in $(seq 1 600); do
	curl -sS "http://$(http 1)/v1/tokens/1" 2>/dev/null | grep -q '"no_history"' || break
	[[ ${FENCER_GRANT_HISTORY:-} == 0 ]] && break
	sleep 0.05
done

echo "acquiring $LEASES leases with $CLIENTS clients (TTL 2h, kept held)"
l=$(leader)
for i in 1 2 3; do cpu0[$i]=$(cpu "$i"); done
# A CPU profile of the leader over PROFILE seconds once 80% of the leases
# are held (what an acquire costs at that scale), and of the client over
# the whole run (kept as acquire-leader.pprof and acquire-client.pprof).
profile_leader() {
	local from target a
	from=$(applied "$l")
	target=$((from + LEASES * 8 / 10))
	for _ in $(seq 1 24000); do
		a=$(applied "$l" || true)
		[[ -n $a ]] && ((a >= target)) && break
		sleep 0.05
	done
	curl -fsS -o "$work/acquire-leader.pprof" "http://$(http "$l")/debug/pprof/profile?seconds=$PROFILE" 2>/dev/null
}
profile_leader &
prof=$!
/usr/bin/time -f '%U %S' -o "$work/client.cpu" "$work/fencer" bench --endpoints "$endpoints" -w hold -c "$CLIENTS" --ops "$LEASES" \
	--ttl 2h -d 2h --warmup 0s --cpu-profile "$work/acquire-client.pprof"
wait "$prof" || true
used="" total=0
for i in 1 2 3; do
	c=$(echo "$(cpu "$i") - ${cpu0[$i]}" | bc)
	mark=""
	((i == l)) && mark=" (leader)"
	used+="n$i $c s$mark, "
	total=$(echo "$total + $c" | bc)
done
c=$(awk '{print $1 + $2}' "$work/client.cpu")
total=$(echo "$total + $c" | bc)
echo "CPU used while acquiring: ${used}client $c s; $(echo "scale=1; $total * 1000000 / $LEASES" | bc) µs of CPU per acquire in all"
for who in leader client; do
	echo "the $who's CPU profile while acquiring (kept as acquire-$who.pprof):"
	go tool pprof -top -nodecount 8 "$work/fencer" "$work/acquire-$who.pprof" 2>/dev/null | sed -n '/^Showing nodes/,$p' | sed 's/^/  /'
done
l=$(leader)
list=$(curl -fsS -o "$work/locks.json" -w '%{size_download} bytes in %{time_total} s' "http://$(http "$l")/v1/locks")
held=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["locks"]))' "$work/locks.json")
rm -f "$work/locks.json"
echo "locks held (the leader's view): $held; GET /v1/locks: $list"
echo "RSS MB with $held leases held, before any snapshot of them (leader n$l): n1 $(rss 1), n2 $(rss 2), n3 $(rss 3)"

# Raft snapshots every 8,192 entries, checked every 30-60 s: wait (at most
# 90 s) until every node has one that covers all the leases.
applied=$(curl -fsS "http://$(http "$l")/v1/cluster" | sed -n 's/.*"applied_index":\([0-9]*\).*/\1/p')
for _ in $(seq 1 180); do
	done_nodes=0
	for i in 1 2 3; do
		idx=$(metric "$i" fencer_raft_last_snapshot_index)
		[[ -n $idx ]] && (($(printf '%.0f' "$idx") >= applied - 8192)) && done_nodes=$((done_nodes + 1))
	done
	((done_nodes == 3)) && break
	sleep 0.5
done
echo "RSS MB after every node snapshotted the leases: n1 $(rss 1), n2 $(rss 2), n3 $(rss 3)"
for i in 1 2 3; do echo "  n$i: $(rss_parts "$i")"; done
curl -fsS -o "$work/heap.pprof" "http://$(http "$l")/debug/pprof/heap"
echo "the leader's Go heap in use (kept as $work/heap.pprof):"
go tool pprof -sample_index=inuse_space -top -nodecount 12 "$work/fencer" "$work/heap.pprof" 2>/dev/null | sed -n '/^Showing nodes/,$p'
fh=$((l % 3 + 1))
curl -fsS -o "$work/heap-follower.pprof" "http://$(http "$fh")/debug/pprof/heap"
echo "follower n$fh's Go heap in use (kept as $work/heap-follower.pprof):"
go tool pprof -sample_index=inuse_space -top -nodecount 12 "$work/fencer" "$work/heap-follower.pprof" 2>/dev/null | sed -n '/^Showing nodes/,$p'

t0=$EPOCHREALTIME
bytes=$(curl -fsS -o "$work/backup.snap" -w '%{size_download}' "http://$(http "$l")/v1/cluster/snapshot" || echo failed)
echo "snapshot download from the leader: $bytes bytes in $(echo "$EPOCHREALTIME - $t0" | bc | cut -c1-5) s"
echo "peak RSS MB so far (VmHWM, the snapshot download's included): n1 $(rss_parts 1 | sed 's/.*peak //'), n2 $(rss_parts 2 | sed 's/.*peak //'), n3 $(rss_parts 3 | sed 's/.*peak //')"
for i in 1 2 3; do
	count=$(metric "$i" fencer_snapshot_persist_seconds_count)
	sum=$(metric "$i" fencer_snapshot_persist_seconds_sum)
	[[ -n $count && $count != 0 ]] && echo "n$i raft snapshots: $count, mean persist $(echo "scale=3; $sum / $count" | bc) s, on disk $(du -sh "$work/n$i/snapshots" | cut -f1)"
done

l=$(leader) # leadership may have moved meanwhile
f=$((l % 3 + 1))
stop "$f"
start "$f"
echo "restarted follower n$f: ready in $(wait_ready "$f" | cut -c1-5) s, RSS $(rss "$f") MB"
stop "$l"
start "$l"
echo "restarted leader n$l: ready in $(wait_ready "$l" | cut -c1-5) s (includes an election), RSS $(rss "$l") MB"

# A lagging follower: stopped while the leader takes LAG more leases and
# compacts its log past the follower, so that it can only catch up by the
# leader's snapshot.
if ((LAG > 0)); then
	l=$(leader "$f")
	f=$((l % 3 + 1))
	stop "$f"
	echo "follower n$f stopped; taking $LAG more leases"
	"$work/fencer" bench --endpoints "$endpoints" -w hold -c "$CLIENTS" --ops "$LAG" --ttl 2h -d 2h --warmup 0s -o json >/dev/null
	target=$(applied "$l")
	# The leader snapshots when 8,192 entries are new, checked every
	# 30-60 s; it keeps 10,240 entries behind the snapshot. Wait (at most
	# 150 s) until what it kept starts after where the follower stopped.
	for _ in $(seq 1 300); do
		idx=$(metric "$l" fencer_raft_last_snapshot_index)
		[[ -n $idx ]] && (($(printf '%.0f' "$idx") >= target - 8192)) && break
		sleep 0.5
	done
	started=$(date -u +%H:%M:%S.%3N)
	start "$f"
	t0=$EPOCHREALTIME
	for _ in $(seq 1 2400); do
		a=$(applied "$f" || true) # nothing while it starts
		[[ -n $a ]] && ((a >= target)) && break
		sleep 0.05
	done
	echo "lagging follower n$f ($LAG leases behind, the leader's log compacted past it): caught up to index $target in $(echo "$EPOCHREALTIME - $t0" | bc | cut -c1-5) s, RSS $(rss "$f") MB"
	# Where the time went: Raft's own log lines at its default level, warn
	# (the leader's last failures to reach the follower, "failed to get
	# log" when it turned to its snapshot, and a failed send).
	echo "  started $started; the leader's last failures and its turn to the snapshot:"
	{ grep -h -E "failed to appendEntries to.*n$f|failed to get log|failed to send snapshot|failed to install snapshot" "$work/n$l.log" || true; } |
		tail -4 | cut -c12-23,24-160 | sed 's/^/    leader   /'
fi
