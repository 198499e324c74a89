package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/datadir"
)

var stableKeyNames = []string{"CurrentTerm", "LastVoteCand", "LastVoteTerm"}

// fill writes a log of n entries from index first (data of every size up
// to a few KiB, some with extensions, each with its append time) and
// raft's three stable keys into a data dir of the given kind, and returns
// an in-memory copy of what it wrote. The data dir has a snapshot file too.
func fill(t *testing.T, kind Kind, first uint64, n int) (string, *raft.InmemStore) {
	t.Helper()
	dir, ident := newDir(t)
	if _, err := Choose(dir, &ident, kind); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, kind, quiet)
	if err != nil {
		t.Fatal(err)
	}
	want := raft.NewInmemStore()
	base := time.Date(2026, 12, 1, 3, 0, 0, 123456789, time.UTC)
	var logs []*raft.Log
	for i := range n {
		l := &raft.Log{Index: first + uint64(i), Term: 3 + uint64(i)/500, Type: raft.LogCommand,
			Data: []byte(strings.Repeat(fmt.Sprintf("entry-%d;", i), i%400)), AppendedAt: base.Add(time.Duration(i) * time.Millisecond)}
		if i%7 == 0 {
			l.Extensions = []byte{byte(i), 0, 1}
		}
		if i == 0 {
			l.Type = raft.LogConfiguration
		}
		logs = append(logs, l)
		if len(logs) == 100 || i == n-1 {
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := want.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			logs = nil
		}
	}
	for _, st := range []raft.StableStore{s, want} {
		if err := st.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			t.Fatal(err)
		}
		if err := st.SetUint64([]byte("LastVoteTerm"), 8); err != nil {
			t.Fatal(err)
		}
		if err := st.Set([]byte("LastVoteCand"), []byte("127.0.0.1:8002")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snapshots", "snapshots", "3-100-1")
	if err := os.MkdirAll(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "state.bin"), []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// startable checks what a node starting on dir would find: node.json names
// one kind, a store of that kind is there, and it holds exactly want. It
// returns the kind.
func startable(t *testing.T, dir string, want *raft.InmemStore) Kind {
	t.Helper()
	ident, err := datadir.ReadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	kind := Kind(ident.LogStore)
	if got, err := Choose(dir, &ident, kind); err != nil || got != kind {
		t.Fatalf("node.json names %q: %v %v", kind, got, err)
	}
	s, err := Open(dir, kind, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := compareStores(s, want, stableKeyNames); err != nil {
		t.Fatalf("the %s store differs from what was written: %v", kind, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "snapshots", "snapshots", "3-100-1", "state.bin")); err != nil || string(data) != "snapshot" {
		t.Fatalf("snapshot: %q %v", data, err)
	}
	return kind
}

// A migration copies every entry and stable key, keeps the snapshots and
// leaves one store, of the new kind, named in node.json; and back again.
func TestMigrateBothWays(t *testing.T) {
	dir, want := fill(t, Bolt, 1000, 3000)
	for _, to := range []Kind{WAL, Bolt} {
		res, err := Migrate(dir, to, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || res.From == to || res.To != to || res.First != 1000 || res.Last != 3999 || res.StableKeys != 3 {
			t.Fatalf("to %s: %+v", to, res)
		}
		if got := startable(t, dir, want); got != to {
			t.Fatalf("after the migration to %s node.json names %s", to, got)
		}
		if _, err := os.Stat(Path(dir, otherKind(to))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the old store is still there: %v", err)
		}
		if res, err := Migrate(dir, to, quiet); err != nil || res.Changed {
			t.Fatalf("again to %s: %+v %v", to, res, err)
		}
	}
}

// A crash after any step of a migration, either way, leaves a dir that
// starts on one kind holding the whole log; a new run completes it.
func TestMigrateSurvivesACrashAtEveryStep(t *testing.T) {
	for _, from := range Kinds {
		to := otherKind(from)
		for k := 0; ; k++ {
			dir, want := fill(t, from, 50, 300)
			m, err := newMigration(dir, to, quiet)
			if err != nil {
				t.Fatal(err)
			}
			steps := m.steps()
			if k == len(steps) {
				break
			}
			for _, s := range steps[:k] {
				if err := s.run(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s → %s, crash after %d steps: starts as %s", from, to, k, startable(t, dir, want))
			if _, err := Migrate(dir, to, quiet); err != nil {
				t.Fatalf("%s → %s after a crash after %d steps: %v", from, to, k, err)
			}
			if got := startable(t, dir, want); got != to {
				t.Fatalf("the completed migration left %s", got)
			}
		}
	}
}

// A migration refuses a dir a running node holds, a stable key it cannot
// copy faithfully, and a dir that is not a data dir; each leaves the dir
// as it was.
func TestMigrateRefuses(t *testing.T) {
	dir, want := fill(t, Bolt, 1, 20)
	lock, err := datadir.TryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(dir, WAL, quiet); !errors.Is(err, datadir.ErrInUse) {
		t.Fatalf("a locked dir: %v", err)
	}
	lock.Release()

	s, err := Open(dir, Bolt, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("SomethingNew"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Migrate(dir, WAL, quiet); err == nil || !strings.Contains(err.Error(), `"SomethingNew"`) {
		t.Fatalf("an unknown stable key: %v", err)
	}
	if got := startable(t, dir, want); got != Bolt {
		t.Fatalf("after a refused migration: %s", got)
	}
	if _, err := Migrate(t.TempDir(), WAL, quiet); err == nil || !strings.Contains(err.Error(), "not a fencer data dir") {
		t.Fatalf("an empty dir: %v", err)
	}
}
