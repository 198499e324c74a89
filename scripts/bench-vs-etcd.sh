#!/usr/bin/env bash
# bench-vs-etcd.sh: fencer and etcd side by side on this machine.
#
#   scripts/bench-vs-etcd.sh            full run (3 reps, about 9 minutes)
#   QUICK=1 scripts/bench-vs-etcd.sh    smoke run (1 rep, about 2 minutes)
#
# It installs Debian's etcd-server if etcd is missing, starts a 3-member etcd
# and a 3-node fencer on loopback (own ports and data dirs, fsync on in both),
# measures raw hashicorp/raft commits (bench/raftbench_test.go), then runs the
# same workloads against both systems at 1, 16 and 64 clients, alternating
# which system goes first from one run to the next, and prints one table of
# medians with the fencer/etcd ratio per row. Then it runs the failover
# section (scripts/bench-failover.sh: what stopping the leader costs, fencer
# against etcd; FAILOVER=0 skips it). Everything it started is stopped by
# pid when it exits, on error too.
#
# Knobs (environment): QUICK, REPS, DURATION, WARMUP, CLIENTS ("1 16 64"),
# RAFT_BENCHTIME, PORT_BASE (default 17100: fencer HTTP +1..3, Raft +11..13,
# etcd client +21..23, peer +31..33), BENCH_DIR (kept if given; default a
# temp dir removed at exit), KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ ${QUICK:-0} == 1 ]]; then
	REPS=${REPS:-1} DURATION=${DURATION:-2s} WARMUP=${WARMUP:-500ms} RAFT_BENCHTIME=${RAFT_BENCHTIME:-1s}
fi
REPS=${REPS:-3}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-1s}
RAFT_BENCHTIME=${RAFT_BENCHTIME:-3s}
CLIENTS=${CLIENTS:-"1 16 64"}
PORT_BASE=${PORT_BASE:-17100}

if [[ -n ${BENCH_DIR:-} ]]; then
	work=$BENCH_DIR
	mkdir -p "$work"
	rm -rf "$work"/fencer-n* "$work"/etcd-e* "$work/results"
else
	work=$(mktemp -d /tmp/fencer-bench.XXXXXX)
fi
mkdir -p "$work/results"

pids=()
stop_all() {
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	pids=()
}
cleanup() {
	local status=$?
	stop_all
	if [[ -z ${BENCH_DIR:-} && ${KEEP:-0} != 1 ]]; then
		rm -rf "$work"
	else
		echo "kept $work"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "== $*" >&2; }

# --- etcd ---------------------------------------------------------------
if ! command -v etcd >/dev/null; then
	log "installing Debian's etcd-server"
	# Keep the package from starting its own etcd service.
	policy=""
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		policy=/usr/sbin/policy-rc.d
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
	[[ -n $policy ]] && rm -f "$policy"
fi

# --- build --------------------------------------------------------------
log "building fencer and etcdbench"
go build -o "$work/fencer" ./cmd/fencer
# etcdbench is its own module and shares fencer's internal/bench/load through a
# replace directive, so a change to fencer's go.mod can leave its go.mod
# behind. Build a copy whose requirements go may update (-mod=mod), which
# keeps the checked-in files untouched.
rm -rf "$work/etcdbench-src"
cp -r scripts/etcdbench "$work/etcdbench-src"
(cd "$work/etcdbench-src" && go mod edit -replace "github.com/fencer-io/fencer=$root" &&
	go build -mod=mod -o "$work/etcdbench" .)
go test -c -o "$work/bench.test" ./internal/bench/

# --- raw raft ------------------------------------------------------------
# First, with nothing else of ours running.
log "raw hashicorp/raft commits (BenchmarkRaftApply, -benchtime $RAFT_BENCHTIME)"
# Three runs, the median used: one 3 s sample moves by a third on this
# shared machine.
("$work/bench.test" -test.run '^$' -test.bench RaftApply -test.benchtime "$RAFT_BENCHTIME" -test.count 3) >"$work/results/raft.txt"
grep Benchmark "$work/results/raft.txt" >&2

# --- start both clusters ------------------------------------------------
fhttp() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
fraft() { echo "127.0.0.1:$((PORT_BASE + 10 + $1))"; }
eclient() { echo "127.0.0.1:$((PORT_BASE + 20 + $1))"; }
epeer() { echo "127.0.0.1:$((PORT_BASE + 30 + $1))"; }

