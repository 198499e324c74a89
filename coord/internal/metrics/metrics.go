// Package metrics is the coordination layer's Prometheus metrics: counters
// bumped where grants, renewals, releases and expirations happen, and
// gauges of its state read at scrape time, so that the hot path pays
// nothing for them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Counters count what the leader did.
type Counters struct {
	Grants      prometheus.Counter
	Renewals    prometheus.Counter
	Releases    prometheus.Counter
	Expirations prometheus.Counter
}

// Gauges are the state at a scrape.
type Gauges struct {
	Locks, Keys, KVBytes, LastToken, Epoch float64
	// Sessions are the open sessions.
	Sessions float64
	// Waiters and Leases are the leader's (0 on a follower).
	Waiters, Leases float64
}

// New returns the counters, registered with reg (when not nil) together
// with gauges read from read at each scrape.
func New(reg prometheus.Registerer, read func() Gauges) *Counters {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fencer", Name: name, Help: help})
	}
	m := &Counters{
		Grants:      counter("grants_total", "Lock grants committed by this node as leader (acquires and handoffs)."),
		Renewals:    counter("renewals_total", "Lease renewals accepted by this node as leader."),
		Releases:    counter("releases_total", "Releases committed by this node as leader."),
		Expirations: counter("expirations_total", "Leases expired by this node as leader."),
	}
	if reg != nil {
		reg.MustRegister(m.Grants, m.Renewals, m.Releases, m.Expirations, collector(read))
	}
	return m
}

// collector reads the gauges at scrape time.
type collector func() Gauges

var (
	descLocks    = prometheus.NewDesc("fencer_locks_held", "Locks currently held.", nil, nil)
	descWaiters  = prometheus.NewDesc("fencer_waiters", "Callers queued for locks on this node (leader only).", nil, nil)
	descLeases   = prometheus.NewDesc("fencer_leases_tracked", "Lease deadlines tracked (leader only).", nil, nil)
	descToken    = prometheus.NewDesc("fencer_highest_token", "Highest fencing token ever granted.", nil, nil)
	descKeys     = prometheus.NewDesc("fencer_fenced_keys", "Keys in the fenced key-value store.", nil, nil)
	descKVBytes  = prometheus.NewDesc("fencer_fenced_value_bytes", "Value bytes in the fenced key-value store (what --max-kv-bytes limits).", nil, nil)
	descEpoch    = prometheus.NewDesc("fencer_token_epoch", "Current token epoch (bumped by restores and recoveries).", nil, nil)
	descSessions = prometheus.NewDesc("fencer_sessions_open", "Sessions currently open.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLocks, descWaiters, descLeases, descToken, descKeys, descKVBytes, descEpoch, descSessions} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	g := c()
	gauge(descLocks, g.Locks)
	gauge(descKeys, g.Keys)
	gauge(descKVBytes, g.KVBytes)
	gauge(descToken, g.LastToken)
	gauge(descEpoch, g.Epoch)
	gauge(descWaiters, g.Waiters)
	gauge(descLeases, g.Leases)
	gauge(descSessions, g.Sessions)
}
