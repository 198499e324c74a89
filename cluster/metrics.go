package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are one node's Raft metrics. Each node has its own registry
// so that several nodes in one process (tests, fencer dev) do not collide.
// Counters are bumped where the events happen; gauges are read at scrape
// time, so the hot path pays nothing for them.
type metrics struct {
	reg           *prometheus.Registry
	leaderChanges prometheus.Counter
	snapshot      prometheus.Histogram
}

func newMetrics(n *Node) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fencer", Name: name, Help: help})
	}
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		leaderChanges: counter("leader_changes_total", "Leadership changes seen by this node (gained or lost)."),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fencer", Name: "snapshot_persist_seconds", Help: "Time to write an FSM snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	m.reg.MustRegister(m.leaderChanges, m.snapshot,
		&nodeCollector{n: n},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns the node's metrics registry; the coordination layer and
// the HTTP layer register their own metrics there, and the HTTP layer serves
// it on /metrics.
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
	descEpoch       = prometheus.NewDesc("fencer_token_epoch", "Current token epoch (bumped by restores and recoveries).", nil, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descTerm, descCommit, descApplied, descLastIndex, descLastContact,
		descSnapIndex, descMembers, descEpoch} {
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
	gauge(descEpoch, float64(n.fsm.Epoch()))
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
