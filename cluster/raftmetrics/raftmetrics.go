// Package raftmetrics exposes a hashicorp/raft node to Prometheus: its state,
// term, indexes, contact with the leader and membership, read at scrape time
// so that the hot path pays nothing for them; the leadership changes it saw;
// how long each snapshot took to persist; and its log store's writes: their
// latency, their failures and the leaderships given up over a stalled one.
package raftmetrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are one Raft node's metrics.
type Metrics struct {
	// LeaderChanges counts the leadership changes the node saw.
	LeaderChanges prometheus.Counter
	// LogWrites times each write of the log store (a batch of entries and
	// its fsyncs).
	LogWrites prometheus.Histogram
	// LogWriteErrors counts the log store's failed writes.
	LogWriteErrors prometheus.Counter
	// StallStepDowns counts the leaderships this node gave up because its
	// log store had not completed a write within the stall timeout.
	StallStepDowns prometheus.Counter
	snapshot       prometheus.Histogram
	raft           atomic.Pointer[raft.Raft] // nil until Watch
	id             raft.ServerID             // this node's id, set by Watch
}

// New registers a node's Raft metrics on reg. The gauges report nothing
// until Watch gives them the Raft instance.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencer", Name: "leader_changes_total", Help: "Leadership changes seen by this node (gained or lost).",
		}),
		LogWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fencer", Name: "log_store_write_seconds", Help: "Time of each write to the Raft log store (one batch of entries, fsynced).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		LogWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencer", Name: "log_store_write_errors_total", Help: "Writes to the Raft log store that failed (the node stops after the first).",
		}),
		StallStepDowns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencer", Name: "stall_stepdowns_total", Help: "Leaderships given up because the log store had not completed a write within the stall timeout.",
		}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fencer", Name: "snapshot_persist_seconds", Help: "Time to write an FSM snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	reg.MustRegister(m.LeaderChanges, m.LogWrites, m.LogWriteErrors, m.StallStepDowns, m.snapshot, (*collector)(m))
	return m
}

// Watch makes the gauges read r, the Raft instance of the member id.
func (m *Metrics) Watch(r *raft.Raft, id raft.ServerID) {
	m.id = id
	m.raft.Store(r)
}

// TimeSnapshots wraps f so that every snapshot's Persist is timed, without
// touching f.
func (m *Metrics) TimeSnapshots(f raft.FSM) raft.FSM { return timedFSM{FSM: f, m: m} }

// collector reads the node's Raft state at scrape time.
type collector Metrics

var (
	descState       = prometheus.NewDesc("fencer_raft_state", "1 for this node's current Raft state.", []string{"state"}, nil)
	descTerm        = prometheus.NewDesc("fencer_raft_term", "Current Raft term.", nil, nil)
	descCommit      = prometheus.NewDesc("fencer_raft_commit_index", "Raft commit index.", nil, nil)
	descApplied     = prometheus.NewDesc("fencer_raft_applied_index", "Index of the last entry applied to the FSM.", nil, nil)
	descLastIndex   = prometheus.NewDesc("fencer_raft_last_index", "Last index in this node's log.", nil, nil)
	descLastContact = prometheus.NewDesc("fencer_raft_last_contact_seconds", "Time since this node last heard from the leader (0 on the leader). Scrape every member for the per-follower view.", nil, nil)
	descSnapIndex   = prometheus.NewDesc("fencer_raft_last_snapshot_index", "Index of the latest snapshot.", nil, nil)
	descMembers     = prometheus.NewDesc("fencer_cluster_members", "Members in the Raft configuration.", []string{"suffrage"}, nil)
	descVoter       = prometheus.NewDesc("fencer_raft_voter", "1 when this node is a voter in the Raft configuration it knows, 0 when not (a non-voter, or not yet or no longer a member).", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descTerm, descCommit, descApplied, descLastIndex, descLastContact,
		descSnapIndex, descMembers, descVoter} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	r := c.raft.Load()
	if r == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := r.State()
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		v := 0.0
		if s == state {
			v = 1
		}
		gauge(descState, v, s.String())
	}
	stats := r.Stats()
	gauge(descTerm, float64(parseUint(stats["term"])))
	gauge(descCommit, float64(r.CommitIndex()))
	gauge(descApplied, float64(r.AppliedIndex()))
	gauge(descLastIndex, float64(r.LastIndex()))
	gauge(descSnapIndex, float64(parseUint(stats["last_snapshot_index"])))
	contact := 0.0
	if state != raft.Leader {
		contact = lastContact(stats["last_contact"])
	}
	gauge(descLastContact, contact)
	if cf := r.GetConfiguration(); cf.Error() == nil {
		voters, nonvoters, self := 0, 0, 0.0
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
				if s.ID == c.id {
					self = 1
				}
			} else {
				nonvoters++
			}
		}
		gauge(descMembers, float64(voters), "voter")
		gauge(descMembers, float64(nonvoters), "nonvoter")
		gauge(descVoter, self)
	}
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
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

// timedFSM times snapshot persistence.
type timedFSM struct {
	raft.FSM
	m *Metrics
}

func (f timedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return timedSnapshot{FSMSnapshot: s, m: f.m}, nil
}

type timedSnapshot struct {
	raft.FSMSnapshot
	m *Metrics
}

func (s timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	err := s.FSMSnapshot.Persist(sink)
	s.m.snapshot.Observe(time.Since(start).Seconds())
	return err
}
