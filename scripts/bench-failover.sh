#!/usr/bin/env bash
# bench-failover.sh: what stopping the leader costs, fencer against etcd.
#
#   scripts/bench-failover.sh            5 runs per system and mode (~6 minutes)
#   QUICK=1 scripts/bench-failover.sh    1 run each (~1.5 minutes)
#
# It starts a 3-node fencer and a 3-member etcd on loopback (own ports and
# data dirs, fsync on, every default), then, in turn: 16 clients cycle their
# own locks (acquire, release) through every member, the leader's process is
# sent SIGTERM (graceful: a rolling restart) or SIGKILL (a crash) 4 s in, and
# the run reports the longest interval in which no cycle succeeded. The
# stopped member is restarted and every member must be ready again before
# the next run; which system goes first alternates. The table holds the
# medians and every run's figure, and the timeline of the survivors (when a
# new leader was first reported). Everything it started is stopped by pid
# when it exits, on error too.
#
# fencer's clients are half its Go client (given every member, it follows
# the leader) and half plain HTTP clients pinned to one member, which honour
# Retry-After and move on only when a connection fails (internal/bench,
# Failover); etcd's are its Go client, given every member.
#
# Then, with nothing stopped, 64 clients cycle locks for STABILITY (5m) and
# the run reports whether the term moved: a leader deposed by the load or
# the machine's noise rather than by a fault (the cost of short timeouts).
#
# Knobs (environment): QUICK, REPS (5), SYSTEMS ("fencer etcd"), MODES
# ("graceful crash"), CLIENTS (16), AT (4s), RUN (10s), STABILITY (5m; 0
# skips; QUICK: 0), FENCER_FLAGS (extra
# flags for fencer serve, e.g. --election-timeout 1s to measure the old
# default), PORT_BASE (default 17300: fencer HTTP +1..3, Raft +11..13, etcd
# client +21..23, peer +31..33; every port must lie outside the kernel's
# ephemeral range, where a port freed by a stopped member can be taken by
# any outgoing connection), BENCH_DIR (kept if given; default a temp
# dir removed at exit), KEEP=1 keeps the temp dir.
#
# Every run is checked and recorded: failoverbench stops the leader only if
# every member answers /readyz as itself just before (else the run is
# marked invalid), and results/runs.tsv holds one line per run (gaps, how
# long requests ran past the end, the load average before and after, the
# members' readiness). The summary adds each mode's distribution of the
# longest gap (median, p99, max) and of the load.
#
# To provoke what may make a failover go wrong (fencer only): MODES=frozen
# stops the leader with SIGSTOP (a hung host whose connections stay open;
# it gets SIGCONT after the run), and FAILOVER_FLAGS passes flags to
# failoverbench: "-down-follower 1s" kills a follower 1 s before the stop
# (one member short, as when one failed to start), "-stall 600ms" freezes
# the leader just before the stop (a spurious election under way),
# "-op-timeout 5s" bounds each cycle.
#
# KEEP_SLOW=1 keeps the evidence of any run whose longest gap exceeds
# SLOW_MS (1000): the members serve --pprof, a goroutine dump of every
# running member is taken 2 s after the stop, again at the run's end if the
# clients are still busy (with the clients' own stacks, failoverbench's
# SIGUSR1), and once more after the run, before anything is restarted; each
# node's log since the previous run is cut out beside them, in
# slow/SYSTEM-MODE-rREP/, and the work dir is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

if [[ ${QUICK:-0} == 1 ]]; then
	REPS=${REPS:-1} STABILITY=${STABILITY:-0}
fi
STABILITY=${STABILITY:-5m}
REPS=${REPS:-5}
SYSTEMS=${SYSTEMS:-"fencer etcd"}
MODES=${MODES:-"graceful crash"}
CLIENTS=${CLIENTS:-16}
AT=${AT:-4s}
RUN=${RUN:-10s}
PORT_BASE=${PORT_BASE:-17300}
FENCER_FLAGS=${FENCER_FLAGS:-}
FAILOVER_FLAGS=${FAILOVER_FLAGS:-}
KEEP_SLOW=${KEEP_SLOW:-0}
SLOW_MS=${SLOW_MS:-1000}

# A member's port inside the ephemeral range can be taken, while the member
# is down, by any connection's local end, and the member then fails to
# start: such a run measures a cluster short of a member.
read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range
if ((PORT_BASE + 33 >= eph_lo && PORT_BASE + 1 <= eph_hi)); then
	echo "PORT_BASE=$PORT_BASE puts ports $((PORT_BASE + 1))-$((PORT_BASE + 33)) in the kernel's ephemeral range $eph_lo-$eph_hi: pick one below $((eph_lo - 33)) or above $eph_hi" >&2
	exit 2
