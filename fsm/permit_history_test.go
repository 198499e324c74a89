package fsm

import (
	"bytes"
	"fmt"
	"github.com/fencer-io/fencer/fsm/event"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// entryLog applies commands as Raft hands them to the FSM: encoded for
// members of format, at consecutive indexes.
type entryLog struct {
	t      *testing.T
	f      *FSM
	index  uint64
	format int
}

func newEntryLog(t *testing.T) *entryLog {
	return &entryLog{t: t, f: New(nil), format: entry.LogFormat}
}

func (l *entryLog) apply(c entry.Command) any {
	l.t.Helper()
	data, err := entry.EncodeFormat(c, l.format)
	if err != nil {
		l.t.Fatalf("encode %T: %v", c, err)
	}
	return l.applyData(data)
}

func (l *entryLog) applyData(data []byte) any {
	l.t.Helper()
	l.index++
	res, panicked := applyEntry(l.f, l.index, data)
	if panicked != nil {
		l.t.Fatalf("entry %d panicked: %v", l.index, panicked)
	}
	return res
}

func (l *entryLog) permit(sem, holder string, limit int) entry.Permit {
	l.t.Helper()
	r, ok := l.apply(&entry.SemAcquire{Semaphore: sem, Holder: holder, Lease: "l-" + holder, TTLMillis: 1000, Limit: limit, RequestID: "r-" + holder}).(*PermitResult)
	if !ok {
		l.t.Fatalf("permit of %s for %s at %d refused", sem, holder, l.index)
	}
	return r.Permit
}

func (l *entryLog) grantLock(lock, holder string) entry.Lock {
	l.t.Helper()
	r, ok := l.apply(acquire(lock, holder, "s-"+holder)).(*AcquireResult)
	if !ok {
		l.t.Fatalf("acquire %s at %d refused", lock, l.index)
	}
	return r.Grant
}

func (l *entryLog) settings(cfg entry.GrantHistorySettings) {
	l.t.Helper()
	if _, ok := l.apply(&entry.SetGrantHistory{GrantHistorySettings: cfg}).(entry.GrantHistorySettings); !ok {
		l.t.Fatalf("settings %+v refused", cfg)
	}
}

func (l *entryLog) lookup(token uint64) (entry.GrantRecord, TokenLookup) { return l.f.GrantOf(token) }

// A permit is recorded as a lock grant is: its semaphore, holder, granting
// index, and how it ended (released, expired, handed off to a waiter in
// the same entry, or not yet); a retried request id records nothing new;
// a semaphore's history is its own, apart from a lock of the same name.
func TestPermitHistoryRecordsHowEachPermitEnded(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 16, Global: 100, Permits: true}) // 1
	a := l.permit("s", "a", 2)                                                      // 2
	b := l.permit("s", "b", 2)                                                      // 3
	l.apply(&entry.SemRelease{Semaphore: "s", Token: a.Token, Lease: a.Lease})      // 4
	if r, _ := l.apply(&entry.SemAcquire{Semaphore: "s", Holder: "b", Lease: "x", TTLMillis: 1000, Limit: 2, RequestID: "r-b"}).(*PermitResult); r == nil || !r.Existing {
		t.Fatalf("retry of b's request: %+v", r) // 5
	}
	l.apply(&entry.SemExpire{Semaphore: "s", Token: b.Token}) // 6
	c := l.permit("s", "c", 1)                                // 7
	next := &entry.SemAcquire{Holder: "d", Lease: "l-d", TTLMillis: 1000, Limit: 1}
	l.apply(&entry.SemRelease{Semaphore: "s", Token: c.Token, Lease: c.Lease, Next: next}) // 8: hands s to d
	lock := l.grantLock("s", "w")                                                          // 9: the lock s
	delayed := &entry.SemAcquire{Semaphore: "t", Holder: "e", Lease: "l-e", TTLMillis: 1000, Limit: 1, LockDelayMillis: 50}
	e := l.apply(delayed).(*PermitResult).Permit                                                                                             // 10
	l.apply(&entry.SemExpire{Semaphore: "t", Token: e.Token})                                                                                // 11: the slot's delay starts
	l.apply(&entry.EndDelay{Semaphore: "t", Since: 11, NextPermit: &entry.SemAcquire{Holder: "f", Lease: "l-f", TTLMillis: 1000, Limit: 1}}) // 12

	want := map[uint64]entry.GrantRecord{
		2:  {Token: 2, Semaphore: "s", Holder: "a", GrantedIndex: 2, Ended: entry.EndReleased, EndedIndex: 4},
		3:  {Token: 3, Semaphore: "s", Holder: "b", GrantedIndex: 3, Ended: entry.EndExpired, EndedIndex: 6},
		7:  {Token: 7, Semaphore: "s", Holder: "c", GrantedIndex: 7, Ended: entry.EndHandedOff, EndedIndex: 8},
		8:  {Token: 8, Semaphore: "s", Holder: "d", GrantedIndex: 8},
		9:  {Token: lock.Token, Lock: "s", Holder: "w", GrantedIndex: 9},
		10: {Token: 10, Semaphore: "t", Holder: "e", GrantedIndex: 10, Ended: entry.EndExpired, EndedIndex: 11},
		12: {Token: 12, Semaphore: "t", Holder: "f", GrantedIndex: 12},
	}
	check := func(f *FSM) {
		t.Helper()
		for token := uint64(1); token <= 13; token++ {
			got, why := f.GrantOf(token)
			w, ok := want[token]
			switch {
			case ok && (why != TokenFound || !reflect.DeepEqual(got, w)):
				t.Errorf("token %d: %+v (%v), want %+v", token, got, why, w)
			case !ok && why != TokenNeverIssued:
				t.Errorf("token %d: %v, want never issued", token, why)
			}
		}
		if hist, _ := f.PermitHistory("s", 10); !reflect.DeepEqual(hist, []entry.GrantRecord{want[8], want[7], want[3], want[2]}) {
			t.Errorf("history of semaphore s: %+v", hist)
		}
		if hist, _ := f.GrantHistory("s", 10); !reflect.DeepEqual(hist, []entry.GrantRecord{want[9]}) {
			t.Errorf("history of lock s: %+v", hist)
		}
		if hist, _ := f.PermitHistory("t", 1); !reflect.DeepEqual(hist, []entry.GrantRecord{want[12]}) {
			t.Errorf("last permit of t: %+v", hist)
		}
	}
	check(l.f)
	// A snapshot carries the permits' records, held ones included.
	var buf bytes.Buffer
	if _, err := l.f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`{"grant":{"token":8,"semaphore":"s","holder":"d","granted_index":8}}`)) {
		t.Fatalf("the snapshot lacks the held permit's record:\n%s", buf.Bytes())
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.Digest() != l.f.Digest() {
		t.Fatal("the restored state differs")
	}
	check(g)
	// Both go on alike: the restored held permit ends as the original's.
	d := g.Semaphore("s").Permits[0]
	rel := &entry.SemRelease{Semaphore: "s", Token: d.Token, Lease: d.Lease}
	data, _ := entry.Encode(rel)
	applyEntry(g, l.index+1, data)
	l.apply(rel)
	if rec, _ := g.GrantOf(d.Token); rec.Ended != entry.EndReleased || g.Digest() != l.f.Digest() {
		t.Fatalf("after the restore, the held permit ended as %+v; digests equal: %v", rec, g.Digest() == l.f.Digest())
	}
}

