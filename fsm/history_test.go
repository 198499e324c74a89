package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// logger applies commands at consecutive indexes.
type logger struct {
	t     *testing.T
	f     *FSM
	index uint64
}

func newLogger(t *testing.T, cfg *entry.GrantHistorySettings) *logger {
	l := &logger{t: t, f: New(nil)}
	if cfg != nil {
		l.apply(&entry.SetGrantHistory{GrantHistorySettings: *cfg})
	}
	return l
}

func (l *logger) apply(c entry.Command) any {
	l.index++
	return l.f.ApplyCommand(c, l.index)
}

func (l *logger) grant(lock, holder string) entry.Lock {
	l.t.Helper()
	r, ok := l.apply(acquire(lock, holder, "s-"+lock)).(*AcquireResult)
	if !ok {
		l.t.Fatalf("acquire %s at %d refused", lock, l.index)
	}
	return r.Grant
}

func (l *logger) release(g entry.Lock) {
	l.t.Helper()
	if err, ok := l.apply(&entry.Release{Lock: g.Name, Token: g.Token, Lease: g.Lease}).(error); ok {
		l.t.Fatalf("release %s: %v", g.Name, err)
	}
}

func TestGrantHistoryRecordsHowEachGrantEnded(t *testing.T) {
	// With permits recorded, a token of the ring's reach that is not in it
	// was nobody's.
	l := newLogger(t, &entry.GrantHistorySettings{PerLock: 16, Global: 100, Permits: true})
	a := l.grant("a", "w1") // 2
	l.release(a)            // 3
	b := l.grant("b", "w2") // 4
	l.apply(&entry.Expire{Lock: "b", Token: b.Token})
	c := l.grant("a", "w3") // 6
	next := acquire("", "w4", "s4")
	l.apply(&entry.Release{Lock: "a", Token: c.Token, Lease: c.Lease, Next: next}) // 7: hands a to w4
	d := l.grant("d", "w5")                                                        // 8, held
	delayed := acquire("e", "w6", "s6")
	delayed.LockDelayMillis = 50
	e := l.apply(delayed).(*AcquireResult).Grant      // 9
	l.apply(&entry.Expire{Lock: "e", Token: e.Token}) // 10: a lock-delay starts
	l.apply(&entry.EndDelay{Lock: "e", Since: 10, Next: acquire("", "w7", "s7")})

	want := map[uint64]entry.GrantRecord{
		2:  {Token: 2, Lock: "a", Holder: "w1", GrantedIndex: 2, Ended: entry.EndReleased, EndedIndex: 3},
		4:  {Token: 4, Lock: "b", Holder: "w2", GrantedIndex: 4, Ended: entry.EndExpired, EndedIndex: 5},
		6:  {Token: 6, Lock: "a", Holder: "w3", GrantedIndex: 6, Ended: entry.EndHandedOff, EndedIndex: 7},
		7:  {Token: 7, Lock: "a", Holder: "w4", GrantedIndex: 7},
		8:  {Token: d.Token, Lock: "d", Holder: "w5", GrantedIndex: 8},
		9:  {Token: 9, Lock: "e", Holder: "w6", GrantedIndex: 9, Ended: entry.EndExpired, EndedIndex: 10},
		11: {Token: 11, Lock: "e", Holder: "w7", GrantedIndex: 11},
	}
	for token := uint64(0); token <= 12; token++ {
		got, why := l.f.GrantOf(token)
		w, ok := want[token]
		switch {
		case ok && (why != TokenFound || !reflect.DeepEqual(got, w)):
			t.Errorf("token %d: %+v (%v), want %+v", token, got, why, w)
		case !ok && why != TokenNeverIssued:
			t.Errorf("token %d: %v, want never issued", token, why)
		}
	}
	hist, index := l.f.GrantHistory("a", 10)
	if index != l.index || !reflect.DeepEqual(hist, []entry.GrantRecord{want[7], want[6], want[2]}) {
		t.Fatalf("history of a at %d: %+v", index, hist)
	}
	if hist, _ := l.f.GrantHistory("a", 1); !reflect.DeepEqual(hist, []entry.GrantRecord{want[7]}) {
		t.Fatalf("last grant of a: %+v", hist)
	}
	if hist, _ := l.f.GrantHistory("nope", 10); len(hist) != 0 {
		t.Fatalf("history of a lock never granted: %+v", hist)
	}
}

