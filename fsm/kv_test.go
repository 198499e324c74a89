package fsm

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// applyFormat applies cmd as the entry the leader writes for members that
// read format.
func applyFormat(t *testing.T, f *FSM, cmd entry.Command, format int, index uint64) any {
	t.Helper()
	data, err := entry.EncodeFormat(cmd, format)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
}

// A token above every token granted so far was issued to nobody; as a mark
// it would refuse every real holder (for good at 2^64-1), so it is refused.
func TestPutRefusesUnissuedToken(t *testing.T) {
	f := New(nil)
	g := mustGrant(t, f, acquire("a", "w", "s"), 5)
	for _, token := range []uint64{g.Token + 1, math.MaxUint64} {
		err, _ := f.ApplyCommand(&entry.Put{Key: "report", Value: []byte("x"), Token: token}, 6).(error)
		var unissued *refusal.UnissuedError
		if !errors.Is(err, refusal.ErrUnissuedToken) || !errors.As(err, &unissued) || unissued.Token != token {
			t.Fatalf("put with token %d, the last granted %d: %v, want unissued", token, g.Token, err)
		}
	}
	if _, ok := f.Key("report"); ok {
		t.Fatal("a refused put stored the key")
	}
	if _, ok := f.ApplyCommand(&entry.Put{Key: "report", Value: []byte("x"), Token: g.Token}, 7).(*PutResult); !ok {
		t.Fatal("the holder's own token was refused")
	}
}

// The rule belongs to the entries of LogFormatPrincipal: an entry an older
// leader wrote applies as older members apply it, so a mixed-version cluster
// never splits over it. (The leader refuses unissued tokens before it
// proposes, in every format.)
func TestUnissuedRuleOnlyInItsOwnForm(t *testing.T) {
	for format := entry.LogFormatJSON; format <= entry.LogFormat; format++ {
		f := New(nil)
		res := applyFormat(t, f, &entry.Put{Key: "k", Value: []byte("x"), Token: math.MaxUint64}, format, 1)
		_, stored := res.(*PutResult)
		if want := format < entry.LogFormatPrincipal; stored != want {
			t.Errorf("format %d: unissued put stored %v (%v), want %v", format, stored, res, want)
		}
	}
}

func TestDeleteKeyRemovesTheMark(t *testing.T) {
	f := New(nil)
	mustGrant(t, f, acquire("a", "w", "s"), 9)
	f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("v"), Token: 9}, 10)
	res, ok := f.ApplyCommand(&entry.DeleteKey{Key: "k"}, 11).(*DeleteKeyResult)
	if !ok || res.Key != "k" || res.LastToken != 9 {
		t.Fatalf("delete: %+v", res)
	}
	if _, ok := f.Key("k"); ok {
		t.Fatal("key still stored")
	}
	// Its mark went with it: an older token writes again.
	if _, ok := f.ApplyCommand(&entry.Put{Key: "k", Value: []byte("w"), Token: 3}, 12).(*PutResult); !ok {
		t.Fatal("put after delete refused")
	}
	f.ApplyCommand(&entry.DeleteKey{Key: "k"}, 13)
	if err, _ := f.ApplyCommand(&entry.DeleteKey{Key: "k"}, 14).(error); !errors.Is(err, refusal.ErrNoSuchKey) {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if c := f.Counts(); c.Keys != 0 || c.KVBytes != 0 {
		t.Fatalf("counts after deletes: %+v", c)
	}
}

// The store's byte counts follow every put, overwrite and delete, per
// writer, and a restored state counts the same.
func TestKVUsage(t *testing.T) {
	f := New(nil)
	mustGrant(t, f, acquire("a", "w", "s"), 100)
	index := uint64(100)
	put := func(key, value, principal string) {
		t.Helper()
		index++
		if _, ok := f.ApplyCommand(&entry.Put{Key: key, Value: []byte(value), Token: index - 50, Principal: principal}, index).(*PutResult); !ok {
			t.Fatalf("put %s by %s refused", key, principal)
		}
	}
	check := func(key, principal string, want KVUsage) {
		t.Helper()
		if got := f.KVUsage(key, principal); got != want {
			t.Fatalf("usage of %s for %q: %+v, want %+v", key, principal, got, want)
		}
	}
	put("a", "12345", "ci")
	put("b", "123", "ops")
	check("a", "ci", KVUsage{Keys: 2, Bytes: 8, Principal: 5, Exists: true, OldBytes: 5, OldPrincipal: "ci"})
	put("a", "1", "ci") // an overwrite counts the difference
	check("a", "ci", KVUsage{Keys: 2, Bytes: 4, Principal: 1, Exists: true, OldBytes: 1, OldPrincipal: "ci"})
	put("b", "1234567", "ci") // ops's key, now ci's
	check("b", "ops", KVUsage{Keys: 2, Bytes: 8, Principal: 0, Exists: true, OldBytes: 7, OldPrincipal: "ci"})
	check("new", "ci", KVUsage{Keys: 2, Bytes: 8, Principal: 8})

	var buf bytes.Buffer
	f.Image().WriteTo(&buf)
	g := New(nil)
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if a, b := f.KVUsage("b", "ci"), g.KVUsage("b", "ci"); a != b {
		t.Fatalf("restored usage %+v, want %+v", b, a)
	}
	index++
	f.ApplyCommand(&entry.DeleteKey{Key: "b"}, index)
	check("b", "ci", KVUsage{Keys: 1, Bytes: 1, Principal: 1})
	if c := f.Counts(); c.KVBytes != 1 || c.Keys != 1 {
		t.Fatalf("counts: %+v", c)
	}
}