finitial="" einitial="" fendpoints="" eendpoints=""
for i in 1 2 3; do
	finitial+="${finitial:+,}n$i=$(fraft $i)@$(fhttp $i)"
	einitial+="${einitial:+,}e$i=http://$(epeer $i)"
	fendpoints+="${fendpoints:+,}$(fhttp $i)"
	eendpoints+="${eendpoints:+,}$(eclient $i)"
done

log "starting a 3-node fencer and a 3-member etcd in $work"
# The per-client rate limit (10,000 requests/s by default) would count every
# benchmark client as one (they share 127.0.0.1): turn it off, as etcd has
# none either.
export FENCER_RATE_LIMIT=0
for i in 1 2 3; do
	"$work/fencer" serve --id "n$i" --data-dir "$work/fencer-n$i" \
		--http-addr "$(fhttp $i)" --raft-addr "$(fraft $i)" \
		--initial-cluster "$finitial" --log-level warn >"$work/fencer-n$i.log" 2>&1 &
	pids+=($!)
	etcd --name "e$i" --data-dir "$work/etcd-e$i" \
		--listen-client-urls "http://$(eclient $i)" --advertise-client-urls "http://$(eclient $i)" \
		--listen-peer-urls "http://$(epeer $i)" --initial-advertise-peer-urls "http://$(epeer $i)" \
		--initial-cluster "$einitial" --initial-cluster-state new --initial-cluster-token fencer-bench \
		--logger zap --log-level warn >"$work/etcd-e$i.log" 2>&1 &
	pids+=($!)
done

ready() {
	for _ in $(seq 1 300); do
		if curl -fsS "$1" 2>/dev/null | grep -q "$2"; then return 0; fi
		sleep 0.1
	done
	echo "not ready after 30s: $1; logs in $work" >&2
	return 1
}
for i in 1 2 3; do
	ready "http://$(fhttp $i)/readyz" ready
	ready "http://$(eclient $i)/health" true
done

# --- the runs -----------------------------------------------------------
run_fencer() { # clients rep
	local w=uncontended,contended,renew,fenced-write
	[[ $1 == 1 ]] && w=uncontended,renew,fenced-write
	"$work/fencer" bench --endpoints "$fendpoints" -w "$w" -c "$1" \
		-d "$DURATION" --warmup "$WARMUP" -o json >"$work/results/fencer-c$1-r$2.json"
}
run_etcd() { # clients rep
	local w=uncontended,uncontended-lease,contended,renew,fenced-write
	[[ $1 == 1 ]] && w=uncontended,uncontended-lease,renew,fenced-write
	"$work/etcdbench" -endpoints "$eendpoints" -workload "$w" -clients "$1" \
		-duration "$DURATION" -warmup "$WARMUP" -o json >"$work/results/etcd-c$1-r$2.json"
}

turn=0
for rep in $(seq 1 "$REPS"); do
	for c in $CLIENTS; do
		if ((turn % 2 == 0)); then order="fencer etcd"; else order="etcd fencer"; fi
		turn=$((turn + 1))
		for sys in $order; do
			log "rep $rep/$REPS, $c clients: $sys ($(cut -d' ' -f1-3 /proc/loadavg) load)"
			"run_$sys" "$c" "$rep"
		done
	done
done

# --- the table ----------------------------------------------------------
python3 - "$work/results" <<'PY'
import glob, json, os, re, statistics, subprocess, sys, time

results = sys.argv[1]
runs = []
for path in sorted(glob.glob(os.path.join(results, "*.json"))):
    with open(path) as f:
        runs.extend(json.load(f))

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def pick(system, workload, clients, field):
    return [r[field] for r in runs if r["system"] == system and r["workload"] == workload and r["clients"] == clients]

# row: (label, fencer workload, etcd workload)
rows = [
    ("uncontended (etcd: session reused)", "uncontended", "uncontended"),
    ("uncontended (etcd: lease per lock)", "uncontended", "uncontended-lease"),
    ("contended, handoffs/s", "contended", "contended"),
    ("renew", "renew", "renew"),
    ("fenced-write", "fenced-write", "fenced-write"),
]
clients = sorted({r["clients"] for r in runs})
reps = max(len(pick("fencer", "uncontended", c, "ops_per_sec")) for c in clients)

