package test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// fakeDNS knows names under .fencer.test once they are published, as a
// cluster DNS knows a pod once it is scheduled; "localhost" goes to the
// system resolver (the hosts file, so no query leaves the machine).
type fakeDNS struct {
	mu    sync.Mutex
	names map[string]bool
	asked map[string]int // lookups of each name, answered or not
}

func (d *fakeDNS) publish(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names[name] = true
}

func (d *fakeDNS) lookups(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[name]
}

func (d *fakeDNS) LookupHost(ctx context.Context, host string) ([]string, error) {
	if host == "localhost" {
		return net.DefaultResolver.LookupHost(ctx, host)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked[host]++
	if d.names[host] {
		return []string{"127.0.0.1"}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func port(t *testing.T) string {
	t.Helper()
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostNames runs a cluster whose Raft addresses are host names, not IPs:
// one is localhost, the others resolve only through the cluster's DNS, and
// n3's name does not resolve until n3 is started (a pod not yet scheduled).
// n1 and n2 start with n3 in their --initial-cluster, elect a leader and
// serve; then n3's name is published and n3 starts and catches up; then n4
// joins through --join by name. The configuration keeps the names, so a
// member that comes back on another IP is still reached.
func TestHostNames(t *testing.T) {
	dns := &fakeDNS{names: map[string]bool{"n2.fencer.test": true}, asked: map[string]int{}}
	raftAddr := map[string]string{
		"n1": "localhost:" + port(t),
		"n2": "n2.fencer.test:" + port(t),
		"n3": "n3.fencer.test:" + port(t),
		"n4": "n4.fencer.test:" + port(t),
	}
	httpAddr := map[string]string{}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		httpAddr[id] = "localhost:" + port(t)
	}
	var initial []cluster.Peer
	for _, id := range []string{"n1", "n2", "n3"} {
		initial = append(initial, cluster.Peer{ID: id, RaftAddr: raftAddr[id], HTTPAddr: httpAddr[id]})
	}
	dir := t.TempDir()
	config := func(id string) cluster.Config {
		cfg := cluster.Config{
			ID: id, DataDir: filepath.Join(dir, id), RaftAddr: raftAddr[id], HTTPAddr: httpAddr[id],
			InitialCluster: initial, LookupHost: dns.LookupHost, Logger: tc.Logger(t),
			HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
		}
		return cfg
	}
	var mu sync.Mutex
	nodes := map[string]*server.Instance{}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, in := range nodes {
			in.Close()
		}
	})
	start := func(cfg cluster.Config) <-chan error {
		done := make(chan error, 1)
		go func() {
			in, err := server.Start(cfg, cfg.HTTPAddr)
			if err == nil {
				mu.Lock()
				nodes[cfg.ID] = in
				mu.Unlock()
			}
			done <- err
		}()
		return done
	}
	wait := func(id string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("start %s: %v", id, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not start", id)
		}
	}
	url := func(id string) string { return "http://" + httpAddr[id] }

	// n1 and n2 form a quorum of three while n3's name resolves nowhere.
	d1, d2 := start(config("n1")), start(config("n2"))
	wait("n1", d1)
	wait("n2", d2)
	var leader string
	tc.Poll(t, 30*time.Second, "a leader among n1 and n2", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, in := range nodes {
			if in.Node.IsLeader() {
				leader = id
				return true
			}
		}
		return false
	})
	code, body, _ := tc.Do(t, "POST", url(leader)+"/v1/locks/by-name/acquire", `{"holder":"h","ttl_ms":60000}`)
	if code != http.StatusOK {
		t.Fatalf("acquire with n3 unresolvable: %d %s", code, body)
	}
	tc.Poll(t, 10*time.Second, "the leader trying to reach n3 by its name", func() bool {
		return dns.lookups("n3.fencer.test") > 0
	})

	// n3 is scheduled: its name resolves, it starts and catches up.
	dns.publish("n3.fencer.test")
	wait("n3", start(config("n3")))
	tc.Poll(t, 30*time.Second, "n3 has the lock granted before it started", func() bool {
		code, body, _ := tc.Do(t, "GET", url("n3")+"/v1/locks/by-name?stale=true", "")
		return code == http.StatusOK && strings.Contains(body, `"holder":"h"`)
	})

	// n4 joins by name through n1's HTTP address.
	dns.publish("n4.fencer.test")
	cfg4 := config("n4")
	cfg4.InitialCluster, cfg4.Join = nil, []string{httpAddr["n1"]}
	wait("n4", start(cfg4))

	// The configuration holds the names, as given.
	var status wire.ClusterStatus
	tc.Poll(t, 30*time.Second, "four members, with their HTTP addresses recorded", func() bool {
		code, body, _ := tc.Do(t, "GET", url("n4")+"/v1/cluster", "")
		if code != http.StatusOK {
			return false
		}
		mustJSON(t, body, &status)
		for _, m := range status.Members {
			if m.HTTPAddr == "" {
				return false
			}
		}
		return len(status.Members) == 4
	})
	for _, m := range status.Members {
		if m.RaftAddr != raftAddr[m.ID] || m.HTTPAddr != httpAddr[m.ID] {
			t.Errorf("member %s: raft %s http %s, want %s and %s", m.ID, m.RaftAddr, m.HTTPAddr, raftAddr[m.ID], httpAddr[m.ID])
		}
	}
	// And n4 takes part in commits: a grant through it reaches n3.
	tc.Poll(t, 10*time.Second, "an acquire through n4 (once it knows the leader)", func() bool {
		code, body, _ = tc.Do(t, "POST", url("n4")+"/v1/locks/via-n4/acquire", `{"holder":"h4","ttl_ms":60000,"request_id":"via-n4-hostnames-test"}`)
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Fatalf("acquire through n4: %d %s", code, body)
		}
		return code == http.StatusOK
	})
	tc.Poll(t, 10*time.Second, "n3 sees the grant made through n4", func() bool {
		code, body, _ := tc.Do(t, "GET", url("n3")+"/v1/locks/via-n4?stale=true", "")
		return code == http.StatusOK && strings.Contains(body, `"holder":"h4"`)
	})
	t.Logf("lookups of n3's name, before and after it resolved: %d", dns.lookups("n3.fencer.test"))
}
