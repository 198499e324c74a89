#!/usr/bin/env bash
# bench-vs-etcd.sh: fencer and etcd side by side on this machine.
#
#   scripts/bench-vs-etcd.sh            full run (about 14 minutes with held leases and failover)
#   QUICK=1 scripts/bench-vs-etcd.sh    smoke run (1 rep, about 4 minutes)
#
# It installs Debian's etcd-server if etcd is missing, starts a 3-member etcd
# and a 3-node fencer per log store (STORES: bolt, and wal when this build
# has --log-store) on loopback (own ports and data dirs, fsync on in all),
# measures raw hashicorp/raft commits per store (internal/bench,
# BenchmarkRaftApply), then:
#   - closed loop: the same workloads against every system at 1, 16 and 64
#     clients, the order of the systems rotating from one run to the next;
#   - open loop: the uncontended workload offered at fixed rates, 25, 50 and
#     75 % of etcd's closed-loop maximum at 64 clients measured just before,
#     latency from each operation's scheduled start (p50, p99, p99.9);
# and prints one table of medians with the fencer/etcd ratio per row and
# store. Then it holds a million leases on the default store
# (scripts/bench-hold.sh: the acquire rate, RSS per node, restart to ready;
# HOLD=0 skips it, HOLD_LEASES sets how many), and runs the failover
# section (scripts/bench-failover.sh: what stopping the leader costs, fencer
# against etcd; FAILOVER=0 skips it).
# Everything it started is stopped by pid when it exits, on error too.
#
# Knobs (environment): QUICK, REPS (3), DURATION (2s), WARMUP (500ms),
# CLIENTS ("1 16 64"), STORES, OPEN_RATES ("25 50 75", % of etcd's maximum),
# OPEN_REPS (2), OPEN_DURATION (4s), OPEN_POOL (64 clients serve the
# schedule), RAFT_BENCHTIME (1s), FAILOVER (1), FAILOVER_REPS (3),
# FAILOVER_STABILITY (1m), PORT_BASE (default 17100: etcd client +21..23,
# peer +31..33; fencer store k (0, 1, …) HTTP +40k+1..3, Raft +40k+11..13),
# BENCH_DIR (kept if given; default a temp dir removed at exit), KEEP=1 keeps
# the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

if [[ ${QUICK:-0} == 1 ]]; then
	REPS=${REPS:-1} DURATION=${DURATION:-2s} WARMUP=${WARMUP:-500ms} RAFT_BENCHTIME=${RAFT_BENCHTIME:-1s}
	OPEN_REPS=${OPEN_REPS:-1} OPEN_DURATION=${OPEN_DURATION:-3s}
	FAILOVER_REPS=${FAILOVER_REPS:-1} FAILOVER_STABILITY=${FAILOVER_STABILITY:-0}
fi
# The defaults keep the whole of make bench, failover included, under 15
# minutes on a 2-core machine: 2 s windows hold 800 to 10,000 cycles.
REPS=${REPS:-3}
DURATION=${DURATION:-2s}
WARMUP=${WARMUP:-500ms}
RAFT_BENCHTIME=${RAFT_BENCHTIME:-1s}
CLIENTS=${CLIENTS:-"1 16 64"}
OPEN_RATES=${OPEN_RATES:-"25 50 75"}
OPEN_REPS=${OPEN_REPS:-2}
OPEN_DURATION=${OPEN_DURATION:-4s}
OPEN_POOL=${OPEN_POOL:-64}
PORT_BASE=${PORT_BASE:-17100}

bench_workdir fencer-bench 'fencer-n*' 'etcd-e*' results
mkdir -p "$work/results"