samples = {}
with open(os.path.join(results, "raft.txt")) as f:
    for line in f:
        m = re.search(r"writers=(\d+)\S*\s+\d+\s+\S+ ns/op\s+([\d.]+) commits/s", line)
        if m:
            samples.setdefault(int(m.group(1)), []).append(float(m.group(2)))
raft = {w: med(v) for w, v in samples.items()}

load = open("/proc/loadavg").read().split()[:3]
print()
print(f"fencer vs etcd, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, load {' '.join(load)} at the end")
print(f"medians of {reps} run(s) per cell; 3 members each on loopback, fsync on; ops/s is lock cycles/s (acquire+release), handoffs/s, renewals/s or acquire+write+release cycles/s")
print()
hdr = f"{'workload':36} {'clients':>7} {'fencer/s':>9} {'etcd/s':>9} {'ratio':>6}  {'p50 f/e ms':>13}  {'p99 f/e ms':>15}  {'errors f/e':>10}"
print(hdr)
print("-" * len(hdr))
ratio = {}
for label, fw, ew in rows:
    for c in clients:
        f = pick("fencer", fw, c, "ops_per_sec")
        e = pick("etcd", ew, c, "ops_per_sec")
        if not f or not e:
            continue
        fm, em = med(f), med(e)
        fp50, ep50 = med(pick("fencer", fw, c, "p50_ms")), med(pick("etcd", ew, c, "p50_ms"))
        fp99, ep99 = med(pick("fencer", fw, c, "p99_ms")), med(pick("etcd", ew, c, "p99_ms"))
        ferr, eerr = sum(pick("fencer", fw, c, "errors")), sum(pick("etcd", ew, c, "errors"))
        r = fm / em if em else float("inf")
        ratio[(ew, c)] = (r, fp50 / ep50 if ep50 else float("inf"), fm)
        print(f"{label:36} {c:>7} {fm:>9.0f} {em:>9.0f} {r:>5.2f}x  {fp50:>6.2f}/{ep50:<6.2f}  {fp99:>7.1f}/{ep99:<7.1f}  {ferr:>4}/{eerr:<5}")
print()
if raft:
    print("raw hashicorp/raft (3 nodes, raft-boltdb, fsync, same settings), median commits/s: " +
          ", ".join(f"{w} writer{'s' if w > 1 else ''} {v:.0f}" for w, v in sorted(raft.items())))
    for c in clients:
        if c in raft and ("uncontended", c) in ratio:
            fm = ratio[("uncontended", c)][2]
            print(f"  fencer uncontended at {c} clients: {fm:.0f} cycles/s = {2 * fm:.0f} commits/s = "
                  f"{100 * 2 * fm / raft[c]:.0f}% of raw Raft's commits/s ÷ 2 at {c} writers")
print()
def target(name, ok):
    print(f"  [{'PASS' if ok else 'MISS'}] {name}")
print("targets (issue 6):")
big = max(clients)
if ("uncontended", big) in ratio:
    target(f"uncontended, {big} clients: ≥ 2× etcd (session reused): {ratio[('uncontended', big)][0]:.2f}×", ratio[("uncontended", big)][0] >= 2)
if ("uncontended-lease", big) in ratio:
    target(f"uncontended, {big} clients: ≥ 5× etcd (lease per lock): {ratio[('uncontended-lease', big)][0]:.2f}×", ratio[("uncontended-lease", big)][0] >= 5)
if ("uncontended", 1) in ratio:
    target(f"one client: cycle p50 ≤ 0.5× etcd's: {ratio[('uncontended', 1)][1]:.2f}×", ratio[("uncontended", 1)][1] <= 0.5)
if ("contended", 16) in ratio:
    target(f"contended, 16 clients: handoffs ≥ 3× etcd: {ratio[('contended', 16)][0]:.2f}×", ratio[("contended", 16)][0] >= 3)
if big in raft and ("uncontended", big) in ratio:
    share = 2 * ratio[("uncontended", big)][2] / raft[big]
    target(f"{big} clients: ≥ 70% of raw Raft commits/s ÷ 2: {100 * share:.0f}%", share >= 0.7)
PY

# --- failover ------------------------------------------------------------
if [[ ${FAILOVER:-1} == 1 ]]; then
	stop_all
	log "failover: what stopping the leader costs (scripts/bench-failover.sh)"
	QUICK=${QUICK:-0} scripts/bench-failover.sh
fi