// Grants before the settings were applied are not kept; a cluster whose
// log never set them keeps nothing.
func TestGrantHistoryStartsAtItsSettings(t *testing.T) {
	l := newLogger(t, nil)
	a := l.grant("a", "w1")
	if _, why := l.f.GrantOf(a.Token); why != TokenNoHistory {
		t.Fatalf("without settings: %v", why)
	}
	if _, ok := l.f.GrantHistorySettings(); ok {
		t.Fatal("settings before any SetGrantHistory")
	}
	l.apply(&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 4, Global: 10}})
	l.release(a)
	b := l.grant("b", "w2")
	if _, why := l.f.GrantOf(a.Token); why != TokenNotKept {
		t.Fatalf("grant before the settings: %v, want not kept", why)
	}
	if g, why := l.f.GrantOf(b.Token); why != TokenFound || g.Holder != "w2" {
		t.Fatalf("grant after the settings: %+v %v", g, why)
	}
	if _, why := l.f.GrantOf(b.Token + 1); why != TokenNeverIssued {
		t.Fatalf("token above the last: %v", why)
	}
	if err, ok := l.apply(&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: -1, Global: 10}}).(error); !ok {
		t.Fatal("negative per-lock setting accepted")
	} else if !strings.Contains(err.Error(), "per lock") {
		t.Fatalf("refusal: %v", err)
	}
}

// The ring keeps the cluster's last Global grants; a lock keeps its last
// PerLock even past the ring, for the Global locks granted last.
func TestGrantHistoryBounds(t *testing.T) {
	l := newLogger(t, &entry.GrantHistorySettings{PerLock: 2, Global: 3})
	var quiet []entry.Lock
	for range 3 {
		g := l.grant("quiet", "q")
		l.release(g)
		quiet = append(quiet, g)
	}
	var busy []entry.Lock
	for range 4 {
		g := l.grant("busy", "b")
		l.release(g)
		busy = append(busy, g)
	}
	// The ring holds busy's last three grants; quiet's last two outlive it.
	for i, g := range busy {
		_, why := l.f.GrantOf(g.Token)
		if want := map[bool]TokenLookup{true: TokenFound, false: TokenNotKept}[i >= 1]; why != want {
			t.Errorf("busy grant %d (token %d): %v, want %v", i, g.Token, why, want)
		}
	}
	if _, why := l.f.GrantOf(quiet[2].Token); why != TokenNotKept {
		t.Errorf("quiet grant older than the ring: %v", why)
	}
	hist, _ := l.f.GrantHistory("quiet", 10)
	if len(hist) != 2 || hist[0].Token != quiet[2].Token || hist[1].Token != quiet[1].Token {
		t.Fatalf("quiet's history: %+v", hist)
	}
	if hist, _ := l.f.GrantHistory("busy", 10); len(hist) != 2 || hist[0].Token != busy[3].Token {
		t.Fatalf("busy's history: %+v", hist)
	}
	// Three other locks granted since: quiet, the lock granted longest
	// ago, is forgotten.
	l.grant("x", "h")
	if hist, _ := l.f.GrantHistory("quiet", 10); len(hist) != 2 {
		t.Fatalf("quiet forgotten with 3 locks: %+v", hist)
	}
	l.grant("y", "h")
	if hist, _ := l.f.GrantHistory("quiet", 10); len(hist) != 0 {
		t.Fatalf("quiet kept with 4 locks and Global 3: %+v", hist)
	}
	roundTrip(t, l.f)
	// Smaller settings keep what they would have kept: the last grant,
	// and only its lock's history.
	x, _ := l.f.Lock("x")
	y, _ := l.f.Lock("y")
	l.apply(&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 2, Global: 1}})
	if _, why := l.f.GrantOf(x.Token); why != TokenNotKept {
		t.Fatalf("x's grant with a ring of 1: %v", why)
	}
	if _, why := l.f.GrantOf(y.Token); why != TokenFound {
		t.Fatalf("y's grant with a ring of 1: %v", why)
	}
	for lock, n := range map[string]int{"busy": 0, "x": 0, "y": 1} {
		if hist, _ := l.f.GrantHistory(lock, 10); len(hist) != n {
			t.Fatalf("%s's history with Global 1: %+v", lock, hist)
		}
	}
	roundTrip(t, l.f)
}

