package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// freeAddr returns a loopback address nothing listens on (a port bound and
// released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// refusingAddr returns a loopback address that refuses connections for the
// whole test: a socket bound to it that never listens, so that no other
// test or process can take the port meanwhile (a released port can be, and
// then a dial meant to fail connects somewhere).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func openAt(t *testing.T, addr string, wait time.Duration) *Transport {
	t.Helper()
	tr, err := Open(Config{Addr: addr, RaftLogger: hclog.NewNullLogger(), PeerWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// heartbeatAsync sends a heartbeat from tr to addr and reports its error.
func heartbeatAsync(tr *Transport, addr string) <-chan error {
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- tr.AppendEntries("peer", raft.ServerAddress(addr), &raft.AppendEntriesRequest{Term: 1}, &resp)
	}()
	return done
}

func waitErr(t *testing.T, done <-chan error, within time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("%s: still waiting after %v", what, within)
		return nil
	}
}

// A call to a peer that does not accept connections waits for it, and is
// delivered once it listens.
func TestCallWaitsForAPeerThatIsDown(t *testing.T) {
	addr := freeAddr(t)
	done := heartbeatAsync(openAt(t, "127.0.0.1:0", time.Minute), addr)
	select {
	case err := <-done:
		t.Fatalf("the call did not wait for the peer: %v", err)
	case <-time.After(3 * peerPoll):
	}
	go answer(openAt(t, addr, 0))
	if err := waitErr(t, done, 10*time.Second, "the peer is back"); err != nil {
		t.Fatalf("delivered to the returned peer: %v", err)
	}
}

// Every end of a wait: its bound, the node no longer leading, StopWaiting,
// Close and Sever each return the call's failure; PeerWait < 0 and a node
// that does not lead do not wait at all.
func TestWaitEnds(t *testing.T) {
	cases := []struct {
		name string
		wait time.Duration
		end  func(*Transport) // nil: the bound or no wait
		bare func(*Transport) // before the call
	}{
		{name: "bound", wait: 300 * time.Millisecond},
		{name: "no waiting", wait: -1},
		{name: "not leading", wait: time.Minute, bare: func(tr *Transport) { tr.SetLeading(false) }},
		{name: "lost leadership", wait: time.Minute, end: func(tr *Transport) { tr.SetLeading(false) }},
		{name: "stop waiting", wait: time.Minute, end: (*Transport).StopWaiting},
		{name: "close", wait: time.Minute, end: func(tr *Transport) { tr.Close() }},
		{name: "sever", wait: time.Minute, end: (*Transport).Sever},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := openAt(t, "127.0.0.1:0", c.wait)
			if c.bare != nil {
				c.bare(tr)
			}
			start := time.Now()
			done := heartbeatAsync(tr, refusingAddr(t))
			if c.end != nil {
				select {
				case err := <-done:
					t.Fatalf("returned before its end: %v", err)
				case <-time.After(3 * peerPoll):
				}
				c.end(tr)
			}
			err := waitErr(t, done, 10*time.Second, "ended")
			if err == nil || !unreachable(err) && !errors.Is(err, errSevered) {
				t.Fatalf("want the dial's failure, got %v", err)
			}
			if c.name == "bound" && time.Since(start) < c.wait {
				t.Fatalf("returned after %v, before its bound %v", time.Since(start), c.wait)
			}
		})
	}
	// Leading again, calls wait again.
	tr := openAt(t, "127.0.0.1:0", time.Minute)
	tr.SetLeading(false)
	tr.SetLeading(true)
	done := heartbeatAsync(tr, refusingAddr(t))
	select {
	case err := <-done:
		t.Fatalf("a leader's call did not wait: %v", err)
	case <-time.After(3 * peerPoll):
	}
	tr.StopWaiting()
	waitErr(t, done, 10*time.Second, "stopped")
}

// A failure on an open connection is not waited on: the peer answered.
func TestNoWaitOnAnOpenConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close() // accepts, then hangs up
		}
	}()
	done := heartbeatAsync(openAt(t, "127.0.0.1:0", time.Minute), ln.Addr().String())
	if err := waitErr(t, done, 5*time.Second, "a hang-up"); err == nil || unreachable(err) {
		t.Fatalf("want a failure on the connection, got %v", err)
	}
}

// A follower that was down long enough for hashicorp/raft's replication to
// back off to seconds (10 ms doubling per failed try: the tries fall at 0,
// ..., 2.56, 5.12 and 10.24 s of the outage) is reached soon after it
// returns, not at the next try. Without the wait, a follower back after 6 s
// gets its entries at 10.24 s, 4 s later.
func TestLeaderReachesAReturningFollowerAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a follower down for 6 s")
	}
	const outage = 6 * time.Second
	type member struct {
		addr   string
		logs   *raft.InmemStore
		snaps  *raft.InmemSnapshotStore
		trans  *Transport
		raft   *raft.Raft
		config raft.Configuration
	}
	ms := make([]*member, 3)
	var servers []raft.Server
	for i := range ms {
		ms[i] = &member{addr: freeAddr(t), logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Address: raft.ServerAddress(ms[i].addr)})
	}
	start := func(i int) {
		m := ms[i]
		m.trans = openAt(t, m.addr, 0)
		cfg := raft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		cfg.Logger = hclog.NewNullLogger()
		r, err := raft.NewRaft(cfg, &countFSM{}, m.logs, m.logs, m.snaps, m.trans)
		if err != nil {
			t.Fatal(err)
		}
		m.raft = r
		t.Cleanup(func() { m.trans.StopWaiting(); r.Shutdown() })
	}
	for i := range ms {
		start(i)
	}
	if err := ms[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	leader := func() int {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for i, m := range ms {
				if m.raft != nil && m.raft.State() == raft.Leader {
					return i
				}
			}
			time.Sleep(20 * time.Millisecond) // polling for an election, with a deadline
		}
		t.Fatal("no leader")
		return -1
	}
	l := leader()
	if err := ms[l].raft.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % 3
	ms[f].trans.StopWaiting()
	if err := ms[f].raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	ms[f].trans.Close()
	ms[f].raft = nil

	// Entries while it is down; the leader tries it after each.
	downSince := time.Now()
	for time.Since(downSince) < outage {
		if err := ms[l].raft.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
			t.Fatalf("apply with a follower down: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the outage's pace, not a wait for a state
	}
	if ms[l].raft.State() != raft.Leader {
		t.Skip("leadership moved during the outage; the new leader's replication starts without backoff")
	}
	target := ms[l].raft.LastIndex()

	start(f)
	back := time.Now()
	deadline := back.Add(15 * time.Second)
	for ms[f].raft.LastIndex() < target {
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not catch up within 15 s of its return")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	took := time.Since(back)
	t.Logf("follower caught up %v after its return (down %v)", took, outage)
	if took > 2500*time.Millisecond {
		t.Fatalf("the follower was reached %v after its return; want within 2.5 s (the library's backoff alone waits until 10.24 s into the outage)", took)
	}
}

// countFSM applies anything and snapshots nothing of note.
type countFSM struct{ n int }

func (c *countFSM) Apply(*raft.Log) any { c.n++; return nil }

func (c *countFSM) Snapshot() (raft.FSMSnapshot, error) { return countSnap{}, nil }

func (c *countFSM) Restore(r io.ReadCloser) error { return r.Close() }

type countSnap struct{}

func (countSnap) Persist(sink raft.SnapshotSink) error { return sink.Close() }

func (countSnap) Release() {}
