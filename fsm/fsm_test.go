package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/requests"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

func acquire(lock, holder, lease string) *entry.Acquire {
	return &entry.Acquire{Lock: lock, Holder: holder, Lease: lease, TTLMillis: 1000}
}

func mustGrant(t *testing.T, f *FSM, cmd *entry.Acquire, index uint64) entry.Lock {
	t.Helper()
	res, ok := f.ApplyCommand(cmd, index).(*AcquireResult)
	if !ok {
		t.Fatalf("acquire %+v at %d: got %v", cmd, index, f.ApplyCommand(cmd, index))
	}
	return res.Grant
}

func TestAcquireTokenIsLogIndex(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), 7)
	if g.Token != 7 || g.Holder != "w1" || g.Lease != "s1" {
		t.Fatalf("grant = %+v, want token 7 for w1", g)
	}
	err, _ := f.ApplyCommand(acquire("a", "w2", "s2"), 8).(error)
	var held *refusal.HeldError
	if !errors.As(err, &held) || !errors.Is(err, refusal.ErrLockHeld) || held.Token != 7 || held.Holder != "w1" {
		t.Fatalf("second acquire: %v, want lock held by w1 with 7", err)
	}
	if g2 := mustGrant(t, f, acquire("b", "w2", "s3"), 9); g2.Token != 9 {
		t.Fatalf("token of another lock = %d, want 9", g2.Token)
	}
	if f.LastToken() != 9 {
		t.Fatalf("last token = %d", f.LastToken())
	}
}

func TestReleaseNeedsCurrentTokenAndLease(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), 3)
	for _, bad := range []*entry.Release{
		{Lock: "a", Token: g.Token, Lease: "wrong"},
		{Lock: "a", Token: g.Token + 1, Lease: "s1"},
		{Lock: "nope", Token: g.Token, Lease: "s1"},
	} {
		if err, _ := f.ApplyCommand(bad, 4).(error); !errors.Is(err, refusal.ErrLeaseLost) {
			t.Fatalf("release %+v: %v, want lease lost", bad, err)
		}
	}
	res, ok := f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s1"}, 5).(*ReleaseResult)
	if !ok || res.Freed.Token != 3 || res.Next != nil {
		t.Fatalf("release: %+v", res)
	}
	if _, held := f.Lock("a"); held {
		t.Fatal("lock still held after release")
	}
	if err, _ := f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s1"}, 6).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("second release: %v", err)
	}
	if g2 := mustGrant(t, f, acquire("a", "w2", "s2"), 7); g2.Token != 7 {
		t.Fatalf("regrant token %d", g2.Token)
	}
}

func TestReleaseHandsOffInSameEntry(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), 3)
	next := acquire("", "w2", "s2")
	next.RequestID = "r2"
	res := f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s1", Next: next}, 4).(*ReleaseResult)
	if res.Next == nil || res.Next.Token != 4 || res.Next.Holder != "w2" || res.Next.Name != "a" {
		t.Fatalf("handoff = %+v (err %v)", res.Next, res.NextErr)
	}
	if cur, _ := f.Lock("a"); cur.Token != 4 {
		t.Fatalf("current token %d, want 4", cur.Token)
	}
}

func TestExpireForSupersededTokenDoesNothing(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), 3)
	f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s1"}, 4)
	g2 := mustGrant(t, f, acquire("a", "w2", "s2"), 5)
	before := f.Digest()
	if err, _ := f.ApplyCommand(&entry.Expire{Lock: "a", Token: g.Token}, 6).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("stale expire: %v", err)
	}
	if f.Digest() != before {
		t.Fatal("stale expire changed state")
	}
	if cur, _ := f.Lock("a"); cur.Token != g2.Token {
		t.Fatalf("current = %d, want %d", cur.Token, g2.Token)
	}
	if _, ok := f.ApplyCommand(&entry.Expire{Lock: "a", Token: g2.Token}, 7).(*ReleaseResult); !ok {
		t.Fatal("expire of current token refused")
	}
	if _, held := f.Lock("a"); held {
		t.Fatal("still held after expire")
	}
}