// Whatever the log, a snapshot restores to a history that answers and
// goes on exactly as the original: the history rebuilt from the records
// is the one the applies built, under changes of settings too.
func TestGrantHistorySurvivesSnapshots(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			settings := func() entry.GrantHistorySettings {
				return entry.GrantHistorySettings{PerLock: rng.IntN(4), Global: rng.IntN(8)}
			}
			cfg := settings()
			l := newLogger(t, &cfg)
			for step := range 300 {
				lock := fmt.Sprintf("l%d", rng.IntN(6))
				switch cur, held := l.f.Lock(lock); {
				case rng.IntN(40) == 0:
					l.apply(&entry.SetGrantHistory{GrantHistorySettings: settings()})
				case !held:
					l.apply(acquire(lock, fmt.Sprintf("h%d", rng.IntN(3)), "s"))
				case rng.IntN(3) == 0:
					l.apply(&entry.Expire{Lock: lock, Token: cur.Token, Next: acquire("", "n", "s")})
				default:
					l.apply(&entry.Release{Lock: lock, Token: cur.Token, Lease: cur.Lease})
				}
				if step%7 != 0 {
					continue
				}
				var buf bytes.Buffer
				if _, err := l.f.Image().WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				g := New(nil)
				if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
					t.Fatalf("step %d: %v\n%s", step, err, buf.Bytes())
				}
				// Both go on with the same entries.
				for k := range 5 {
					name := fmt.Sprintf("l%d", rng.IntN(6))
					cmd := entry.Command(acquire(name, "x", "s"))
					if cur, held := l.f.Lock(name); held {
						cmd = &entry.Release{Lock: name, Token: cur.Token, Lease: cur.Lease}
					}
					l.index++
					l.f.ApplyCommand(cmd, l.index)
					g.ApplyCommand(cmd, l.index)
					if g.Digest() != l.f.Digest() {
						t.Fatalf("step %d+%d: the restored history went on differently", step, k)
					}
				}
				for token := uint64(1); token <= l.index; token++ {
					a, wa := l.f.GrantOf(token)
					b, wb := g.GrantOf(token)
					if !reflect.DeepEqual(a, b) || wa != wb {
						t.Fatalf("token %d: %+v %v, restored %+v %v", token, a, wa, b, wb)
					}
				}
			}
		})
	}
}

