package test

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

func scrape(t *testing.T, n *tc.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("metric family %s missing", name)
	}
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("metric %s%v missing", name, labels)
	return 0
}

func TestMetricsExposeTheClusterAndMove(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	before := scrape(t, leader)
	for _, name := range []string{
		"fencer_raft_state", "fencer_raft_term", "fencer_raft_commit_index", "fencer_raft_applied_index",
		"fencer_raft_last_contact_seconds", "fencer_leader_changes_total", "fencer_grants_total",
		"fencer_renewals_total", "fencer_releases_total", "fencer_expirations_total", "fencer_waiters",
		"fencer_locks_held", "fencer_highest_token", "fencer_token_epoch", "fencer_cluster_members",
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("metric family %s missing", name)
		}
	}
	if value(t, before, "fencer_raft_state", "state", "Leader") != 1 {
		t.Fatal("leader does not report state Leader")
	}
	g := mustAcquire(t, leader, "m", "w")
	status, _, _ := tc.Do(t, http.MethodPost, leader.URL()+"/v1/locks/m/renew", `{"lease":"`+g.Lease+`","token":`+tok(g.Token)+`}`)
	if status != http.StatusOK {
		t.Fatalf("renew: %d", status)
	}
	held := scrape(t, leader)
	if value(t, held, "fencer_locks_held") != 1 || value(t, held, "fencer_highest_token") != float64(g.Token) {
		t.Fatal("locks held / highest token did not move")
	}
	if release(t, leader, g) != http.StatusOK {
		t.Fatal("release failed")
	}
	after := scrape(t, leader)
	for _, name := range []string{"fencer_grants_total", "fencer_renewals_total", "fencer_releases_total"} {
		if value(t, after, name) != value(t, before, name)+1 {
			t.Errorf("%s: %v → %v, want +1", name, value(t, before, name), value(t, after, name))
		}
	}
	if value(t, after, "fencer_http_request_duration_seconds", "route", "/v1/locks/{name}/acquire", "status", "200") < 1 {
		t.Fatal("acquire request duration not recorded by route")
	}
	if value(t, after, "fencer_locks_held") != 0 {
		t.Fatal("locks held did not drop after release")
	}
	// A follower reports its own view, including how recently it heard from
	// the leader.
	for _, n := range c.Running() {
		if n == leader {
			continue
		}
		f := scrape(t, n)
		if value(t, f, "fencer_raft_state", "state", "Follower") != 1 {
			t.Fatalf("%s is not a follower in its metrics", n.ID)
		}
		if lc := value(t, f, "fencer_raft_last_contact_seconds"); lc < 0 || lc > 30 {
			t.Fatalf("%s last contact %v", n.ID, lc)
		}
	}
}