fi
if [[ $KEEP_SLOW == 1 ]]; then FENCER_FLAGS+=" --pprof"; fi

bench_workdir fencer-failover 'fencer-n*' 'etcd-e*' results slow
mkdir -p "$work/results"
printf 'system\tmode\trep\tat_event_ms\tlongest_ms\tbefore_ms\tdrain_ms\tload_before\tload_after\tvalid\tready_at_stop\tevent\n' >"$work/results/runs.tsv"

declare -A pid
cleanup() {
	local status=$?
	bench_stop "${pid[@]}"
	bench_remove_workdir
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $SYSTEMS == *etcd* ]]; then ensure_etcd; fi

log "building fencer, failoverbench and etcdbench"
go build -o "$work/fencer" ./cmd/fencer
go build -o "$work/failoverbench" ./internal/bench/failoverbench
if [[ $SYSTEMS == *etcd* ]]; then build_etcdbench; fi

fhttp() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
fraft() { echo "127.0.0.1:$((PORT_BASE + 10 + $1))"; }
eclient() { echo "127.0.0.1:$((PORT_BASE + 20 + $1))"; }
epeer() { echo "127.0.0.1:$((PORT_BASE + 30 + $1))"; }

finitial="" einitial="" fmembers="" emembers=""
for i in 1 2 3; do
	finitial+="${finitial:+,}n$i=$(fraft $i)@$(fhttp $i)"
	einitial+="${einitial:+,}e$i=http://$(epeer $i)"
	fmembers+="${fmembers:+,}n$i=$(fhttp $i)"
	emembers+="${emembers:+,}e$i=$(eclient $i)"
done

# The per-client rate limit would count every benchmark client as one (they
# share 127.0.0.1): off, as etcd has none.
export FENCER_RATE_LIMIT=0
start_fencer() { # i
	# shellcheck disable=SC2086 # FENCER_FLAGS is a list of flags
	"$work/fencer" serve --id "n$1" --data-dir "$work/fencer-n$1" \
		--http-addr "$(fhttp "$1")" --raft-addr "$(fraft "$1")" \
		--initial-cluster "$finitial" --log-level info $FENCER_FLAGS >>"$work/fencer-n$1.log" 2>&1 &
	pid[n$1]=$!
	disown # no "Killed" notices: the runs kill on purpose
}
start_etcd() { # i
	etcd --name "e$1" --data-dir "$work/etcd-e$1" \
		--listen-client-urls "http://$(eclient "$1")" --advertise-client-urls "http://$(eclient "$1")" \
		--listen-peer-urls "http://$(epeer "$1")" --initial-advertise-peer-urls "http://$(epeer "$1")" \
		--initial-cluster "$einitial" --initial-cluster-state new --initial-cluster-token fencer-failover \
		--logger zap --log-level warn >>"$work/etcd-e$1.log" 2>&1 &
	pid[e$1]=$!
	disown
}

all_ready() { # system
	for i in 1 2 3; do
		if [[ $1 == fencer ]]; then
			ready "http://$(fhttp $i)/readyz" ready
		else
			ready "http://$(eclient $i)/health" true
		fi
	done
}

log "starting a 3-node fencer and a 3-member etcd in $work"
for sys in $SYSTEMS; do
	for i in 1 2 3; do "start_$sys" "$i"; done
done
for sys in $SYSTEMS; do all_ready "$sys"; done

# restart_stopped starts again the member a run stopped, and waits until
# every member is ready.
restart_stopped() { # system
	local prefix=n
	[[ $1 == etcd ]] && prefix=e
	for i in 1 2 3; do
		local p=${pid[$prefix$i]}
		kill -CONT "$p" 2>/dev/null || true # a frozen leader resumes as a follower
		if ! kill -0 "$p" 2>/dev/null; then
			"start_$1" "$i"
		fi
	done
	all_ready "$1"
	sleep 2 # let the restarted member catch up and the cluster settle
}

pids_of() { # prefix
	local out=""
	for i in 1 2 3; do out+="${out:+,}$1$i=${pid[$1$i]}"; done
	echo "$out"
}

# seconds DURATION: a Go duration of whole seconds or milliseconds, in
# seconds.
seconds() {
	case $1 in
	*ms) awk "BEGIN { print ${1%ms} / 1000 }" ;;
	*s) echo "${1%s}" ;;
	*) echo "seconds: $1: want Ns or Nms" >&2 && return 1 ;;
	esac
}

