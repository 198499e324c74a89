package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// fuzzBase returns an FSM with some of everything in it, so that fuzzed
// commands and snapshots meet held locks, fenced keys, members and request
// ids rather than an empty map. Index 10 is the last entry applied.
func fuzzBase(t testing.TB) *FSM {
	t.Helper()
	f := New(nil)
	cmds := []entry.Command{
		&entry.SetClusterID{ID: "c1"},
		&entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "127.0.0.1:8001", HTTPAddr: "127.0.0.1:7001"}},
		&entry.Acquire{Lock: "a", Holder: "w1", Lease: strings.Repeat("a", 32), TTLMillis: 1000, RequestID: "r1"},
		&entry.Acquire{Lock: "b", Holder: "w2", Lease: strings.Repeat("b", 32), TTLMillis: 1000},
		&entry.Put{Key: "k", Value: []byte("v"), Token: 3},
		&entry.Release{Lock: "b", Token: 8, Lease: strings.Repeat("b", 32)},
	}
	for i, c := range cmds {
		if err, ok := f.ApplyCommand(c, uint64(i+5)).(error); ok {
			t.Fatalf("base command %d (%T): %v", i, c, err)
		}
	}
	return f
}

// applyEntry applies data as the committed entry at index and reports the
// panic, if any, instead of crashing the test.
func applyEntry(f *FSM, index uint64, data []byte) (result any, panicked any) {
	defer func() { panicked = recover() }()
	return f.Apply(&raft.Log{Index: index, Term: 2, Type: raft.LogCommand, Data: data}), nil
}

// roundTrip snapshots f and restores the snapshot into a fresh FSM: whatever
// state the log can reach must survive a snapshot.
func roundTrip(t *testing.T, f *FSM) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := f.Image().WriteTo(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatalf("a reachable state does not restore: %v\n%s", err, buf.Bytes())
	}
	if g.Digest() != f.Digest() {
		t.Fatalf("restored state differs from the snapshotted one")
	}
}