pids=()
stop_all() {
	bench_stop "${pids[@]}"
	pids=()
}
cleanup() {
	local status=$?
	stop_all
	bench_remove_workdir
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_etcd

# --- build --------------------------------------------------------------
log "building fencer and etcdbench"
go build -o "$work/fencer" ./cmd/fencer
build_etcdbench
go test -c -o "$work/bench.test" ./internal/bench/

# The log stores this build offers (--log-store), unless STORES says.
if [[ -z ${STORES:-} ]]; then
	STORES=bolt
	if "$work/fencer" serve --help 2>&1 | grep -q -- '--log-store'; then STORES="bolt wal"; fi
fi
store_flag() { # store
	if "$work/fencer" serve --help 2>&1 | grep -q -- '--log-store'; then echo "--log-store $1"; fi
}

# --- raw raft ------------------------------------------------------------
# First, with nothing else of ours running.
log "raw hashicorp/raft commits (BenchmarkRaftApply, -benchtime $RAFT_BENCHTIME)"
# Three runs, the median used: one sample moves by a third on this shared
# machine.
storere=$(echo "$STORES" | tr ' ' '|')
("$work/bench.test" -test.run '^$' -test.bench "RaftApply/store=($storere)\$" -test.benchtime "$RAFT_BENCHTIME" -test.count 3) >"$work/results/raft.txt"
grep Benchmark "$work/results/raft.txt" >&2

# --- start the clusters -------------------------------------------------
fhttp() { echo "127.0.0.1:$((PORT_BASE + 40 * $2 + $1))"; }      # node store-index
fraft() { echo "127.0.0.1:$((PORT_BASE + 40 * $2 + 10 + $1))"; } # node store-index
eclient() { echo "127.0.0.1:$((PORT_BASE + 20 + $1))"; }
epeer() { echo "127.0.0.1:$((PORT_BASE + 30 + $1))"; }

einitial="" eendpoints=""
for i in 1 2 3; do
	einitial+="${einitial:+,}e$i=http://$(epeer $i)"
	eendpoints+="${eendpoints:+,}$(eclient $i)"
done
declare -A fendpoints
systems="etcd"

log "starting a 3-node fencer per log store ($STORES) and a 3-member etcd in $work"
# The per-client rate limit (10,000 requests/s by default) would count every
# benchmark client as one (they share 127.0.0.1): turn it off, as etcd has
# none either.
export FENCER_RATE_LIMIT=0
k=0
for store in $STORES; do
	finitial="" fendpoints[$store]=""
	for i in 1 2 3; do
		finitial+="${finitial:+,}n$i=$(fraft $i $k)@$(fhttp $i $k)"
		fendpoints[$store]+="${fendpoints[$store]:+,}$(fhttp $i $k)"
	done
	for i in 1 2 3; do
		# shellcheck disable=SC2046 # store_flag is empty or two words
		"$work/fencer" serve --id "n$i" --data-dir "$work/fencer-$store-n$i" \
			--http-addr "$(fhttp $i $k)" --raft-addr "$(fraft $i $k)" $(store_flag "$store") \
			--initial-cluster "$finitial" --log-level warn >"$work/fencer-$store-n$i.log" 2>&1 &
		pids+=($!)
	done
	systems+=" fencer-$store"
	k=$((k + 1))
done
for i in 1 2 3; do
	etcd --name "e$i" --data-dir "$work/etcd-e$i" \
		--listen-client-urls "http://$(eclient $i)" --advertise-client-urls "http://$(eclient $i)" \
		--listen-peer-urls "http://$(epeer $i)" --initial-advertise-peer-urls "http://$(epeer $i)" \
		--initial-cluster "$einitial" --initial-cluster-state new --initial-cluster-token fencer-bench \
		--logger zap --log-level warn >"$work/etcd-e$i.log" 2>&1 &
	pids+=($!)
done

k=0
for store in $STORES; do
	for i in 1 2 3; do ready "http://$(fhttp $i $k)/readyz" ready; done
	k=$((k + 1))
done
for i in 1 2 3; do ready "http://$(eclient $i)/health" true; done

# --- the runs -----------------------------------------------------------
# run SYSTEM CLIENTS NAME [RATE]: one run, its results in results/SYSTEM-NAME.json.
run() {
	local sys=$1 c=$2 name=$3 rate=${4:-0} w out="$work/results/$1-$3.json"
	if [[ $sys == etcd ]]; then
		w=uncontended,uncontended-lease,contended,renew,fenced-write
		[[ $c == 1 ]] && w=uncontended,uncontended-lease,renew,fenced-write
		[[ $rate != 0 ]] && w=uncontended
		"$work/etcdbench" -endpoints "$eendpoints" -workload "$w" -clients "$c" -rate "$rate" \
			-duration "$dur" -warmup "$WARMUP" -o json >"$out"
	else
		w=uncontended,contended,renew,fenced-write
		[[ $c == 1 ]] && w=uncontended,renew,fenced-write
		[[ $rate != 0 ]] && w=uncontended
		"$work/fencer" bench --endpoints "${fendpoints[${sys#fencer-}]}" -w "$w" -c "$c" --rate "$rate" \
			-d "$dur" --warmup "$WARMUP" -o json >"$out"
	fi
}
# rotated LIST TURN: LIST's words rotated left by TURN, so that each system
# goes first in turn.
rotated() {
	local -a a
	read -ra a <<<"$1"
	local n=${#a[@]} out="" i
	for ((i = 0; i < n; i++)); do out+="${out:+ }${a[(i + $2) % n]}"; done
	echo "$out"
}

dur=$DURATION
turn=0
for rep in $(seq 1 "$REPS"); do
	for c in $CLIENTS; do
		for sys in $(rotated "$systems" $turn); do
			log "closed loop, rep $rep/$REPS, $c clients: $sys ($(cut -d' ' -f1-3 /proc/loadavg) load)"
			run "$sys" "$c" "c$c-r$rep"
		done
		turn=$((turn + 1))
	done
done

# Open loop at fixed shares of etcd's closed-loop maximum at the most clients.
big=$(echo "$CLIENTS" | tr ' ' '\n' | sort -n | tail -1)
etcd_max=$(python3 - "$work/results" "$big" <<'PY'
import glob, json, os, statistics, sys
xs = []
for p in glob.glob(os.path.join(sys.argv[1], f"etcd-c{sys.argv[2]}-r*.json")):
    xs += [r["ops_per_sec"] for r in json.load(open(p)) if r["workload"] == "uncontended"]
print(f"{statistics.median(xs):.0f}" if xs else 0)
PY
)
dur=$OPEN_DURATION
if ((etcd_max > 0)); then
	for rep in $(seq 1 "$OPEN_REPS"); do
		for pct in $OPEN_RATES; do
			rate=$((etcd_max * pct / 100))
			for sys in $(rotated "$systems" $turn); do
				log "open loop, rep $rep/$OPEN_REPS, $pct% of etcd's $etcd_max/s = $rate/s: $sys ($(cut -d' ' -f1-3 /proc/loadavg) load)"
				run "$sys" "$OPEN_POOL" "o$pct-r$rep" "$rate"
			done
			turn=$((turn + 1))
		done
	done
fi

# --- the table ----------------------------------------------------------
python3 scripts/bench-table.py "$work/results" "$STORES" "$etcd_max" "$OPEN_POOL"

# --- held leases ---------------------------------------------------------
# The issue-31 row: HOLD_LEASES (1,000,000; QUICK: 100,000) held at once on
# the default store, each with its lease (scripts/bench-hold.sh, without its
# lagging follower): the acquire rate, every node's RSS after all of them
# snapshotted, and a restarted follower's and leader's time to /readyz.
if [[ ${HOLD:-1} == 1 ]]; then
	stop_all
	hold_leases=${HOLD_LEASES:-$([[ ${QUICK:-0} == 1 ]] && echo 100000 || echo 1000000)}
	log "held leases: $hold_leases at once (scripts/bench-hold.sh, $(cut -d' ' -f1-3 /proc/loadavg) load)"
	LEASES=$hold_leases LAG=0 PROFILE=1 PORT_BASE=$((PORT_BASE + 400)) scripts/bench-hold.sh >"$work/hold.txt" 2>&1 ||
		{ cat "$work/hold.txt" >&2; exit 1; }
	python3 - "$work/hold.txt" "$hold_leases" <<'PY'
import re, sys
text, n = open(sys.argv[1]).read(), int(sys.argv[2])
rate = float(re.search(r"hold +clients=\d+ ops/s=([\d.]+)", text).group(1))
rss = [int(x) for x in re.search(r"RSS MB after every node snapshotted the leases: n1 (\d+), n2 (\d+), n3 (\d+)", text).groups()]
follower = float(re.search(r"restarted follower n\d: ready in ([\d.]+) s", text).group(1))
leader = float(re.search(r"restarted leader n\d: ready in ([\d.]+) s", text).group(1))
print(f"held leases (bolt, {n:,} at once, a lease each): acquired at {rate:,.0f}/s; RSS after snapshots "
      f"{' / '.join(str(r) for r in rss)} MB; restarted follower ready in {follower:.2f} s, leader {leader:.2f} s")
ok = lambda b: "PASS" if b else "MISS"
print(f"  [{ok(max(rss) <= 1024)}] ≤ 1 GB RSS per node: {max(rss)} MB")
print(f"  [{ok(rate >= 10000)}] ≥ 10,000 acquires/s: {rate:,.0f}/s")
print(f"  [{ok(max(follower, leader) <= 5)}] restart ≤ 5 s: {max(follower, leader):.2f} s")
PY
fi

# --- failover ------------------------------------------------------------
if [[ ${FAILOVER:-1} == 1 ]]; then
	stop_all
	log "failover: what stopping the leader costs (scripts/bench-failover.sh)"
	# Its own dir: it clears its results there before it starts.
	BENCH_DIR=${BENCH_DIR:+$work/failover} QUICK=${QUICK:-0} REPS=${FAILOVER_REPS:-3} \
		STABILITY=${FAILOVER_STABILITY:-1m} scripts/bench-failover.sh
fi
