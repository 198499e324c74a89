package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are one node's Prometheus metrics. Each node has its own registry
// so that several nodes in one process (tests, fencer dev) do not collide.
// Counters are bumped where the events happen; gauges are read at scrape
// time, so the hot path pays nothing for them.
type metrics struct {
	reg           *prometheus.Registry
	grants        prometheus.Counter
	renewals      prometheus.Counter
	releases      prometheus.Counter
	expirations   prometheus.Counter
	leaderChanges prometheus.Counter
	snapshot      prometheus.Histogram
}

func newMetrics(n *Node) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fencer", Name: name, Help: help})
	}
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		grants:        counter("grants_total", "Lock grants committed by this node as leader (acquires and handoffs)."),
		renewals:      counter("renewals_total", "Lease renewals accepted by this node as leader."),
		releases:      counter("releases_total", "Releases committed by this node as leader."),
		expirations:   counter("expirations_total", "Leases expired by this node as leader."),
		leaderChanges: counter("leader_changes_total", "Leadership changes seen by this node (gained or lost)."),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fencer", Name: "snapshot_persist_seconds", Help: "Time to write an FSM snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	m.reg.MustRegister(m.grants, m.renewals, m.releases, m.expirations, m.leaderChanges, m.snapshot,
		&nodeCollector{n: n},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns the node's metrics registry; the HTTP layer registers its
// own metrics there and serves it on /metrics.
func (n *Node) Registry() *prometheus.Registry { return n.metrics.reg }

// nodeCollector reads the node's state at scrape time.
type nodeCollector struct{ n *Node }

var (
	descState       = prometheus.NewDesc("fencer_raft_state", "1 for this node's current Raft state.", []string{"state"}, nil)
	descTerm        = prometheus.NewDesc("fencer_raft_term", "Current Raft term.", nil, nil)
	descCommit      = prometheus.NewDesc("fencer_raft_commit_index", "Raft commit index.", nil, nil)
	descApplied     = prometheus.NewDesc("fencer_raft_applied_index", "Index of the last entry applied to the FSM.", nil, nil)
	descLastIndex   = prometheus.NewDesc("fencer_raft_last_index", "Last index in this node's log.", nil, nil)
	descLastContact = prometheus.NewDesc("fencer_raft_last_contact_seconds", "Time since this node last heard from the leader (0 on the leader). Scrape every member for the per-follower view.", nil, nil)
	descSnapIndex   = prometheus.NewDesc("fencer_raft_last_snapshot_index", "Index of the latest snapshot.", nil, nil)
	descMembers     = prometheus.NewDesc("fencer_cluster_members", "Members in the Raft configuration.", []string{"suffrage"}, nil)
	descLocks       = prometheus.NewDesc("fencer_locks_held", "Locks currently held.", nil, nil)
	descWaiters     = prometheus.NewDesc("fencer_waiters", "Callers queued for locks on this node (leader only).", nil, nil)
	descLeases      = prometheus.NewDesc("fencer_leases_tracked", "Lease deadlines tracked (leader only).", nil, nil)
	descToken       = prometheus.NewDesc("fencer_highest_token", "Highest fencing token ever granted.", nil, nil)
	descEpoch       = prometheus.NewDesc("fencer_token_epoch", "Current token epoch (bumped by restores and recoveries).", nil, nil)
	descKeys        = prometheus.NewDesc("fencer_fenced_keys", "Keys in the fenced key-value store.", nil, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descTerm, descCommit, descApplied, descLastIndex, descLastContact,
		descSnapIndex, descMembers, descLocks, descWaiters, descLeases, descToken, descEpoch, descKeys} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := n.raft.State()
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		v := 0.0
		if s == state {
			v = 1
		}
		gauge(descState, v, s.String())
	}
	stats := n.raft.Stats()
	gauge(descTerm, float64(parseUint(stats["term"])))
	gauge(descCommit, float64(n.raft.CommitIndex()))
	gauge(descApplied, float64(n.raft.AppliedIndex()))
	gauge(descLastIndex, float64(n.raft.LastIndex()))
	gauge(descSnapIndex, float64(parseUint(stats["last_snapshot_index"])))
	contact := 0.0
	if state != raft.Leader {
		contact = lastContact(stats["last_contact"])
	}
	gauge(descLastContact, contact)
	if cf := n.raft.GetConfiguration(); cf.Error() == nil {
		voters, nonvoters := 0, 0
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			} else {
				nonvoters++
			}
		}
		gauge(descMembers, float64(voters), "voter")
		gauge(descMembers, float64(nonvoters), "nonvoter")
	}
	counts := n.fsm.Counts() // not Image: a scrape must not copy the state
	gauge(descLocks, float64(counts.Locks))
	gauge(descKeys, float64(counts.Keys))
	gauge(descToken, float64(counts.LastToken))
	gauge(descEpoch, float64(counts.Epoch))
	gauge(descWaiters, float64(n.locks.waiting()))
	gauge(descLeases, float64(n.leases.Len()))
}

// lastContact parses raft's "last_contact" stat: "never", "0", or a duration.
func lastContact(s string) float64 {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds()
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v
	}
	return -1 // never
}

// instrumentedFSM times snapshot persistence without touching the pure FSM.
type instrumentedFSM struct {
	raft.FSM
	m *metrics
}

func (f instrumentedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return timedSnapshot{FSMSnapshot: s, m: f.m}, nil
}

type timedSnapshot struct {
	raft.FSMSnapshot
	m *metrics
}

func (s timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	err := s.FSMSnapshot.Persist(sink)
	s.m.snapshot.Observe(time.Since(start).Seconds())
	return err
}