// FuzzDecode feeds arbitrary bytes to Decode and, as a committed entry, to
// Apply. The documented outcomes are the only ones allowed: a known type with
// a bad payload is ErrMalformedCommand and changes nothing; an unknown type
// byte is *UnknownCommandError and Apply panics on purpose (the node stops
// rather than diverge); everything else decodes to a command that re-encodes
// to itself, applies deterministically, and leaves a state that snapshots.
func FuzzDecode(f *testing.F) {
	for _, c := range []entry.Command{
		&entry.Acquire{Lock: "a", Holder: "w", Lease: strings.Repeat("c", 32), TTLMillis: 500, RequestID: "r1"},
		&entry.Release{Lock: "a", Token: 7, Lease: strings.Repeat("a", 32), Next: &entry.Acquire{Holder: "w2", Lease: "l2", TTLMillis: 9}},
		&entry.Expire{Lock: "a", Token: 7},
		&entry.Put{Key: "k", Value: []byte{0, 1, 2}, Token: 99, Lock: "a"},
		&entry.SetMember{Member: entry.Member{ID: "n2", RaftAddr: "r", HTTPAddr: "h", Incarnation: "i"}},
		&entry.RemoveMember{ID: "n1"},
		&entry.BumpEpoch{Reason: "restore"},
		&entry.SetClusterID{ID: "c2"},
	} {
		data, err := entry.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// The JSON entries of the lock cycle that builds before the binary
	// types wrote, and the forms that carry a principal.
	for _, c := range []entry.Command{
		&entry.Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", NowMillis: 1_790_000_000_000},
		&entry.Release{Lock: "a", Token: 7, Lease: "l", Next: &entry.Acquire{Lock: "a", Holder: "w2", Lease: strings.Repeat("b", 32), TTLMillis: 9000, RequestID: "r2"}},
		&entry.Expire{Lock: "a", Token: 1<<63 + 5},
		&entry.Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a"},
	} {
		payload, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{byte(c.Type())}, payload...))
	}
	for _, c := range []entry.Command{
		&entry.Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", Principal: "ci"},
		&entry.Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a", Principal: "ci"},
	} {
		data, err := entry.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(append([]byte{byte(entry.CmdDeleteKey)}, `{"key":"k"}`...))
	// A put above the last token, in the form that refuses it and in the
	// one that does not.
	for format := entry.LogFormatBinary; format <= entry.LogFormat; format++ {
		data, _ := entry.EncodeFormat(&entry.Put{Key: "k", Value: []byte("x"), Token: 1 << 62}, format)
		f.Add(data)
	}
	// Every row of the commands table in each of its forms, so that a new
	// command is fuzzed without a seed of its own.
	for _, typ := range entry.Types() {
		for format := entry.LogFormatJSON; format <= entry.LogFormat; format++ {
			data, err := entry.EncodeFormat(entry.New(typ), format)
			if errors.Is(err, entry.ErrFormatTooOld) {
				continue
			}
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{byte(entry.CmdAcquire)})
	f.Add([]byte{byte(entry.CmdReleaseBinary), 1, 'a', 7, 0, 2})
	f.Add([]byte{byte(entry.CmdPut), 'n', 'u', 'l', 'l'})
	f.Add([]byte{0, '{', '}'})
	f.Add([]byte{200, '{', '}'})

	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := entry.Decode(data)
		var unknown *entry.UnknownCommandError
		switch {
		case errors.As(err, &unknown):
			if len(data) == 0 || unknown.Type != entry.CommandType(data[0]) {
				t.Fatalf("unknown type %d for entry %q", unknown.Type, data)
			}
		case err != nil:
			if !errors.Is(err, entry.ErrMalformedCommand) {
				t.Fatalf("decode error is neither malformed nor unknown: %v", err)
			}
		default:
			if cmd.Type() != entry.CommandType(data[0]).Logical() {
				t.Fatalf("type byte %d decoded as %s", data[0], cmd.Type())
			}
			// Encoding is canonical: what a decoded command encodes to
			// decodes to a command that encodes to the same bytes (a JSON
			// entry of a lock-cycle command comes back in binary).
			again, err := entry.Encode(cmd)
			if err != nil {
				t.Fatalf("decoded command does not encode: %v", err)
			}
			cmd2, err := entry.Decode(again)
			if err != nil {
				t.Fatalf("re-encoded command does not decode: %v", err)
			}
			again2, err := entry.Encode(cmd2)
			if err != nil || !bytes.Equal(again, again2) {
				t.Fatalf("re-encoded command differs: %+v vs %+v (%v)", cmd, cmd2, err)
			}
		}

		a, b := fuzzBase(t), fuzzBase(t)
		before := a.Digest()
		res, p := applyEntry(a, 20, data)
		_, p2 := applyEntry(b, 20, data)
		if (p == nil) != (p2 == nil) {
			t.Fatal("the same entry panicked on one replica only")
		}
		if p != nil {
			if unknown == nil {
				t.Fatalf("Apply panicked on a known type: %v", p)
			}
			return
		}
		if unknown != nil {
			t.Fatal("an entry of unknown type was applied instead of stopping the node")
		}
		if a.Digest() != b.Digest() {
			t.Fatal("the same entry left two replicas in different states")
		}
		if a.AppliedIndex() != 20 {
			t.Fatalf("applied index %d after entry 20", a.AppliedIndex())
		}
		if err != nil {
			if got, _ := res.(error); !errors.Is(got, entry.ErrMalformedCommand) {
				t.Fatalf("malformed entry applied with result %v", res)
			}
			if a.Digest() != before {
				t.Fatal("a malformed entry changed the state")
			}
		}
		roundTrip(t, a)
	})
}

