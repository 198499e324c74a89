package k8sleader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/integrations/k8sleader"
)

func TestConfigRefused(t *testing.T) {
	c, err := client.New([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ok := k8sleader.Config{Client: c, Election: "controller", Identity: "pod-0"}
	for name, mod := range map[string]func(*k8sleader.Config){
		"no client":      func(c *k8sleader.Config) { c.Client = nil },
		"bad election":   func(c *k8sleader.Config) { c.Election = "a/b" },
		"no identity":    func(c *k8sleader.Config) { c.Identity = "" },
		"short ttl":      func(c *k8sleader.Config) { c.TTL = time.Millisecond },
		"negative delay": func(c *k8sleader.Config) { c.LockDelay = -time.Second },
	} {
		cfg := ok
		mod(&cfg)
		if _, err := k8sleader.New(cfg); !errors.Is(err, k8sleader.ErrInvalidConfig) || k8sleader.Code(err) != "invalid_config" {
			t.Errorf("%s: %v (code %q), want invalid_config", name, err, k8sleader.Code(err))
		}
	}
	if _, err := k8sleader.New(ok); err != nil {
		t.Fatal(err)
	}
}

// The Lock's answers to the elector, against real members: a campaign
// while another holds is refused, the holder's renewal keeps its term, a
// term whose grant was lost is never renewed (nor replaced under the same
// campaign), a new campaign takes a greater term, Get builds the record
// from fencer's state, and a record with no holder resigns.
func TestLockAgainstFencer(t *testing.T) {
	endpoints, _ := startFencer(t, 3)
	c, err := client.New(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const ttl = 2 * time.Second
	newLock := func(id string) *k8sleader.Lock {
		l, err := k8sleader.New(k8sleader.Config{Client: c, Election: "ctl", Identity: id, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := newLock("a"), newLock("b")
	rec := func(id string, acquired time.Time) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 2,
			AcquireTime: metav1.NewTime(acquired), RenewTime: metav1.Now(), LeaderTransitions: 1}
	}

	if got, _, err := a.Get(ctx); err != nil || got.HolderIdentity != "" {
		t.Fatalf("Get of a new election: %+v, %v; want no holder", got, err)
	}
	t1 := time.Now()
	if err := a.Create(ctx, rec("a", t1)); err != nil {
		t.Fatal(err)
	}
	term := a.Term()
	if term == 0 {
		t.Fatal("no term after the campaign")
	}
	got, _, err := b.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.HolderIdentity != "a" || got.LeaseDurationSeconds != 2 || got.AcquireTime.Unix() != t1.Unix() ||
		got.LeaderTransitions != 1 || time.Since(got.RenewTime.Time) > 2*time.Second {
		t.Fatalf("Get: %+v; want holder a, 2s, acquired %v, renewed just now", got, t1)
	}
	if err := b.Update(ctx, rec("b", time.Now())); !errors.Is(err, k8sleader.ErrNotGranted) || !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("b's campaign while a holds: %v, want not granted (lock held)", err)
	}
	if err := b.Update(ctx, rec("a", t1)); !errors.Is(err, k8sleader.ErrNotIdentity) {
		t.Fatalf("b writing a's record: %v, want not_identity", err)
	}
	if err := a.Update(ctx, rec("a", t1)); err != nil || a.Term() != term {
		t.Fatalf("a's renewal: %v, term %d; want its term %d", err, a.Term(), term)
	}

	// No renewal for a TTL: the grant is lost, and its term with it.
	poll(t, 2*ttl, "a's grant lost for want of renewals", func() bool { return a.Term() == 0 })
	if err := a.Update(ctx, rec("a", t1)); !errors.Is(err, k8sleader.ErrTermEnded) || k8sleader.Code(err) != "term_ended" {
		t.Fatalf("renewal of a lost term: %v, want term_ended", err)
	}
	if a.Term() != 0 || a.Context().Err() == nil {
		t.Fatalf("after the lost term: term %d, context %v; want 0 and cancelled", a.Term(), a.Context().Err())
	}
	// A new campaign (a new acquire time) takes a new, greater term once
	// fencer has freed the election.
	t2 := t1.Add(time.Minute)
	poll(t, 2*ttl, "a's new campaign granted", func() bool { return a.Update(ctx, rec("a", t2)) == nil })
	if a.Term() <= term {
		t.Fatalf("new term %d, want above %d", a.Term(), term)
	}

	// ReleaseOnCancel's record, with no holder, resigns: b may take it.
	if err := a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if a.Term() != 0 {
		t.Fatalf("term %d after resigning", a.Term())
	}
	if err := b.Update(ctx, rec("b", time.Now())); err != nil {
		t.Fatalf("b's campaign after a resigned: %v", err)
	}
}