func TestRequestIDNeverMintsSecondToken(t *testing.T) {
	f := New(nil)
	cmd := acquire("a", "w1", "s1")
	cmd.RequestID = "req-1"
	g := mustGrant(t, f, cmd, 3)
	retry := *cmd
	retry.Lease = "other-secret" // a retry proposed anew by a leader picks a new secret
	res := f.ApplyCommand(&retry, 9).(*AcquireResult)
	if !res.Existing || res.Grant.Token != g.Token || res.Grant.Lease != "s1" {
		t.Fatalf("retry = %+v, want the first grant", res)
	}
	f.ApplyCommand(&entry.Release{Lock: "a", Token: g.Token, Lease: "s1"}, 10)
	if err, _ := f.ApplyCommand(&retry, 11).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("retry after release: %v, want lease lost", err)
	}
	if _, held := f.Lock("a"); held {
		t.Fatal("a retry of an ended grant took the lock")
	}
}

// A request id answers only the principal that made it: another principal
// replaying holder and request id is a new request, refused while the lock
// is held like anyone's, and never handed the first grant's secret. The
// binding survives a snapshot.
func TestRequestIDIsBoundToItsPrincipal(t *testing.T) {
	f := New(nil)
	mine := &entry.Acquire{Lock: "jobs.a", Holder: "w", Lease: "secret-of-a", TTLMillis: 1000, RequestID: "0123456789abcdef", Principal: "alice"}
	g := mustGrant(t, f, mine, 3)
	if g.Principal != "alice" {
		t.Fatalf("grant %+v does not record its principal", g)
	}
	replay := *mine
	replay.Principal, replay.Lease = "bob", "secret-of-b"
	check := func(f *FSM, index uint64) {
		t.Helper()
		res := f.ApplyCommand(&replay, index)
		var held *refusal.HeldError
		if err, _ := res.(error); !errors.As(err, &held) || held.Token != g.Token {
			t.Fatalf("another principal's replay: %+v, want lock held", res)
		}
		retry := *mine
		if res, ok := f.ApplyCommand(&retry, index+1).(*AcquireResult); !ok || !res.Existing || res.Grant.Lease != "secret-of-a" {
			t.Fatalf("the principal's own retry: %+v", res)
		}
	}
	check(f, 4)
	var buf bytes.Buffer
	f.Image().WriteTo(&buf)
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	check(restored, 6)
	if l, _ := restored.Lock("jobs.a"); l.Principal != "alice" {
		t.Fatalf("restored grant %+v lost its principal", l)
	}
	if !f.RequestGranted("jobs.a", "w", mine.RequestID, "alice") || f.RequestGranted("jobs.a", "w", mine.RequestID, "bob") {
		t.Fatal("RequestGranted ignores the principal")
	}
	// Once the lock is free, the replay is a request of its own.
	f.ApplyCommand(&entry.Release{Lock: "jobs.a", Token: g.Token, Lease: "secret-of-a"}, 8)
	if res, ok := f.ApplyCommand(&replay, 9).(*AcquireResult); !ok || res.Existing || res.Grant.Token != 9 {
		t.Fatalf("replay once free: %+v", res)
	}
}

func TestRequestTableIsBounded(t *testing.T) {
	f := New(nil)
	for i := range requests.Max + 10 {
		c := acquire("a", "w", "s")
		c.RequestID = fmt.Sprint(i)
		mustGrant(t, f, c, uint64(2*i+1))
		f.ApplyCommand(&entry.Release{Lock: "a", Token: uint64(2*i + 1), Lease: "s"}, uint64(2*i+2))
	}
	if n := len(f.Image().Requests); n != requests.Max {
		t.Fatalf("request table holds %d, want %d", n, requests.Max)
	}
}