// FuzzRestore feeds arbitrary bytes to Restore. It never panics; a refused
// snapshot leaves state and applied index exactly as they were; an accepted
// one is a state that itself snapshots and restores to the same digest.
func FuzzRestore(f *testing.F) {
	base := New(nil)
	var buf bytes.Buffer
	base.Image().WriteTo(&buf)
	f.Add(buf.Bytes()) // empty state
	full := fuzzBase(f)
	buf.Reset()
	full.Image().WriteTo(&buf)
	f.Add(buf.Bytes())
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	f.Add(bytes.Join(lines[:len(lines)-2], nil)) // truncated
	f.Add([]byte(`{"format":"fencer-snapshot","version":1,"epoch":0,"last_token":1,"applied_index":1,"term":1,"locks":1,"keys":0,"members":0,"requests":0}` + "\n" +
		`{"lock":{"name":"a","holder":"h","token":2,"lease":"x","ttl_ms":1}}` + "\n")) // token above last token
	f.Add([]byte(`{"format":"fencer-snapshot","version":2}`))
	if golden, err := os.ReadFile("testdata/snapshot-v2.golden"); err == nil {
		f.Add(golden) // a grant history and a restore's voided grants
	}
	if golden, err := os.ReadFile("testdata/snapshot-v3.golden"); err == nil {
		f.Add(golden) // permits in the grant history
	}
	if golden, err := os.ReadFile("testdata/snapshot-v5.golden"); err == nil {
		f.Add(golden) // sessions and the grants under them
	}
	f.Add([]byte(`{"format":"fencer-snapshot","version":1}` + "\n{}\n"))
	f.Add([]byte(`not json`))

	f.Fuzz(func(t *testing.T, data []byte) {
		g := fuzzBase(t)
		digest, applied := g.Digest(), g.AppliedIndex()
		image := g.Image()
		err := g.Restore(io.NopCloser(bytes.NewReader(data)))
		if err != nil {
			if g.Digest() != digest || g.AppliedIndex() != applied || !reflect.DeepEqual(g.Image(), image) {
				t.Fatalf("refused snapshot (%v) changed the state", err)
			}
			return
		}
		_, readErr := snapshot.ReadImage(bytes.NewReader(data))
		if readErr != nil {
			t.Fatalf("Restore accepted what ReadImage refuses: %v", readErr)
		}
		roundTrip(t, g)
	})
}

// TestFuzzBaseIsConsistent guards the fuzz fixtures themselves.
func TestFuzzBaseIsConsistent(t *testing.T) {
	f := fuzzBase(t)
	if _, ok := f.Lock("a"); !ok {
		t.Fatal("lock a not held")
	}
	if _, ok := f.Lock("b"); ok {
		t.Fatal("lock b still held")
	}
	if f.AppliedIndex() != 10 {
		t.Fatalf("applied %d, want 10", f.AppliedIndex())
	}
	roundTrip(t, f)
}

// FuzzEpochs checks the epoch rules of restores and recoveries on any
// numbers: an accepted move lands above every epoch it must pass and never
// beyond LastEpoch; a refusal is ErrNoEpochLeft (or, for a recovery, a zero
// bump); and a backup header passes CheckBackupHeader only if a restore of
// it onto a fresh cluster is accepted and its tokens are of its epoch.
func FuzzEpochs(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(0), uint64(7), uint64(3))
	f.Add(uint64(entry.LastEpoch), uint64(0), uint64(entry.LastEpoch), uint64(0), uint64(entry.MaxIndex))
	f.Add(uint64(1<<64-1), uint64(1<<64-1), uint64(1<<64-1), uint64(1<<64-1), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, backup, current, minEpoch, lastToken, applied uint64) {
		if e, err := snapshot.RestoreEpoch(backup, current, minEpoch); err == nil {
			if e > entry.LastEpoch || e <= backup || e <= current || e < minEpoch {
				t.Fatalf("restore of %d onto %d, min %d: epoch %d", backup, current, minEpoch, e)
			}
		} else if !errors.Is(err, snapshot.ErrNoEpochLeft) {
			t.Fatalf("restore refused with %v", err)
		}
		if e, err := snapshot.RecoveryEpoch(current, minEpoch); err == nil {
			if e > entry.LastEpoch || e <= current || e-current != minEpoch {
				t.Fatalf("recovery of %d by %d: epoch %d", current, minEpoch, e)
			}
		} else if minEpoch != 0 && !errors.Is(err, snapshot.ErrNoEpochLeft) {
			t.Fatalf("recovery refused with %v", err)
		}
		h := snapshot.Header{Epoch: backup, LastToken: lastToken, AppliedIndex: applied}
		if snapshot.CheckBackupHeader(h) == nil {
			if _, err := snapshot.RestoreEpoch(backup, 0, 0); err != nil {
				t.Fatalf("header %+v passes, its restore does not: %v", h, err)
			}
			if entry.TokenEpoch(lastToken) > backup || applied >= entry.MaxIndex {
				t.Fatalf("header %+v passes", h)
			}
		}
	})
}