// PerLock bounds each semaphore's history as it does each lock's, and the
// Global names kept count locks and semaphores alike.
func TestPermitHistoryBounds(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 2, Global: 3, Permits: true})
	var held []entry.Permit
	for i := range 3 {
		held = append(held, l.permit("s", fmt.Sprintf("h%d", i), 5))
	}
	hist, _ := l.f.PermitHistory("s", 10)
	if len(hist) != 2 || hist[0].Token != held[2].Token || hist[1].Token != held[1].Token {
		t.Fatalf("s's last 2 permits: %+v", hist)
	}
	// The oldest permit is still in the ring, and still ends there.
	l.apply(&entry.SemRelease{Semaphore: "s", Token: held[0].Token, Lease: held[0].Lease})
	if g, why := l.f.GrantOf(held[0].Token); why != TokenFound || g.Ended != entry.EndReleased {
		t.Fatalf("the oldest permit: %+v %v", g, why)
	}
	l.grantLock("a", "w")
	l.grantLock("b", "w")
	l.grantLock("c", "w")
	if hist, _ := l.f.PermitHistory("s", 10); len(hist) != 0 {
		t.Fatalf("s kept with three locks granted since and Global 3: %+v", hist)
	}
	if _, why := l.f.GrantOf(held[2].Token); why != TokenNotKept {
		t.Fatalf("a permit older than the ring: %v", why)
	}
	roundTrip(t, l.f)
}

