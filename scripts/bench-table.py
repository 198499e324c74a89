#!/usr/bin/env python3
"""bench-table.py: the table of scripts/bench-vs-etcd.sh.

    bench-table.py RESULTS_DIR STORES ETCD_MAX OPEN_POOL

RESULTS_DIR holds SYSTEM-cCLIENTS-rREP.json (closed loop), SYSTEM-oPCT-rREP.json
(open loop at PCT % of ETCD_MAX) and raft.txt (BenchmarkRaftApply); SYSTEM is
etcd or fencer-STORE. Every cell is the median of its runs; a fencer column
per store in STORES.
"""
import glob, json, os, re, statistics, sys, time

results, stores, etcd_max, pool = sys.argv[1], sys.argv[2].split(), float(sys.argv[3]), sys.argv[4]
systems = [f"fencer-{s}" for s in stores] + ["etcd"]

closed, opened = [], []
for path in sorted(glob.glob(os.path.join(results, "*.json"))):
    m = re.match(r"(.+)-([co])(\d+)-r(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    with open(path) as f:
        for r in json.load(f):
            r["system"] = m.group(1)
            if m.group(2) == "o":
                r["pct"] = int(m.group(3))
                opened.append(r)
            else:
                closed.append(r)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def pick(runs, system, workload, field, **where):
    return [r[field] for r in runs if r["system"] == system and r["workload"] == workload
            and all(r[k] == v for k, v in where.items())]


def fmt(x, spec):
    return "-" if x != x else format(x, spec)


raft = {}  # (store, writers) -> median commits/s
samples = {}
if os.path.exists(os.path.join(results, "raft.txt")):
    with open(os.path.join(results, "raft.txt")) as f:
        for line in f:
            m = re.search(r"RaftApply(?:/store=(\w+))?/writers=(\d+)\S*\s+\d+\s+\S+ ns/op\s+([\d.]+) commits/s", line)
            if m:
                samples.setdefault((m.group(1) or "bolt", int(m.group(2))), []).append(float(m.group(3)))
raft = {k: med(v) for k, v in samples.items()}

# row: (label, fencer workload, etcd workload)
rows = [
    ("uncontended (etcd: session reused)", "uncontended", "uncontended"),
    ("uncontended (etcd: lease per lock)", "uncontended", "uncontended-lease"),
    ("contended, handoffs/s", "contended", "contended"),
    ("renew", "renew", "renew"),
    ("fenced-write", "fenced-write", "fenced-write"),
]
clients = sorted({r["clients"] for r in closed})
reps = max([len(pick(closed, "etcd", "uncontended", "ops_per_sec", clients=c)) for c in clients] or [0])
load = open("/proc/loadavg").read().split()[:3]
print()
print(f"fencer ({', '.join(stores)}) vs etcd, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, "
      f"load {' '.join(load)} at the end")
print(f"closed loop: medians of {reps} run(s) per cell; 3 members each on loopback, fsync on; ops/s is lock cycles/s "
      "(acquire+release), handoffs/s, renewals/s or acquire+write+release cycles/s; ratio = fencer/etcd")
print()
short = [s.replace("fencer-", "") for s in systems]
hdr = (f"{'workload':36} {'clients':>7} " + " ".join(f"{s + '/s':>9}" for s in short) + "  "
       + " ".join(f"{s + ' x':>7}" for s in stores) + "  " + f"{'p50 ms ' + '/'.join(short):>22}  "
       + f"{'p99 ms ' + '/'.join(short):>24}  errors")
print(hdr)
print("-" * len(hdr))
ratio = {}  # (store, etcd workload, clients) -> (ratio, ops/s)
for label, fw, ew in rows:
    for c in clients:
        work = {s: (ew if s == "etcd" else fw) for s in systems}
        ops = {s: med(pick(closed, s, work[s], "ops_per_sec", clients=c)) for s in systems}
        if all(v != v for v in ops.values()):
            continue
        p50 = [med(pick(closed, s, work[s], "p50_ms", clients=c)) for s in systems]
        p99 = [med(pick(closed, s, work[s], "p99_ms", clients=c)) for s in systems]
        errs = [sum(pick(closed, s, work[s], "errors", clients=c)) for s in systems]
        rs = []
        for st in stores:
            r = ops[f"fencer-{st}"] / ops["etcd"] if ops["etcd"] else float("nan")
            ratio[(st, ew, c)] = (r, ops[f"fencer-{st}"])
            rs.append(r)
        print(f"{label:36} {c:>7} " + " ".join(f"{fmt(ops[s], '.0f'):>9}" for s in systems) + "  "
              + " ".join(f"{fmt(r, '.2f') + 'x':>7}" for r in rs) + "  "
              + f"{'/'.join(fmt(x, '.2f') for x in p50):>22}  {'/'.join(fmt(x, '.1f') for x in p99):>24}  "
              + "/".join(str(e) for e in errs))

open_p99 = {}  # (system, pct) -> p99
if opened:
    print()
    print(f"open loop: the uncontended workload offered at fixed rates (a share of etcd's closed-loop maximum at "
          f"{max(clients) if clients else '?'} clients, {etcd_max:.0f}/s), {pool} clients serving the schedule; latency from each")
    print("operation's scheduled start (no coordinated omission); medians of the runs; ms")
    print()
    hdr = f"{'offered':>14} {'system':>12} {'done/s':>8} {'p50':>8} {'p99':>8} {'p99.9':>8} {'max':>8} {'errors':>6}  p99 vs etcd"
    print(hdr)
    print("-" * len(hdr))
    for pct in sorted({r["pct"] for r in opened}):
        for s in systems:
            rs = [r for r in opened if r["system"] == s and r["pct"] == pct]
            if not rs:
                continue
            p99 = med([r["p99_ms"] for r in rs])
            open_p99[(s, pct)] = p99
            vs = ""
            if s != "etcd":
                e = med([r["p99_ms"] for r in opened if r["system"] == "etcd" and r["pct"] == pct])
                vs = f"{p99 / e:.2f}x" if e == e and e else ""
            print(f"{str(pct) + '% ' + format(med([r['rate'] for r in rs]), '.0f') + '/s':>14} {s.replace('fencer-', 'fencer '):>12} "
                  f"{med([r['ops_per_sec'] for r in rs]):>8.0f} {med([r['p50_ms'] for r in rs]):>8.2f} {p99:>8.2f} "
                  f"{med([r['p999_ms'] for r in rs]):>8.2f} {med([r['max_ms'] for r in rs]):>8.1f} "
                  f"{sum(r['errors'] for r in rs):>6}  {vs}")

share = {}  # (store, clients) -> fencer cycles / (raw commits / 2)
if raft:
    print()
    for st in stores:
        ws = sorted(w for (s, w) in raft if s == st)
        if not ws:
            continue
        print(f"raw hashicorp/raft, {st} (3 nodes, fsync, fencer's settings), median commits/s: "
              + ", ".join(f"{w} writer{'s' if w > 1 else ''} {raft[(st, w)]:.0f}" for w in ws))
        for c in clients:
            if (st, c) in raft and (st, "uncontended", c) in ratio:
                fm = ratio[(st, "uncontended", c)][1]
                share[(st, c)] = 2 * fm / raft[(st, c)]
                print(f"  fencer uncontended at {c} clients: {fm:.0f} cycles/s = {100 * share[(st, c)]:.0f}% of raw "
                      f"Raft's commits/s ÷ 2 at {c} writers")

print()
def target(name, ok):
    print(f"  [{'PASS' if ok else 'MISS'}] {name}")
print("targets (issue 31; ratios fencer/etcd):")
goals = {  # store -> (1, 16, 64, 64 lease, contended 16)
    "bolt": (1.0, 1.5, 2, 5, 5),
    "wal": (1.5, 2, 3, 6, 7),
}
for st in stores:
    g = goals.get(st, goals["bolt"])
    for (ew, c, goal, what) in (("uncontended", 1, g[0], "1 client"), ("uncontended", 16, g[1], "16 clients"),
                                ("uncontended", 64, g[2], "64 clients"),
                                ("uncontended-lease", 64, g[3], "64 clients, etcd lease per lock"),
                                ("contended", 16, g[4], "contended handoffs, 16 clients")):
        if (st, ew, c) in ratio:
            r = ratio[(st, ew, c)][0]
            target(f"{st}: {what} ≥ {goal}×: {r:.2f}×", r >= goal)
    if (f"fencer-{st}", 50) in open_p99 and ("etcd", 50) in open_p99:
        f, e = open_p99[(f"fencer-{st}", 50)], open_p99[("etcd", 50)]
        target(f"{st}: open loop at 50% of etcd's max, p99 ≤ 0.5× etcd's: {f:.2f} / {e:.2f} ms = {f / e:.2f}×", f <= 0.5 * e)
    for c in (1, 64):
        if (st, c) in share:
            target(f"{st}: {c} client{'s' if c > 1 else ''}: cycles ≥ 85% of raw Raft commits ÷ 2: {100 * share[(st, c)]:.0f}%",
                   share[(st, c)] >= 0.85)
