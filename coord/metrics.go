package coord

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordination layer's Prometheus metrics. Counters are
// bumped where the events happen; gauges are read at scrape time, so the hot
// path pays nothing for them.
type metrics struct {
	grants      prometheus.Counter
	renewals    prometheus.Counter
	releases    prometheus.Counter
	expirations prometheus.Counter
}

func newMetrics(s *Service, reg prometheus.Registerer) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fencer", Name: name, Help: help})
	}
	m := &metrics{
		grants:      counter("grants_total", "Lock grants committed by this node as leader (acquires and handoffs)."),
		renewals:    counter("renewals_total", "Lease renewals accepted by this node as leader."),
		releases:    counter("releases_total", "Releases committed by this node as leader."),
		expirations: counter("expirations_total", "Leases expired by this node as leader."),
	}
	if reg != nil {
		reg.MustRegister(m.grants, m.renewals, m.releases, m.expirations, &collector{s: s})
	}
	return m
}

// collector reads the service's state at scrape time.
type collector struct{ s *Service }

var (
	descLocks   = prometheus.NewDesc("fencer_locks_held", "Locks currently held.", nil, nil)
	descWaiters = prometheus.NewDesc("fencer_waiters", "Callers queued for locks on this node (leader only).", nil, nil)
	descLeases  = prometheus.NewDesc("fencer_leases_tracked", "Lease deadlines tracked (leader only).", nil, nil)
	descToken   = prometheus.NewDesc("fencer_highest_token", "Highest fencing token ever granted.", nil, nil)
	descKeys    = prometheus.NewDesc("fencer_fenced_keys", "Keys in the fenced key-value store.", nil, nil)
	descKVBytes = prometheus.NewDesc("fencer_fenced_value_bytes", "Value bytes in the fenced key-value store (what --max-kv-bytes limits).", nil, nil)
	descEpoch   = prometheus.NewDesc("fencer_token_epoch", "Current token epoch (bumped by restores and recoveries).", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLocks, descWaiters, descLeases, descToken, descKeys, descKVBytes, descEpoch} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counts := c.s.fsm.Counts() // not Image: a scrape must not copy the state
	gauge(descLocks, float64(counts.Locks))
	gauge(descKeys, float64(counts.Keys))
	gauge(descKVBytes, float64(counts.KVBytes))
	gauge(descToken, float64(counts.LastToken))
	gauge(descEpoch, float64(counts.Epoch))
	gauge(descWaiters, float64(c.s.lockQueues.Queued()))
	gauge(descLeases, float64(c.s.leases.Len()))
}