# dump_members DIR LABEL: a goroutine dump of every running fencer member.
dump_members() {
	local i
	mkdir -p "$1"
	for i in 1 2 3; do
		kill -0 "${pid[n$i]}" 2>/dev/null || continue
		curl -fsS -m 5 "http://$(fhttp $i)/debug/pprof/goroutine?debug=2" >"$1/n$i-goroutines-$2.txt" 2>&1 || true
	done
}

# watch_run PID DIR: while failoverbench PID runs, dumps every member 2 s
# after the stop and, should the clients still be busy 2 s after the run's
# end, the members and the clients.
watch_run() {
	local fb=$1 dir=$2
	sleep "$(awk "BEGIN { print $(seconds "$AT") + 2 }")"
	kill -0 "$fb" 2>/dev/null || return 0
	dump_members "$dir" after-stop
	sleep "$(awk "BEGIN { print $(seconds "$RUN") - $(seconds "$AT") }")"
	kill -0 "$fb" 2>/dev/null || return 0
	dump_members "$dir" past-end
	kill -USR1 "$fb" 2>/dev/null || true # its stacks go to its log
}

run_fencer() { # mode rep signal
	local out=$work/results/fencer-$1-r$2 watcher="" status=0
	rm -rf "$work/slow/pending"
	# shellcheck disable=SC2086 # FAILOVER_FLAGS is a list of flags
	"$work/failoverbench" -members "$fmembers" -pids "$(pids_of n)" -signal "$3" \
		-clients "$CLIENTS" -at "$AT" -duration "$RUN" $FAILOVER_FLAGS -v -o json >"$out.json" 2>"$out.log" &
	local fb=$!
	if [[ $KEEP_SLOW == 1 ]]; then
		watch_run "$fb" "$work/slow/pending" &
		watcher=$!
	fi
	wait "$fb" || status=$?
	if [[ -n $watcher ]]; then
		kill "$watcher" 2>/dev/null || true
		wait "$watcher" 2>/dev/null || true
	fi
	if ((status != 0)); then
		tail -5 "$out.log" >&2
		return 1
	fi
}
run_etcd() { # mode rep signal
	"$work/etcdbench" -workload failover -endpoints "$emembers" -pids "$(pids_of e)" -signal "$3" \
		-clients "$CLIENTS" -at "$AT" -failover-duration "$RUN" -warmup 1s -o json >"$work/results/etcd-$1-r$2.json"
}

# log_marks records how far each node's log has got, so that a slow run's
# logs can be cut from there (the restart before the run included).
declare -A log_mark
log_marks() {
	local f
	for f in "$work"/fencer-n*.log "$work"/etcd-e*.log; do
		[[ -e $f ]] && log_mark[$f]=$(stat -c %s "$f")
	done
	return 0
}