// A state with no history is written in version 1, as before; one with a
// history in version 2; both restore; a version-1 header with fields of
// version 2, and a version this build does not know, are refused.
func TestSnapshotVersions(t *testing.T) {
	write := func(f *FSM) []byte {
		var buf bytes.Buffer
		f.Image().WriteTo(&buf)
		return buf.Bytes()
	}
	old := newLogger(t, nil)
	old.grant("a", "w")
	if v1 := write(old.f); !bytes.Contains(v1, []byte(`"version":1,`)) {
		t.Fatalf("no history, not version 1: %s", v1)
	}
	l := newLogger(t, &entry.GrantHistorySettings{PerLock: 2, Global: 5})
	l.grant("a", "w")
	v2 := write(l.f)
	if !bytes.Contains(v2, []byte(`"version":2,`)) || !bytes.Contains(v2, []byte(`"grant":{"token":2,"lock":"a","holder":"w","granted_index":2}`)) {
		t.Fatalf("history, not version 2: %s", v2)
	}
	roundTrip(t, l.f)
	lines := bytes.SplitAfter(v2, []byte("\n"))
	heldLockFree := append(bytes.Replace(lines[0], []byte(`"locks":1,`), []byte(`"locks":0,`), 1), lines[2]...)
	for name, bad := range map[string][]byte{
		"v1 with a history": bytes.Replace(v2, []byte(`"version":2,`), []byte(`"version":1,`), 1),
		"version 8":         bytes.Replace(v2, []byte(`"version":2,`), []byte(`"version":8,`), 1),
		"held, lock free":   heldLockFree,
	} {
		if _, err := snapshot.ReadImage(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted:\n%s", name, bad)
		}
	}
}

// A restore's voided grants and epoch are reported by every member that
// installs its state, alike, whatever each held before: a member that
// lagged at the restore held fewer grants than the leader.
func TestRestoreEventsComeFromTheSnapshotAlone(t *testing.T) {
	leader := newLogger(t, &entry.GrantHistorySettings{PerLock: 4, Global: 10})
	leader.grant("a", "w1")
	leader.grant("b", "w2")
	lagging := New(nil)
	data, _ := entry.EncodeFormat(&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 4, Global: 10}}, entry.LogFormat)
	applyEntry(lagging, 1, data)
	lagging.ApplyCommand(acquire("a", "w1", "s-a"), 2) // never saw b
	leader.grant("c", "w3")

	// The restore: the backup is the empty state, the current is the
	// leader's, installed at index 20.
	cur := leader.f.Image()
	img := &snapshot.Image{Header: New(nil).Image().Header}
	img.Header.Epoch, img.Header.EpochFloor, img.Header.LastToken = 1, 1, cur.Header.LastToken
	img.Header.AppliedIndex, img.Header.Term = 20, 2
	img.Void(cur, 20)
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	var streams [][]event.Event
	var digests []string
	for _, f := range []*FSM{leader.f, lagging} {
		rec := &recorder{}
		f.Observe(rec)
		if err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, rec.events)
		digests = append(digests, f.Digest())
	}
	want := []event.Event{
		{Index: 20, Type: event.Voided, Lock: "a", Holder: "w1", Token: 2},
		{Index: 20, Type: event.Voided, Lock: "b", Holder: "w2", Token: 3},
		{Index: 20, Type: event.Voided, Lock: "c", Holder: "w3", Token: 4},
		{Index: 20, Type: event.Epoch, Epoch: 1},
	}
	for i, s := range streams {
		if !reflect.DeepEqual(s, want) {
			t.Errorf("member %d reported %+v, want %+v", i, s, want)
		}
	}
	if digests[0] != digests[1] {
		t.Fatal("the members' states differ after the restore")
	}
	if g, why := lagging.GrantOf(3); why != TokenFound || g.Ended != entry.EndVoided || g.EndedIndex != 20 {
		t.Fatalf("a grant the lagging member never applied, after the restore: %+v %v", g, why)
	}
	// A member that installs a later snapshot of the restored cluster
	// reports nothing: its history starts after it.
	leader.f.ApplyCommand(acquire("d", "w", "s"), 21)
	var later bytes.Buffer
	leader.f.Image().WriteTo(&later)
	late := New(nil)
	late.ApplyCommand(acquire("a", "w1", "s-a"), 1)
	rec := &recorder{}
	late.Observe(rec)
	if err := late.Restore(io.NopCloser(bytes.NewReader(later.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 0 {
		t.Fatalf("a later snapshot reported %+v", rec.events)
	}
}

type recorder struct{ events []event.Event }

func (r *recorder) Applied(_ uint64, events []event.Event) { r.events = append(r.events, events...) }
func (r *recorder) Restored(_ uint64, _ bool, events []event.Event) {
	r.events = append(r.events, events...)
}

// goldenV2 is the state behind testdata/snapshot-v2.golden: the first
// golden's log with a grant history set before it, some of its grants
// released, the settings changed on the way, then a restore at the next
// index that voided what was held.
func goldenV2(t *testing.T) *FSM {
	l := newLogger(t, &entry.GrantHistorySettings{PerLock: 3, Global: 40})
	for _, c := range goldenHistory() {
		l.apply(c)
	}
	for i := range 4 {
		if g, ok := l.f.Lock(fmt.Sprintf("g-%02d", i)); ok {
			l.release(g)
		}
	}
	g6, _ := l.f.Lock("g-06")
	l.apply(&entry.Release{Lock: "g-06", Token: g6.Token, Lease: g6.Lease, Next: acquire("", "next", "s")})
	g7, _ := l.f.Lock("g-07")
	l.apply(&entry.Expire{Lock: "g-07", Token: g7.Token})
	l.release(l.grant("g-07", "again"))
	// Fewer grants and fewer per lock: what the new settings keep.
	l.apply(&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 2, Global: 6}})
	for range 3 {
		l.release(l.grant("x", "w"))
	}
	l.grant("g-01", "late")
	cur := l.f.Image()
	img := &snapshot.Image{Header: cur.Header}
	img.Header.Epoch, img.Header.EpochFloor = cur.Header.Epoch+1, cur.Header.Epoch+1
	img.Keys, img.Members = cur.Keys, cur.Members
	img.Header.Locks, img.Header.Requests, img.Header.Delays, img.Header.Permits = 0, 0, 0, 0
	img.Header.AppliedIndex++
	img.Void(cur, img.Header.AppliedIndex)
	var buf bytes.Buffer
	img.WriteTo(&buf)
	g := New(nil)
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	return g
}