func TestPutFencing(t *testing.T) {
	f := New(nil)
	mustGrant(t, f, acquire("a", "w", "s"), 40) // tokens up to 40 are issued
	ok := func(p *entry.Put, idx uint64) {
		t.Helper()
		if _, good := f.ApplyCommand(p, idx).(*PutResult); !good {
			t.Fatalf("put %+v refused: %v", p, f.ApplyCommand(p, idx))
		}
	}
	ok(&entry.Put{Key: "k", Value: []byte("new"), Token: 34}, 41)
	err, _ := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("old"), Token: 33}, 42).(error)
	var stale *refusal.StaleError
	if !errors.As(err, &stale) || stale.LastToken != 34 {
		t.Fatalf("older token: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("replay"), Token: 34}, 43).(error); !errors.Is(err, refusal.ErrStaleToken) {
		t.Fatalf("equal token: %v", err)
	}
	if err, _ := f.ApplyCommand(&entry.Put{Key: "k2", Value: []byte("zero"), Token: 0}, 44).(error); !errors.Is(err, refusal.ErrStaleToken) {
		t.Fatalf("zero token: %v", err)
	}
	ok(&entry.Put{Key: "k", Value: []byte("newer"), Token: 35}, 45)
	if k, _ := f.Key("k"); string(k.Value) != "newer" || k.Token != 35 {
		t.Fatalf("key = %+v", k)
	}
}

func TestPutWithLockRequiresCurrentGrant(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), 10)
	if _, ok := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("x"), Token: g.Token, Lock: "a"}, 11).(*PutResult); !ok {
		t.Fatal("holder's write refused")
	}
	f.ApplyCommand(&entry.Expire{Lock: "a", Token: g.Token}, 12)
	// Nobody newer has written yet, so the token alone would pass; the lock
	// check refuses it because the lease is gone.
	err, _ := f.ApplyCommand(&entry.Put{Key: "k2", Value: []byte("x"), Token: g.Token, Lock: "a"}, 13).(error)
	// The message says it once, not "token is not the lock's current grant:
	// token 10 is not the current grant of lock "a"".
	if !errors.Is(err, refusal.ErrNotLockHolder) || err.Error() != `token 10 is not the current grant of lock "a"` {
		t.Fatalf("write after expiry: %v", err)
	}
}

func TestBumpEpochMovesTokensAboveOldEpoch(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w1", "s1"), entry.MaxIndex)
	f.ApplyCommand(&entry.BumpEpoch{Reason: "restore"}, 5)
	g2 := mustGrant(t, f, acquire("b", "w1", "s1"), 6)
	if g2.Token <= g.Token || g2.Token != 1<<entry.EpochShift|6 {
		t.Fatalf("token after bump = %d, want > %d", g2.Token, g.Token)
	}
	if err, _ := f.ApplyCommand(acquire("c", "w", "s"), entry.MaxIndex+1).(error); !errors.Is(err, refusal.ErrTokenSpaceExhausted) {
		t.Fatalf("index past epoch: %v", err)
	}
}

func TestMembers(t *testing.T) {
	f := New(nil)
	f.ApplyCommand(&entry.SetMember{Member: entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2"}}, 1)
	f.ApplyCommand(&entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}}, 2)
	if got := f.Members(); len(got) != 2 || got[0].ID != "n1" {
		t.Fatalf("members = %+v", got)
	}
	f.ApplyCommand(&entry.RemoveMember{ID: "n1"}, 3)
	if _, ok := f.Member("n1"); ok {
		t.Fatal("n1 not removed")
	}
	f.ApplyCommand(&entry.SetClusterID{ID: "first"}, 4)
	f.ApplyCommand(&entry.SetClusterID{ID: "second"}, 5)
	if f.ClusterID() != "first" {
		t.Fatalf("cluster id %q, want the first one", f.ClusterID())
	}
}