# record SYSTEM MODE REP LOAD_BEFORE: one line of runs.tsv, and for a slow
# run under KEEP_SLOW the evidence, before anything is restarted.
record() {
	local sys=$1 mode=$2 rep=$3 json=$work/results/$1-$2-r$3.json longest
	longest=$(python3 - "$json" "$@" "$(cut -d' ' -f1 /proc/loadavg)" "$work/results/runs.tsv" <<'PY'
import json, sys
path, system, mode, rep, load_before, load_after, tsv = sys.argv[1:]
r = json.load(open(path))
ready = r.get("ready_at_stop") or {}
# A run counts only if the leader was stopped with every member ready.
valid = not r.get("event_error") and (system != "fencer" or (ready and all(v == "ready" for v in ready.values())))
with open(tsv, "a") as f:
    print(system, mode, rep, f'{r["at_event"]["ms"]:.1f}', f'{r["longest"]["ms"]:.1f}', f'{r["before"]["ms"]:.1f}',
          f'{r.get("drain_ms", 0):.0f}', load_before, load_after, "yes" if valid else "no",
          ",".join(f"{k}={v}" for k, v in sorted(ready.items())) or "-",
          (r.get("event_error") or r.get("event") or "-").replace("\t", " "), sep="\t", file=f)
print(f'{r["longest"]["ms"]:.0f}')
PY
)
	if [[ $KEEP_SLOW == 1 ]] && ((longest > SLOW_MS)); then
		local dir=$work/slow/$sys-$mode-r$rep f
		log "   slow run (longest gap $longest ms): keeping its evidence in $dir"
		mkdir -p "$dir"
		if [[ -d $work/slow/pending ]]; then mv "$work"/slow/pending/* "$dir"/ 2>/dev/null || true; fi
		if [[ $sys == fencer ]]; then dump_members "$dir" after-run; fi
		for f in "$work/$sys"-*.log; do
			tail -c +$((${log_mark[$f]:-0} + 1)) "$f" >"$dir/$(basename "$f")"
		done
		cp "$json" "$dir"/
		if [[ -e $work/results/$sys-$mode-r$rep.log ]]; then cp "$work/results/$sys-$mode-r$rep.log" "$dir/failoverbench.log"; fi
		KEEP=1
	fi
	rm -rf "$work/slow/pending"
}

log_marks
turn=0
for rep in $(seq 1 "$REPS"); do
	for mode in $MODES; do
		signal=TERM
		[[ $mode == crash ]] && signal=KILL
		[[ $mode == frozen ]] && signal=STOP
		order=$SYSTEMS
		if ((turn % 2 == 1)); then order=$(echo "$SYSTEMS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
		turn=$((turn + 1))
		for sys in $order; do
			load_before=$(cut -d' ' -f1 /proc/loadavg)
			log "rep $rep/$REPS, $mode: $sys ($(cut -d' ' -f1-3 /proc/loadavg) load)"
			"run_$sys" "$mode" "$rep" "$signal"
			record "$sys" "$mode" "$rep" "$load_before"
			python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("   at the stop %.0f ms, whole run %.0f ms, worst client %.0f ms, errors %d; %s" % (r["at_event"]["ms"], r["longest"]["ms"], r["worst_client_ms"], r["errors"], r.get("event_error") or r.get("event")))' \
				"$work/results/$sys-$mode-r$rep.json" >&2
			log_marks
			restart_stopped "$sys"
		done
	done
done

# --- stability under load ------------------------------------------------
terms() {
	for i in 1 2 3; do
		curl -fsS "http://$(fhttp $i)/v1/cluster" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["node"], s["term"], s["leader"])'
	done
}
timeouts() { cat "$work"/fencer-n*.log | grep -c "heartbeat timeout reached" || true; }
if [[ $STABILITY != 0 && $SYSTEMS == *fencer* ]]; then
	log "stability: 64 clients for $STABILITY, nothing stopped ($(cut -d' ' -f1-3 /proc/loadavg) load)"
	terms >"$work/results/stability-before.txt"
	t0=$(timeouts)
	"$work/fencer" bench --endpoints "$(fhttp 1),$(fhttp 2),$(fhttp 3)" -w uncontended -c 64 -d "$STABILITY" --warmup 0 -o json \
		>"$work/results/stability-bench.txt"
	terms >"$work/results/stability-after.txt"
	echo "$(($(timeouts) - t0)) $(cut -d' ' -f1-3 /proc/loadavg)" >"$work/results/stability-timeouts.txt"
fi

python3 - "$work/results" "$FENCER_FLAGS" "$SLOW_MS" <<'PY'
import glob, json, os, statistics, sys, time

results, flags, slow_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
runs = []
for path in sorted(glob.glob(os.path.join(results, "*-r*.json"))):
    with open(path) as f:
        runs.append(json.load(f))

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")

def pick(system, mode):
    return [r for r in runs if r["system"] == system and r["mode"] == mode]

load = open("/proc/loadavg").read().split()[:3]
print()
print(f"failover, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, load {' '.join(load)} at the end"
      + (f", fencer serve {flags}" if flags else ", defaults"))
print("3 members each on loopback; 16 clients cycle their own locks through every member; the leader stopped 4 s in.")
print("at the stop: the longest interval with no successful cycle that ends after the stop and begins within 1 s of it")
print("(median, then every run); whole run: the longest anywhere; before: the longest before the stop (the machine's")
print("noise floor); worst client: the longest one client went without a cycle; new leader: when a survivor first named it.")
print()
hdr = f"{'stopped by':19} {'system':7} {'at the stop':>11}  {'runs':30} {'whole run':>9} {'before':>7} {'worst client':>12} {'new leader':>10}"
print(hdr)
print("-" * len(hdr))
medians = {}
for mode, label in (("graceful", "SIGTERM (graceful)"), ("crash", "SIGKILL (crash)"), ("frozen", "SIGSTOP (frozen)")):
    for system in ("fencer", "etcd"):
        rs = pick(system, mode)
        if not rs:
            continue
        gaps = [r["at_event"]["ms"] for r in rs]
        medians[(system, mode)] = med(gaps)
        runs_s = ", ".join(f"{g:.0f}" for g in gaps)
        print(f"{label:19} {system:7} {med(gaps):>11.0f}  {runs_s:30} {med([r['longest']['ms'] for r in rs]):>9.0f}"
              f" {med([r['before']['ms'] for r in rs]):>7.0f} {med([r['worst_client_ms'] for r in rs]):>12.0f}"
              f" {med([r.get('timeline', {}).get('new_leader_known') for r in rs]):>10.0f}")
        for r in rs:
            if r.get("event_error"):
                print(f"    ! {system} {mode}: {r['event_error']}")
groups = {}
for r in pick("fencer", "graceful") + pick("fencer", "crash"):
    for g in r.get("groups", []):
        groups.setdefault((r["mode"], g["name"]), []).append(g["worst_client_ms"])
if groups:
    print()
    print("fencer's worst client by kind, median (ms): " +
          ", ".join(f"{m} {n} {med(v):.0f}" for (m, n), v in sorted(groups.items())))
stable = None
if os.path.exists(os.path.join(results, "stability-after.txt")):
    def terms(name):
        with open(os.path.join(results, name)) as f:
            return {l.split()[0]: (int(l.split()[1]), l.split()[2] if len(l.split()) > 2 else "") for l in f if l.strip()}
    before, after = terms("stability-before.txt"), terms("stability-after.txt")
    with open(os.path.join(results, "stability-bench.txt")) as f:
        bench = json.load(f)[0]
    with open(os.path.join(results, "stability-timeouts.txt")) as f:
        hb, *la = f.read().split()
    moved = sum(after[n][0] - before[n][0] for n in before) // max(len(before), 1)
    stable = moved == 0
    print()
    print(f"under load: 64 clients, {bench['seconds']:.0f} s, {bench['ops_per_sec']:.0f} cycles/s, {bench['errors']} errors, "
          f"load {' '.join(la)} at the end; term {min(b[0] for b in before.values())} → {max(a[0] for a in after.values())}, "
          f"leader {sorted({b[1] for b in before.values()})} → {sorted({a[1] for a in after.values()})}; "
          f"followers' heartbeat timeouts logged: {hb}")
def dist(xs):
    xs = sorted(xs)
    if not xs:
        return "-"
    # p99 by the nearest rank: of 50 runs, the 50th.
    p99 = xs[min(len(xs) - 1, max(0, -(-99 * len(xs) // 100) - 1))]
    return f"{statistics.median(xs):.0f} / {p99:.0f} / {xs[-1]:.0f}"
tsv = os.path.join(results, "runs.tsv")
if os.path.exists(tsv):
    with open(tsv) as f:
        cols = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(cols, l.rstrip("\n").split("\t"))) for l in f]
    print()
    print("every run (results/runs.tsv): median / p99 / max in ms over the valid runs (leader stopped with every member ready)")
    hdr = f"{'system':7} {'mode':9} {'valid':>5} {'at the stop':>17} {'whole run':>17} {'past the end':>17} {'load 1m before: min / median / max':>36}"
    print(hdr)
    print("-" * len(hdr))
    for (system, mode) in sorted({(r["system"], r["mode"]) for r in rows}):
        rs = [r for r in rows if (r["system"], r["mode"]) == (system, mode)]
        ok = [r for r in rs if r["valid"] == "yes"]
        loads = sorted(float(r["load_before"]) for r in rs)
        print(f"{system:7} {mode:9} {len(ok):>2}/{len(rs):<2} {dist([float(r['at_event_ms']) for r in ok]):>17}"
              f" {dist([float(r['longest_ms']) for r in ok]):>17} {dist([float(r['drain_ms']) for r in ok]):>17}"
              f" {loads[0]:>16.2f} / {statistics.median(loads):.2f} / {loads[-1]:.2f}")
        for r in rs:
            if r["valid"] != "yes":
                print(f"    ! invalid: {system} {mode} r{r['rep']}: {r['event']} (ready: {r['ready_at_stop']})")
            elif float(r["longest_ms"]) > slow_ms:
                print(f"    ! slow: {system} {mode} r{r['rep']}: longest {float(r['longest_ms']):.0f} ms, load {r['load_before']} → {r['load_after']}")
print()
def target(name, ok):
    print(f"  [{'PASS' if ok else 'MISS'}] {name}")
print("targets (issue 15):")
fg = pick("fencer", "graceful")
if fg:
    worst = max(r["at_event"]["ms"] for r in fg)
    whole = max(r["longest"]["ms"] for r in fg)
    target(f"graceful: every run ≤ 100 ms without a cycle at the stop (worst {worst:.0f} ms; whole runs {whole:.0f} ms)", worst <= 100)
if ("fencer", "crash") in medians and ("etcd", "crash") in medians:
    f, e = medians[("fencer", "crash")], medians[("etcd", "crash")]
    target(f"crash: median ≤ etcd's ({f:.0f} vs {e:.0f} ms)", f <= e)
if stable is not None:
    target("no leader change under 64-client load", stable)
PY
