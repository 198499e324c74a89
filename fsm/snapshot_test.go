package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/requests"
)

// goldenHistory is the log behind testdata/snapshot-v1.golden, which was
// written by the fencer before locks were stored as lockEntry and snapshots
// streamed from a View (commit 2ed2429).
func goldenHistory() []entry.Command {
	cmds := history()
	for i := range 20 {
		cmds = append(cmds, &entry.Acquire{Lock: fmt.Sprintf("g-%02d", i), Holder: fmt.Sprintf("h%d", i%3),
			Lease: fmt.Sprintf("%032x", i), TTLMillis: int64(1000 + i), RequestID: fmt.Sprintf("req-%d", i), NowMillis: int64(1700000000000 + i)})
	}
	return append(cmds, &entry.Release{Lock: "g-03", Token: 17, Lease: fmt.Sprintf("%032x", 3)})
}

// A snapshot (or backup) written by the earlier binary restores to the
// same state, and today's writer produces it byte for byte.
func TestSnapshotFromEarlierBinaryRestores(t *testing.T) {
	golden, err := os.ReadFile("testdata/snapshot-v1.golden")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile("testdata/snapshot-v1.digest")
	if err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(golden))); err != nil {
		t.Fatal(err)
	}
	if got := f.Digest(); got != strings.TrimSpace(string(digest)) {
		t.Fatalf("digest of the restored state %s, the earlier binary's %s", got, digest)
	}
	replayed, _ := replay(t, goldenHistory())
	for name, src := range map[string]*FSM{"restored": f, "replayed": replayed} {
		var sink memSink
		snap, _ := src.Snapshot()
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.Bytes(), golden) {
			t.Fatalf("%s: snapshot differs from the earlier binary's:\n%s\nwant\n%s", name, sink.Bytes(), golden)
		}
	}
	// The restored request table still answers retries.
	g, ok := f.Lock("g-05")
	if !ok {
		t.Fatal("g-05 not held after restore")
	}
	retry := &entry.Acquire{Lock: "g-05", Holder: "h2", Lease: "x", TTLMillis: 5, RequestID: "req-5"}
	if res, ok := f.ApplyCommand(retry, 100).(*AcquireResult); !ok || !res.Existing || res.Grant != g {
		t.Fatalf("retry after restore: %+v", res)
	}
}

// A snapshot is of the moment it was taken, whatever is applied while it is
// being written out: grants, releases, request ids evicted, keys replaced.
func TestSnapshotIsUnaffectedByLaterApplies(t *testing.T) {
	f := New(nil)
	index := uint64(0)
	next := func() uint64 { index++; return index }
	for i := range 50 {
		mustGrant(t, f, &entry.Acquire{Lock: fmt.Sprintf("l%02d", i), Holder: "h", Lease: "s", TTLMillis: 10, RequestID: fmt.Sprint(i)}, next())
	}
	f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("v1"), Token: 3}, next())
	var want bytes.Buffer
	f.Image().WriteTo(&want)
	snap, _ := f.Snapshot()
	view := f.View()

	for i := range 50 {
		l, _ := f.Lock(fmt.Sprintf("l%02d", i))
		f.ApplyCommand(&entry.Release{Lock: l.Name, Token: l.Token, Lease: "s"}, next())
	}
	for i := range requests.Max + 10 { // evicts every request id the snapshot saw
		mustGrant(t, f, &entry.Acquire{Lock: fmt.Sprintf("m%d", i), Holder: "h", Lease: "s", TTLMillis: 10, RequestID: "r"}, next())
	}
	f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("v2"), Token: 1 << 30}, next())

	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	view.WriteTo(&got)
	for name, b := range map[string][]byte{"persist": sink.Bytes(), "view": got.Bytes()} {
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("%s: later applies changed the snapshot", name)
		}
	}
}

func TestLocksAtIsSortedAndMatchesLocks(t *testing.T) {
	f, _ := replay(t, goldenHistory())
	var each []entry.Lock
	_, seq := f.LocksAt()
	for l := range seq {
		each = append(each, l)
	}
	locks := f.Locks()
	if len(each) != len(locks) || len(locks) != 22 {
		t.Fatalf("LocksAt gave %d, Locks %d", len(each), len(locks))
	}
	for i := range locks {
		if each[i] != locks[i] || i > 0 && locks[i-1].Name >= locks[i].Name {
			t.Fatalf("lock %d: %+v / %+v", i, each[i], locks[i])
		}
	}
}
