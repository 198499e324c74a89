package logstore

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/datadir"
)

var quiet = hclog.NewNullLogger()

// newDir is a data dir with an identity and nothing else.
func newDir(t *testing.T) (string, datadir.Identity) {
	t.Helper()
	dir := t.TempDir()
	ident, err := datadir.LoadIdentity(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	return dir, ident
}

// A new dir records the kind it was created with; a dir is refused the
// other kind, with the way to convert it; a dir from before the kind was
// recorded holds bolt.
func TestChooseRecordsAndRefuses(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			dir, ident := newDir(t)
			got, err := Choose(dir, &ident, kind)
			if err != nil || got != kind {
				t.Fatalf("new dir: %v %v", got, err)
			}
			onDisk, err := datadir.ReadIdentity(dir)
			if err != nil || onDisk.LogStore != string(kind) {
				t.Fatalf("node.json records %q (%v), want %q", onDisk.LogStore, err, kind)
			}
			other := WAL
			if kind == WAL {
				other = Bolt
			}
			_, err = Choose(dir, &onDisk, other)
			if !errors.Is(err, ErrWrongKind) || !strings.Contains(err.Error(), "fencer migrate-log-store --data-dir "+dir+" --to "+string(other)) ||
				!strings.Contains(err.Error(), "--log-store "+string(kind)) {
				t.Fatalf("the other kind: %v", err)
			}
		})
	}
	t.Run("legacy", func(t *testing.T) {
		dir, ident := newDir(t)
		s, err := Open(dir, Bolt, quiet)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := Choose(dir, &ident, WAL); !errors.Is(err, ErrWrongKind) {
			t.Fatalf("a dir from before the choice, holding raft.db, started as wal: %v", err)
		}
		if got, err := Choose(dir, &ident, Bolt); err != nil || got != Bolt || ident.LogStore != "bolt" {
			t.Fatalf("as bolt: %v %v %+v", got, err, ident)
		}
	})
}

// Both kinds are log and stable stores that keep what was written across a
// reopen.
func TestOpenKeepsLogAndStableState(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			dir, _ := newDir(t)
			s, err := Open(dir, kind, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLogs([]*raft.Log{{Index: 5, Term: 2, Data: []byte("a")}, {Index: 6, Term: 3, Data: []byte("b")}}); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if _, err := os.Stat(Path(dir, kind)); err != nil || !Exists(dir) {
				t.Fatalf("store not at %s: %v", Path(dir, kind), err)
			}
			s, err = Open(dir, kind, quiet)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			var l raft.Log
			err = s.GetLog(6, &l)
			term, _ := s.GetUint64([]byte("CurrentTerm"))
			if first != 5 || last != 6 || err != nil || string(l.Data) != "b" || term != 3 {
				t.Fatalf("reopened: first %d last %d log %+v (%v) term %d", first, last, l, err, term)
			}
		})
	}
}