// Recording permits is the cluster's decision, made in the log: settings
// written before LogFormatPermitHistory (type 23) record none, on every
// replica, and a permit token then is "not kept", never "never granted";
// the type-24 settings start recording at their entry, keep the lock
// history as it was, and stay on through later settings; the point where
// recording began survives a snapshot.
func TestPermitHistoryIsTheLogsDecision(t *testing.T) {
	l := newEntryLog(t)
	l.format = entry.LogFormatPermitDelay
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 50}) // 1
	before := l.permit("s", "a", 3)                                // 2
	lock := l.grantLock("x", "w")                                  // 3
	// A type-23 entry that names permits (no build writes one) is read as
	// an older build reads it: without.
	l.applyData([]byte("\x17" + `{"per_lock":4,"global":50,"permits":true}`)) // 4
	if cfg, _ := l.f.GrantHistorySettings(); cfg.Permits {
		t.Fatal("a type-23 entry turned permits on")
	}
	if _, why := l.lookup(before.Token); why != TokenPermitNotKept {
		t.Fatalf("a permit while none are recorded: %v, want TokenPermitNotKept", why)
	}
	if hist, _ := l.f.PermitHistory("s", 10); len(hist) != 0 {
		t.Fatalf("permits recorded without the setting: %+v", hist)
	}

	l.format = entry.LogFormat
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 50, Permits: true}) // 5
	after := l.permit("s", "b", 3)                                                // 6
	if g, why := l.lookup(lock.Token); why != TokenFound || g.Lock != "x" {
		t.Fatalf("the lock grant from before: %+v %v", g, why)
	}
	if g, why := l.lookup(after.Token); why != TokenFound || g.Semaphore != "s" || g.Holder != "b" {
		t.Fatalf("a permit once recorded: %+v %v", g, why)
	}
	// The first permit ends; its grant was never recorded, and the
	// history cannot say it was no permit.
	l.apply(&entry.SemRelease{Semaphore: "s", Token: before.Token, Lease: before.Lease}) // 7
	for token, want := range map[uint64]TokenLookup{before.Token: TokenPermitNotKept, 4: TokenPermitNotKept, 5: TokenNeverIssued, 7: TokenNeverIssued} {
		if _, why := l.lookup(token); why != want {
			t.Errorf("token %d: %v, want %v", token, why, want)
		}
	}
	// Settings without permits (as a resize of type 23 would be) keep
	// recording them.
	l.format = entry.LogFormatPermitDelay
	l.settings(entry.GrantHistorySettings{PerLock: 2, Global: 40}) // 8
	if cfg, _ := l.f.GrantHistorySettings(); !cfg.Permits {
		t.Fatal("later settings turned permits off")
	}
	late := l.permit("s", "c", 3) // 9
	if _, why := l.lookup(late.Token); why != TokenFound {
		t.Fatalf("a permit after the resize: %v", why)
	}

	var buf bytes.Buffer
	if _, err := l.f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"version":3,`)) || !bytes.Contains(buf.Bytes(), []byte(`"permits_from":5}`)) {
		t.Fatalf("not a version-3 snapshot with permits from 5:\n%s", buf.Bytes())
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.Digest() != l.f.Digest() {
		t.Fatal("the restored state differs")
	}
	for token := uint64(1); token <= l.index+1; token++ {
		a, wa := l.f.GrantOf(token)
		b, wb := g.GrantOf(token)
		if !reflect.DeepEqual(a, b) || wa != wb {
			t.Errorf("token %d: %+v %v, restored %+v %v", token, a, wa, b, wb)
		}
	}
}

// Two replicas that applied the same log hold the same permits' history,
// whatever each did between: one took a snapshot and restored it halfway.
func TestPermitHistoryReplicasAgree(t *testing.T) {
	var cmds []entry.Command
	cmds = append(cmds, &entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 3, Global: 8, Permits: true}})
	held := map[string][]uint64{}
	for i := range 60 {
		sem := fmt.Sprintf("s%d", i%3)
		if len(held[sem]) < 2 {
			cmds = append(cmds, &entry.SemAcquire{Semaphore: sem, Holder: fmt.Sprintf("h%d", i), Lease: "l", TTLMillis: 1000, Limit: 2})
			held[sem] = append(held[sem], uint64(len(cmds)))
			continue
		}
		tok := held[sem][i%2]
		held[sem] = append(held[sem][:i%2], held[sem][i%2+1:]...)
		if i%3 == 0 {
			cmds = append(cmds, &entry.SemExpire{Semaphore: sem, Token: tok})
		} else {
			cmds = append(cmds, &entry.SemRelease{Semaphore: sem, Token: tok, Lease: "l"})
		}
	}
	a, b := New(nil), New(nil)
	for i, c := range cmds {
		data, err := entry.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []*FSM{a, b} {
			if res, _ := applyEntry(f, uint64(i+1), data); res == nil {
				continue
			} else if err, ok := res.(error); ok {
				t.Fatalf("entry %d (%T): %v", i+1, c, err)
			}
		}
		if i == len(cmds)/2 {
			var buf bytes.Buffer
			b.View().WriteTo(&buf)
			b = New(nil)
			if err := b.Restore(io.NopCloser(&buf)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.Digest() != b.Digest() {
		t.Fatal("replicas that applied the same log differ")
	}
	if hist, _ := a.PermitHistory("s1", 10); len(hist) != 3 || hist[0].Semaphore != "s1" {
		t.Fatalf("s1's history: %+v", hist)
	}
}

// A snapshot whose permits' records no log could have written is refused:
// permit records in a version-2 snapshot, or below the token permits are
// recorded from, a held permit's record without its permit, a record of
// both a lock and a semaphore.
func TestPermitHistorySnapshotChecks(t *testing.T) {
	l := newEntryLog(t)
	l.format = entry.LogFormatPermitDelay
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 50}) // 1
	l.format = entry.LogFormat
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 50, Permits: true}) // 2: permits from 2
	p := l.permit("s", "a", 2)                                                    // 3, held
	var buf bytes.Buffer
	l.f.View().WriteTo(&buf)
	good := buf.String()
	if _, err := snapshot.ReadImage(strings.NewReader(good)); err != nil {
		t.Fatalf("the good snapshot: %v\n%s", err, good)
	}
	permitRecord := fmt.Sprintf(`{"permit":{"semaphore":"s","holder":"a","token":%d`, p.Token)
	lines := strings.SplitAfter(good, "\n")
	var withoutPermit string
	for _, line := range lines {
		if !strings.HasPrefix(line, permitRecord) {
			withoutPermit += line
		}
	}
	withoutPermit = strings.Replace(withoutPermit, `"permits":1,`, "", 1)
	for name, bad := range map[string]string{
		"version 2":            strings.Replace(good, `"version":3,`, `"version":2,`, 1),
		"no permits_from":      strings.Replace(good, `,"permits_from":2`, "", 1),
		"permits from above":   strings.Replace(good, `"permits_from":2`, `"permits_from":4`, 1),
		"held, permit gone":    withoutPermit,
		"a lock and semaphore": strings.Replace(good, `"semaphore":"s","holder":"a","granted_index"`, `"lock":"s","semaphore":"s","holder":"a","granted_index"`, 1),
		"neither lock nor sem": strings.Replace(good, `"semaphore":"s","holder":"a","granted_index"`, `"holder":"a","granted_index"`, 1),
	} {
		if bad == good {
			t.Fatalf("%s: the snapshot did not change:\n%s", name, good)
		}
		if _, err := snapshot.ReadImage(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted:\n%s", name, bad)
		}
		if err := New(nil).Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
			t.Errorf("%s: restored:\n%s", name, bad)
		}
	}
}

// goldenV3 is the state behind testdata/snapshot-v3.golden: a cluster that
// kept a history of locks only, then (its members upgraded) permits too:
// permits of before and after, released, expired, handed off, in a slot's
// lock-delay and held, beside lock grants.
func goldenV3(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.format = entry.LogFormatPermitDelay
	l.apply(&entry.SetClusterID{ID: "c3"})
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 12})
	old := l.permit("jobs", "w0", 3)
	l.grantLock("db", "w0")
	l.format = entry.LogFormat
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 12, Permits: true})
	l.apply(&entry.SemRelease{Semaphore: "jobs", Token: old.Token, Lease: old.Lease})
	var ps []entry.Permit
	for i := range 3 {
		ps = append(ps, l.permit("jobs", fmt.Sprintf("w%d", i+1), 3))
	}
	l.apply(&entry.SemRelease{Semaphore: "jobs", Token: ps[0].Token, Lease: ps[0].Lease})
	l.apply(&entry.SemExpire{Semaphore: "jobs", Token: ps[1].Token})
	l.permit("jobs", "w4", 3)
	l.apply(&entry.SemRelease{Semaphore: "jobs", Token: ps[2].Token, Lease: ps[2].Lease,
		Next: &entry.SemAcquire{Holder: "w5", Lease: "l-w5", TTLMillis: 1000, Limit: 3}})
	d := l.apply(&entry.SemAcquire{Semaphore: "batch", Holder: "b1", Lease: "l-b1", TTLMillis: 2000, Limit: 1, LockDelayMillis: 500}).(*PermitResult).Permit
	l.apply(&entry.SemExpire{Semaphore: "batch", Token: d.Token})
	db, _ := l.f.Lock("db")
	l.apply(&entry.Release{Lock: "db", Token: db.Token, Lease: db.Lease})
	l.grantLock("db", "w9")
	return l.f
}

// A version-3 snapshot of this build restores to the same state in later
// builds, which write it byte for byte. FENCER_WRITE_GOLDEN=1 rewrites the
// file (only when the format is meant to change).
func TestSnapshotV3Golden(t *testing.T) {
	f := goldenV3(t)
	checkGolden(t, f, "snapshot-v3", `"version":3,`, `"permits_from":`, `"semaphore":"jobs","holder":"w5"`, `"ended":"handed_off"`, `"ended":"expired"`, `"delay":{"lock":"","since"`)
}

// A restore voids the held permits in the history it installs, as it does
// the held locks, on every member alike.
func TestRestoreVoidsPermitsInTheHistory(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 10, Permits: true})
	p := l.permit("s", "a", 2)
	cur := l.f.Image()
	img := &snapshot.Image{Header: New(nil).Image().Header}
	img.Header.Epoch, img.Header.EpochFloor, img.Header.LastToken = 1, 1, cur.Header.LastToken
	img.Header.AppliedIndex, img.Header.Term = 20, 2
	img.Void(cur, 20)
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	l.f.Observe(rec)
	if err := l.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if g, why := l.f.GrantOf(p.Token); why != TokenFound || g.Ended != entry.EndVoided || g.EndedIndex != 20 || g.Semaphore != "s" {
		t.Fatalf("the held permit after the restore: %+v %v", g, why)
	}
	// And it is reported as a lock's is (issue 26 F9: "voided":1 counted
	// only the lock, and no event named the permit). Fails with Void
	// collecting the held locks alone.
	want := []event.Event{
		{Index: 20, Type: event.Voided, Semaphore: "s", Holder: "a", Token: p.Token},
		{Index: 20, Type: event.Epoch, Epoch: 1},
	}
	if !reflect.DeepEqual(rec.events, want) {
		t.Fatalf("the restore reported %+v, want %+v", rec.events, want)
	}
	if h := l.f.Image().Header; h.Voided != 1 || h.VoidedPermits != 1 || h.Written().Version != snapshot.Version3 {
		t.Fatalf("the restored state's header: %d voided, %d permits, version %d", h.Voided, h.VoidedPermits, h.Written().Version)
	}
	if cfg, _ := l.f.GrantHistorySettings(); !cfg.Permits {
		t.Fatal("the restore stopped recording permits")
	}
}