// history is a log touching every command type.
func history() []entry.Command {
	next := acquire("", "w3", "s3")
	next.RequestID = "q3"
	return []entry.Command{
		&entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}},
		acquire("a", "w1", "s1"),
		&entry.Put{Key: "k", Value: []byte("v1"), Token: 2, Lock: "a"},
		acquire("a", "w2", "s2"),
		&entry.Release{Lock: "a", Token: 2, Lease: "s1", Next: next},
		acquire("b", "w1", "s4"),
		&entry.Expire{Lock: "b", Token: 6},
		&entry.Put{Key: "k", Value: []byte("v0"), Token: 1},
		&entry.BumpEpoch{Reason: "test"},
		acquire("c", "w9", "s9"),
		&entry.RemoveMember{ID: "n1"},
		&entry.SetClusterID{ID: "c1"},
		&entry.SetClusterID{ID: "c2"},
	}
}

func replay(t *testing.T, cmds []entry.Command) (*FSM, []any) {
	t.Helper()
	f := New(nil)
	var results []any
	for i, c := range cmds {
		results = append(results, f.ApplyCommand(c, uint64(i+1)))
	}
	return f, results
}

func TestSameLogSameState(t *testing.T) {
	a, ra := replay(t, history())
	b, rb := replay(t, history())
	if a.Digest() != b.Digest() {
		t.Fatal("two FSMs fed the same log differ")
	}
	if !reflect.DeepEqual(ra, rb) {
		t.Fatalf("results differ:\n%+v\n%+v", ra, rb)
	}
	var buf1, buf2 bytes.Buffer
	a.Image().WriteTo(&buf1)
	b.Image().WriteTo(&buf2)
	if !bytes.Equal(buf1.Bytes(), buf2.Bytes()) {
		t.Fatal("snapshots of equal states differ byte for byte")
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src, _ := replay(t, history())
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	dst := New(nil)
	mustGrant(t, dst, acquire("junk", "x", "y"), 1) // restore must replace, not merge
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if src.Digest() != dst.Digest() {
		t.Fatal("restored state differs")
	}
	if !reflect.DeepEqual(src.Image(), dst.Image()) {
		t.Fatalf("images differ:\n%+v\n%+v", src.Image(), dst.Image())
	}
	if dst.AppliedIndex() != src.AppliedIndex() {
		t.Fatalf("applied %d, want %d", dst.AppliedIndex(), src.AppliedIndex())
	}
	// The idempotency table survives: a retried request gets its grant.
	g, _ := dst.Lock("a")
	retry := &entry.Acquire{Lock: "a", Holder: "w3", Lease: "other", RequestID: "q3"}
	if res, ok := dst.ApplyCommand(retry, 100).(*AcquireResult); !ok || res.Grant.Token != g.Token {
		t.Fatalf("retry after restore: %v", dst.ApplyCommand(retry, 101))
	}
}

func TestRestoreRefusesTruncatedSnapshotAndKeepsState(t *testing.T) {
	src, _ := replay(t, history())
	var buf bytes.Buffer
	src.Image().WriteTo(&buf)
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	truncated := bytes.Join(lines[:len(lines)-2], nil)
	dst, _ := replay(t, history()[:2])
	before := dst.Digest()
	if err := dst.Restore(io.NopCloser(bytes.NewReader(truncated))); err == nil {
		t.Fatal("truncated snapshot restored")
	}
	if dst.Digest() != before {
		t.Fatal("failed restore changed state")
	}
}

func TestMalformedEntryIsSkippedAlike(t *testing.T) {
	f := New(nil)
	res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(entry.CmdAcquire), '{', 'x'}})
	if err, _ := res.(error); !errors.Is(err, entry.ErrMalformedCommand) {
		t.Fatalf("malformed: %v", res)
	}
	if f.AppliedIndex() != 1 {
		t.Fatal("malformed entry did not advance the applied index")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("unknown command type did not stop the FSM")
		}
	}()
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{200, '{', '}'}})
}

