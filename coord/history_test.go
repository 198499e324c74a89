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
	if cfg, _ := s.GrantHistorySettings(); cfg != want {
		t.Fatalf("settings %+v, want %+v", cfg, want)
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
	if cfg, _ := s2.GrantHistorySettings(); cfg != want {
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
