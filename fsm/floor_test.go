package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// restoreImage restores img into a fresh FSM through the snapshot format.
func restoreImage(t *testing.T, img *snapshot.Image) *FSM {
	t.Helper()
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	return f
}

// The way it goes wrong: a backup at T0, the old cluster goes on to T0+K,
// the restore takes the key's mark back to T0. The floor refuses T0+K (and
// any token of the old epoch, on any key, with or without Fencing-Lock)
// while a token of the new epoch writes.
func TestEpochFloorRefusesEveryTokenOfAnEarlierEpoch(t *testing.T) {
	const t0, k = 40, 25
	old := New(nil)
	mustGrant(t, old, acquire("a", "w", "s"), t0)
	if _, ok := old.ApplyCommand(&entry.Put{Key: "k", Value: []byte("at T0"), Token: t0}, t0+1).(*PutResult); !ok {
		t.Fatal("put at T0 refused")
	}
	backup := old.Image()
	// What cluster.Restore writes: epoch and floor past the backup's, no
	// held locks.
	img := &snapshot.Image{Header: backup.Header, Keys: backup.Keys}
	img.Header.Epoch, img.Header.EpochFloor = 1, 1
	img.Header.Locks, img.Header.Requests = 0, 0
	f := restoreImage(t, img)

	stale := func(p *entry.Put, wantMark uint64) {
		t.Helper()
		err, _ := f.ApplyCommand(p, t0+10).(error)
		var se *refusal.StaleError
		if !errors.As(err, &se) || !errors.Is(err, refusal.ErrStaleToken) || se.LastToken != wantMark || se.Token != p.Token {
			t.Fatalf("put %+v after restore: %v, want stale with last token %d", p, err, wantMark)
		}
		// The message says why: the token's epoch, not the mark (it read
		// "not greater than its last token 0" for a key never written).
		if msg := err.Error(); se.Floor != 1 || !strings.Contains(msg, "from epoch 0, before the restore or recovery that began epoch 1") {
			t.Fatalf("put %+v after restore: %q (floor %d), want the epoch named", p, msg, se.Floor)
		}
	}
	stale(&entry.Put{Key: "k", Value: []byte("zombie"), Token: t0 + k}, t0)
	stale(&entry.Put{Key: "new-key", Value: []byte("zombie"), Token: t0 + k}, 0)
	stale(&entry.Put{Key: "k", Value: []byte("zombie"), Token: t0 + k, Lock: "a"}, t0)
	stale(&entry.Put{Key: "k", Value: []byte("zombie"), Token: entry.MaxIndex}, t0)
	if k, _ := f.Key("k"); string(k.Value) != "at T0" {
		t.Fatalf("key after refused writes: %+v", k)
	}

	g := mustGrant(t, f, acquire("a", "w2", "s2"), t0+11)
	if entry.TokenEpoch(g.Token) != 1 {
		t.Fatalf("new grant %d not in epoch 1", g.Token)
	}
	if _, ok := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("new"), Token: g.Token, Lock: "a"}, t0+12).(*PutResult); !ok {
		t.Fatal("the new grant's write was refused")
	}

	// The floor survives a snapshot of its own.
	again := restoreImage(t, f.Image())
	if err, _ := again.ApplyCommand(&entry.Put{Key: "other", Value: []byte("zombie"), Token: t0 + k}, t0+13).(error); !errors.Is(err, refusal.ErrStaleToken) {
		t.Fatalf("after a second snapshot: %v", err)
	}
	if again.Digest() != f.Digest() {
		t.Fatal("a snapshot of a floored state does not restore to the same state")
	}
}

// A state with no floor (every log and snapshot written before it existed,
// and a restore by an older build) keeps the old rule, so replaying an
// existing log gives what it gave before.
func TestNoFloorKeepsTheMarkRule(t *testing.T) {
	f := restoreImage(t, &snapshot.Image{Header: snapshot.Header{Format: snapshot.Format, Version: snapshot.Version, Epoch: 1, LastToken: 50}})
	if _, ok := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("v"), Token: 40}, 2).(*PutResult); !ok {
		t.Fatal("put refused without a floor")
	}
	var buf bytes.Buffer
	f.Image().WriteTo(&buf)
	if strings.Contains(buf.String(), "epoch_floor") {
		t.Fatalf("a snapshot without a floor names one: %s", buf.String())
	}
}

func TestReadImageRefusesAnImpossibleFloor(t *testing.T) {
	for name, body := range map[string]string{
		"floor above epoch": `{"format":"fencer-snapshot","version":1,"epoch":1,"epoch_floor":2,"last_token":5,"applied_index":5,"term":1,"locks":0,"keys":0,"members":0,"requests":0}` + "\n",
		"lock below floor": `{"format":"fencer-snapshot","version":1,"epoch":1,"epoch_floor":1,"last_token":1099511627777,"applied_index":5,"term":1,"locks":1,"keys":0,"members":0,"requests":0}` + "\n" +
			`{"lock":{"name":"a","holder":"w","token":3,"lease":"s","ttl_ms":10}}` + "\n",
		"permit below floor": `{"format":"fencer-snapshot","version":1,"epoch":1,"epoch_floor":1,"last_token":1099511627777,"applied_index":5,"term":1,"locks":0,"keys":0,"members":0,"requests":0,"permits":1}` + "\n" +
			`{"permit":{"semaphore":"s","holder":"w","token":3,"lease":"x","ttl_ms":10,"limit":1}}` + "\n",
	} {
		if _, err := snapshot.ReadImage(strings.NewReader(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
