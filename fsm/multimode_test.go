package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func sharedMulti(holder, secret string, names ...string) *entry.MultiAcquire {
	c := multiAcquire(holder, secret, names...)
	c.Mode = entry.ModeShared
	return c
}

// A multi-acquire in shared mode grants every name as a shared grant, with
// one token: it coexists with single shared grants of its names, an
// exclusive acquire of any of them is refused while it lives, one name
// cannot be released alone, it survives a snapshot as a multi-grant, and
// one multi-release ends every name at one index.
// Its events and its history record carry the mode (fails with
// multiAcquiredEvents leaving Mode out: the events have none).
// Fails with applyMultiAcquire's heldRefusal probe left exclusive (no
// Mode): the shared multi-acquire is refused lock_held by the single shared
// grant of "a".
func TestSharedMultiGrantBesideSharedGrants(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 16})
	single := l.apply(shared("a", "r", "s-r")).(*AcquireResult).Grant
	rec := &recorder{}
	l.f.Observe(rec)
	got := l.apply(sharedMulti("w", "s1", "a", "b"))
	r, ok := got.(*MultiResult)
	if !ok || r.Grant.Token != l.index || r.Grant.Mode != entry.ModeShared {
		t.Fatalf("shared multi-acquire beside a shared grant: %v", got)
	}
	if len(rec.events) != 2 || rec.events[0].Mode != entry.ModeShared || rec.events[1].Mode != entry.ModeShared {
		t.Fatalf("events of the shared multi-grant: %+v", rec.events)
	}
	if g, how := l.lookup(r.Grant.Token); how != TokenFound || g.Mode != entry.ModeShared || len(g.Names) != 2 {
		t.Fatalf("token lookup of the shared multi-grant: %+v %v", g, how)
	}
	if got := l.f.SharedLocks("a"); len(got) != 2 || got[0].Token != single.Token || got[1].Token != r.Grant.Token {
		t.Fatalf("shared grants of a: %+v", got)
	}
	if _, held := l.f.Lock("b"); held {
		t.Fatal("b held exclusively by a shared multi-grant")
	}
	var held *refusal.HeldError
	if err, _ := l.apply(acquire("b", "x", "s-x")).(error); !errors.As(err, &held) || held.Token != r.Grant.Token {
		t.Fatalf("exclusive acquire of a shared multi-grant's name: %v", err)
	}
	if err, _ := l.apply(multiAcquire("x", "s-x", "c", "b")).(error); !errors.As(err, &held) {
		t.Fatalf("exclusive multi-acquire over a shared multi-grant's name: %v", err)
	}
	if err, _ := l.apply(&entry.Release{Lock: "b", Token: r.Grant.Token, Lease: "s1"}).(error); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("release of one name of a shared multi-grant: %v", err)
	}
	if _, ok := l.apply(shared("b", "y", "s-y")).(*AcquireResult); !ok {
		t.Fatal("single shared acquire of a shared multi-grant's name refused")
	}
	roundTrip(t, l.f)
	var buf bytes.Buffer
	if _, err := l.f.Image().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if m, ok := g.MultiGrant(r.Grant.Token); !ok || m.Mode != entry.ModeShared || len(m.Names) != 2 {
		t.Fatalf("restored shared multi-grant: %+v %v", m, ok)
	}
	res, ok := l.apply(&entry.MultiRelease{Token: r.Grant.Token, Lease: "s1"}).(*MultiReleaseResult)
	if !ok || len(res.Locks) != 2 {
		t.Fatalf("multi-release of the shared multi-grant: %+v", res)
	}
	if l.f.IsMulti(r.Grant.Token) || len(l.f.SharedLocks("a")) != 1 || len(l.f.SharedLocks("b")) != 1 {
		t.Fatalf("after the multi-release: a %+v b %+v", l.f.SharedLocks("a"), l.f.SharedLocks("b"))
	}
}

// A shared multi-acquire is refused by an exclusive grant of any name, and
// is written only for members of LogFormatMultiModes (an older build would
// drop the mode and grant it exclusively).
// Fails with fieldsFormat's MultiAcquire clause removed: the shared
// multi-acquire encodes for format 10.
func TestSharedMultiNeedsItsFormat(t *testing.T) {
	l := newEntryLog(t)
	l.grantLock("b", "x")
	var held *refusal.HeldError
	if err, _ := l.apply(sharedMulti("w", "s1", "a", "b")).(error); !errors.As(err, &held) || held.Lock != "b" {
		t.Fatalf("shared multi-acquire over an exclusive grant: %v", err)
	}
	if _, err := entry.EncodeFormat(sharedMulti("w", "s1", "a"), entry.LogFormatDurableWaits); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("shared multi-acquire encoded for format %d: %v", entry.LogFormatDurableWaits, err)
	}
	if _, err := entry.EncodeFormat(multiAcquire("w", "s1", "a"), entry.LogFormatLockModes); err != nil {
		t.Fatalf("exclusive multi-acquire for format %d: %v", entry.LogFormatLockModes, err)
	}
}