// A version-2 snapshot of this build restores to the same state in later
// builds, which write it byte for byte. FENCER_WRITE_GOLDEN=1 rewrites the
// file (only when the format is meant to change).
func TestSnapshotV2Golden(t *testing.T) {
	f := goldenV2(t)
	checkGolden(t, f, "snapshot-v2", `"version":2,`, `"voided":{`, `"ended":"voided"`)
}

// BenchmarkHistoryAt100kLeases: 100,000 held leases with and without the
// default grant history: the heap they take, and a snapshot's write and
// restore (docs/benchmarks.md).
func BenchmarkHistoryAt100kLeases(b *testing.B) {
	for _, cfg := range []*entry.GrantHistorySettings{nil, {PerLock: entry.DefaultGrantHistoryPerLock, Global: entry.DefaultGrantHistory}} {
		name := "history=off"
		if cfg != nil {
			name = "history=default"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				f := New(nil)
				index := uint64(1)
				if cfg != nil {
					data, _ := entry.Encode(&entry.SetGrantHistory{GrantHistorySettings: *cfg})
					applyEntry(f, index, data)
				}
				for i := range 100_000 {
					index++
					f.ApplyCommand(&entry.Acquire{Lock: fmt.Sprintf("bench/lock-%06d", i), Holder: fmt.Sprintf("bench-h-%d", i%64),
						Lease: fmt.Sprintf("%032x", i), TTLMillis: 7_200_000, RequestID: fmt.Sprintf("req-%016x", i)}, index)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				var buf bytes.Buffer
				start := time.Now()
				f.View().WriteTo(&buf)
				write := time.Since(start)
				start = time.Now()
				g := New(nil)
				if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
					b.Fatal(err)
				}
				restore := time.Since(start)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "heap-MB")
				b.ReportMetric(float64(buf.Len())/1e6, "snapshot-MB")
				b.ReportMetric(write.Seconds(), "write-s")
				b.ReportMetric(restore.Seconds(), "restore-s")
				runtime.KeepAlive(f)
			}
		})
	}
}
