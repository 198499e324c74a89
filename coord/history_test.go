package coord

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/internal/fakeclock"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// The leader proposes its settings once every member reads the entry, and
// only then; a node whose own differ from the cluster's says so and keeps
// the cluster's.
func TestHistorySettingsProposedOnceMembersReadThem(t *testing.T) {
	f := newFakeRaft()
	f.format = entry.LogFormatCoord
	want := entry.GrantHistorySettings{PerLock: 4, Global: 50}
	s, _, _ := newTestServiceOver(t, f, Config{GrantHistory: &want})
	g := mustAcquire(t, s, "a", "w", time.Minute)
	time.Sleep(historySettle + 200*time.Millisecond) // a settle round: nothing to see, so nothing to poll
	if _, ok := s.GrantHistorySettings(); ok {
		t.Fatal("settings proposed while a member reads log format 3")
	}
	f.mu.Lock()
	f.format = entry.LogFormat
	f.mu.Unlock()
	poll(t, "the settings", func() bool { _, ok := s.GrantHistorySettings(); return ok })
	if cfg, _ := s.GrantHistorySettings(); cfg.Sizes() != want || !cfg.Permits {
		t.Fatalf("settings %+v, want %+v with permits", cfg, want)
	}
	if _, _, err := s.Grant(context.Background(), g.Token, false); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("a grant before the settings: %v", err)
	}
	g2 := mustAcquire(t, s, "b", "w", time.Minute)
	if got, _, err := s.Grant(context.Background(), g2.Token, false); err != nil || got.Lock != "b" || got.Ended != "" {
		t.Fatalf("grant after the settings: %+v %v", got, err)
	}
	if hist, _, _ := s.History(context.Background(), "b", 5, false); len(hist) != 1 || hist[0].Token != g2.Token {
		t.Fatalf("history of b: %+v", hist)
	}

	// Another node of the same cluster, with other flags.
	var logs syncBuffer
	other := entry.GrantHistorySettings{PerLock: 2, Global: 10}
	s2 := New(&followerOf{f}, f.fsm, Config{GrantHistory: &other, Clock: fakeclock.New(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s2.Close()
	poll(t, "the warning", func() bool { return strings.Contains(logs.String(), "not the cluster's") })
	if cfg, _ := s2.GrantHistorySettings(); cfg.Sizes() != want {
		t.Fatalf("the other node changed the settings: %+v", cfg)
	}
}

// followerOf is a follower of the fake Raft's log.
type followerOf struct{ *fakeRaft }

func (f *followerOf) Leadership() (bool, <-chan struct{}) { return false, make(chan struct{}) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A blocking read wakes on an entry of its lock after the index, not on
// another lock's, at once when that entry is already applied, and when the
// wait ends otherwise.
func TestWaitLock(t *testing.T) {
	s, _, _ := newTestService(t, Config{})
	g := mustAcquire(t, s, "a", "w", time.Minute)
	at := s.AppliedIndex()
	if changed, err := s.WaitLock(bg, "a", at-1, time.Minute, nil); !changed || err != nil {
		t.Fatalf("a change already applied after the index: %v %v", changed, err)
	}
	start := time.Now()
	if changed, err := s.WaitLock(bg, "a", at, 50*time.Millisecond, nil); changed || err != nil || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("no change: %v %v after %v", changed, err, time.Since(start))
	}
	woke := make(chan bool, 1)
	go func() {
		changed, _ := s.WaitLock(bg, "a", at, time.Minute, nil)
		woke <- changed
	}()
	mustAcquire(t, s, "other", "w", time.Minute)
	select {
	case <-woke:
		t.Fatal("woken by another lock's grant")
	case <-time.After(100 * time.Millisecond):
	}
	if err := s.Release(bg, "a", g.Token, g.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case changed := <-woke:
		if !changed {
			t.Fatal("woken without a change")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the release did not wake the blocking read")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.WaitLock(ctx, "a", s.AppliedIndex(), time.Minute, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// A cluster whose members all read LogFormatPermitHistory records permits
// from its settings' entry: a permit's token answers with its semaphore,
// holder and end (released, expired), and the semaphore's history lists
// it. One whose members read less keeps the lock history only, and says
// of a permit's token that it may be one (not "never granted"); once they
// all read it, the leader turns permits on with the cluster's own sizes.
func TestPermitHistoryFollowsTheMembersFormat(t *testing.T) {
	f := newFakeRaft()
	f.format = entry.LogFormatPermitDelay
	want := entry.GrantHistorySettings{PerLock: 4, Global: 50}
	s, _, clock := newTestServiceOver(t, f, Config{GrantHistory: &want})
	poll(t, "the settings", func() bool { _, ok := s.GrantHistorySettings(); return ok })
	if cfg, _ := s.GrantHistorySettings(); cfg.Permits {
		t.Fatalf("permits recorded while a member reads log format %d", entry.LogFormatPermitDelay)
	}
	early := mustPermit(t, s, "a", 3).Permit
	var unknown *TokenError
	if _, _, err := s.Grant(bg, early.Token, false); !errors.As(err, &unknown) || unknown.Lookup != fsm.TokenPermitNotKept || !strings.Contains(err.Error(), "semaphore permit") {
		t.Fatalf("a permit before permits are recorded: %v", err)
	}

	setFormat(f, entry.LogFormat)
	poll(t, "permits in the settings", func() bool { cfg, _ := s.GrantHistorySettings(); return cfg.Permits })
	if cfg, _ := s.GrantHistorySettings(); cfg.Sizes() != want {
		t.Fatalf("the upgrade changed the sizes: %+v", cfg)
	}
	released := mustPermit(t, s, "b", 3).Permit
	if err := s.ReleasePermit(bg, "s", released.Token, released.Lease); err != nil {
		t.Fatal(err)
	}
	expired := mustPermit(t, s, "c", 3).Permit
	clock.Advance(time.Second)
	poll(t, "c's permit to expire", func() bool { g, _, _ := s.Grant(bg, expired.Token, false); return g.Ended != "" })
	held := mustPermit(t, s, "d", 3).Permit
	for _, c := range []struct {
		p     entry.Permit
		ended string
	}{{released, entry.EndReleased}, {expired, entry.EndExpired}, {held, ""}} {
		g, index, err := s.Grant(bg, c.p.Token, false)
		if err != nil || g.Semaphore != "s" || g.Lock != "" || g.Holder != c.p.Holder || g.GrantedIndex != c.p.Token || g.Ended != c.ended || index < g.GrantedIndex {
			t.Errorf("token %d: %+v at %d (%v), want semaphore s, holder %s, ended %q", c.p.Token, g, index, err, c.p.Holder, c.ended)
		}
	}
	hist, _, _ := s.SemaphoreHistory(bg, "s", 10, false)
	if len(hist) != 3 || hist[0].Token != held.Token || hist[2].Token != released.Token {
		t.Fatalf("history of semaphore s: %+v", hist)
	}
	if hist, _, _ := s.History(bg, "s", 10, false); len(hist) != 0 {
		t.Fatalf("the lock s has a history: %+v", hist)
	}
	if _, _, err := s.Grant(bg, early.Token, false); !errors.As(err, &unknown) || unknown.Lookup != fsm.TokenPermitNotKept {
		t.Fatalf("the permit from before, after the upgrade: %v", err)
	}
}

// A new cluster of this build records permits from its first settings:
// one entry, no second proposal.
func TestPermitHistoryFromTheFirstSettings(t *testing.T) {
	want := entry.GrantHistorySettings{PerLock: 4, Global: 50}
	s, f, _ := newTestService(t, Config{GrantHistory: &want})
	poll(t, "the settings", func() bool { _, ok := s.GrantHistorySettings(); return ok })
	p := mustPermit(t, s, "a", 1).Permit
	if g, _, err := s.Grant(bg, p.Token, false); err != nil || g.Semaphore != "s" || g.Holder != "a" || g.Ended != "" {
		t.Fatalf("the first permit: %+v %v", g, err)
	}
	n := 0
	for _, c := range f.log() {
		if _, ok := c.(*entry.SetGrantHistory); ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d settings entries, want 1", n)
	}
}

func TestHistoryProposal(t *testing.T) {
	want := entry.GrantHistorySettings{PerLock: 4, Global: 50}
	cluster := entry.GrantHistorySettings{PerLock: 2, Global: 10}
	withPermits := func(g entry.GrantHistorySettings) entry.GrantHistorySettings { g.Permits = true; return g }
	for _, c := range []struct {
		cur     entry.GrantHistorySettings
		ok      bool
		format  int
		next    entry.GrantHistorySettings
		propose bool
	}{
		{format: entry.LogFormatCoord},
		{format: entry.LogFormatHistory, next: want, propose: true},
		{format: entry.LogFormatPermitDelay, next: want, propose: true},
		{format: entry.LogFormatPermitHistory, next: withPermits(want), propose: true},
		{cur: cluster, ok: true, format: entry.LogFormatPermitDelay},
		{cur: cluster, ok: true, format: entry.LogFormatPermitHistory, next: withPermits(cluster), propose: true},
		{cur: withPermits(cluster), ok: true, format: entry.LogFormatPermitHistory},
	} {
		next, propose := historyProposal(c.cur, c.ok, want, c.format)
		if next != c.next || propose != c.propose {
			t.Errorf("cluster's %+v (%v), format %d: %+v %v, want %+v %v", c.cur, c.ok, c.format, next, propose, c.next, c.propose)
		}
	}
}