func TestReadImageRefusesImpossibleRecords(t *testing.T) {
	good := `{"format":"fencer-snapshot","version":1,"epoch":0,"last_token":5,"applied_index":5,"term":1,"locks":%d,"keys":%d,"members":0,"requests":0}` + "\n"
	for name, body := range map[string]string{
		"duplicate lock":     fmt.Sprintf(good, 2, 0) + `{"lock":{"name":"a","holder":"w","token":3,"lease":"s","ttl_ms":10}}` + "\n" + `{"lock":{"name":"a","holder":"w","token":4,"lease":"s","ttl_ms":10}}` + "\n",
		"lock without token": fmt.Sprintf(good, 1, 0) + `{"lock":{"name":"a","holder":"w","token":0,"lease":"s","ttl_ms":10}}` + "\n",
		"lock without name":  fmt.Sprintf(good, 1, 0) + `{"lock":{"name":"","holder":"w","token":3,"lease":"s","ttl_ms":10}}` + "\n",
		"negative ttl":       fmt.Sprintf(good, 1, 0) + `{"lock":{"name":"a","holder":"w","token":3,"lease":"s","ttl_ms":-1}}` + "\n",
		"token above last":   fmt.Sprintf(good, 1, 0) + `{"lock":{"name":"a","holder":"w","token":9,"lease":"s","ttl_ms":10}}` + "\n",
		"duplicate key":      fmt.Sprintf(good, 0, 2) + `{"key":{"key":"k","value":null,"token":3}}` + "\n" + `{"key":{"key":"k","value":null,"token":4}}` + "\n",
	} {
		if _, err := snapshot.ReadImage(bytes.NewReader([]byte(body))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRestoreSetsAppliedIndexExactly(t *testing.T) {
	src, _ := replay(t, history()[:3])
	var buf bytes.Buffer
	src.Image().WriteTo(&buf)
	dst, _ := replay(t, history())
	if err := dst.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if dst.AppliedIndex() != 3 {
		t.Fatalf("applied index after restoring an older snapshot: %d, want 3", dst.AppliedIndex())
	}
}

// checkGolden pins a snapshot format: f's snapshot must be the golden file
// testdata/name.golden byte for byte and hold every one of wants, and the
// golden must restore to the state whose digest is testdata/name.digest.
// The restored state must write the golden again. It returns the golden
// and the state restored from it.
// FENCER_WRITE_GOLDEN=1 rewrites both files from f (then read the diff).
func checkGolden(t *testing.T, f *FSM, name string, wants ...string) ([]byte, *FSM) {
	t.Helper()
	var sink memSink
	snap, _ := f.Snapshot()
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("FENCER_WRITE_GOLDEN") == "1" {
		os.WriteFile("testdata/"+name+".golden", sink.Bytes(), 0o644)
		os.WriteFile("testdata/"+name+".digest", []byte(f.Digest()+"\n"), 0o644)
	}
	golden, err := os.ReadFile("testdata/" + name + ".golden")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile("testdata/" + name + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !bytes.Contains(golden, []byte(want)) {
			t.Fatalf("the golden file lacks %s:\n%s", want, golden)
		}
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(golden))); err != nil {
		t.Fatal(err)
	}
	if got := g.Digest(); got != strings.TrimSpace(string(digest)) {
		t.Fatalf("digest of the restored state %s, the golden's %s", got, digest)
	}
	if !bytes.Equal(sink.Bytes(), golden) {
		t.Fatalf("snapshot differs from the golden:\n%s\nwant\n%s", sink.Bytes(), golden)
	}
	var again memSink
	snap, _ = g.Snapshot()
	if err := snap.Persist(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), golden) {
		t.Fatal("the state restored from the golden is written differently")
	}
	return golden, g
}
