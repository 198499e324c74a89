// Package logstore is a node's Raft log and stable store on disk: bolt
// (hashicorp/raft-boltdb, the default) or wal (hashicorp/raft-wal), which
// kind the data dir's node.json records, and the offline migration from one
// kind to the other (Migrate, run by fencer migrate-log-store).
//
// Both kinds are Raft's log store and its stable store at once (the term and
// the vote): bolt keeps both in DATADIR/raft.db, wal keeps its log in
// segment files and the stable keys in a small bolt file, both under
// DATADIR/wal. A data dir holds one kind: the one node.json names, and a
// node started with the other is refused, because opening the other kind
// would start an empty log beside the real one and forget every vote and
// entry this member acknowledged.
package logstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/fencer-io/fencer/cluster/datadir"
)

// Kind is a kind of log store.
type Kind string

// The kinds of log store.
const (
	// Bolt is raft-boltdb: one bolt file, two fdatasyncs per write (data
	// pages, then the meta page). The default.
	Bolt Kind = "bolt"
	// WAL is raft-wal: append-only segment files, one fsync per write.
	WAL Kind = "wal"
)

// Default is the kind a new data dir gets unless told otherwise.
const Default = Bolt

// Kinds lists every kind, the default first.
var Kinds = []Kind{Bolt, WAL}

// ParseKind parses a kind's name; "" is the default.
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case "":
		return Default, nil
	case Bolt, WAL:
		return Kind(s), nil
	}
	return "", fmt.Errorf("log store %q: want bolt or wal", s)
}

// ErrWrongKind: the data dir holds the other kind of log store.
var ErrWrongKind = errors.New("the data dir holds another kind of log store")

// Store is a log store that is also Raft's stable store.
type Store interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// Path is where kind keeps its files in dataDir: a file for bolt, a
// directory for wal.
func Path(dataDir string, kind Kind) string {
	if kind == WAL {
		return filepath.Join(dataDir, "wal")
	}
	return filepath.Join(dataDir, "raft.db")
}

// Exists reports whether dataDir holds a log store of either kind.
func Exists(dataDir string) bool {
	for _, k := range Kinds {
		if _, err := os.Stat(Path(dataDir, k)); err == nil {
			return true
		}
	}
	return false
}

// Open opens (or creates) dataDir's log store of the given kind. Only a
// holder of the data dir's lock may call it.
func Open(dataDir string, kind Kind, logger hclog.Logger) (Store, error) {
	return openAt(Path(dataDir, kind), kind, logger)
}

func openAt(path string, kind Kind, logger hclog.Logger) (Store, error) {
	switch kind {
	case Bolt:
		s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
		if err != nil {
			return nil, fmt.Errorf("open bolt log store %s: %w", path, err)
		}
		return s, nil
	case WAL:
		if err := os.MkdirAll(path, datadir.DirMode); err != nil {
			return nil, fmt.Errorf("wal dir: %w", err)
		}
		w, err := wal.Open(path, wal.WithLogger(logger.Named("wal")),
			wal.WithSegmentFiler(segment.NewFiler(path, privateFiles{walfs.New()})))
		if err != nil {
			return nil, fmt.Errorf("open wal log store %s: %w", path, err)
		}
		// raft-wal creates its bolt file 0644 and takes no mode.
		if err := os.Chmod(filepath.Join(path, metadb.FileName), datadir.FileMode); err != nil {
			w.Close()
			return nil, err
		}
		return w, nil
	}
	return nil, fmt.Errorf("log store %q: want bolt or wal", kind)
}

// privateFiles is raft-wal's file system with the data dir's file mode:
// raft-wal creates each segment 0644, and the data dir keeps lease secrets
// (datadir.MakePrivate), so each is narrowed as it is created, before a
// byte of the log is written into it.
type privateFiles struct{ *walfs.FS }

func (p privateFiles) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := p.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(dir, name), datadir.FileMode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// boltOptions are Vault's: the freelist is rebuilt when the file is opened,
// so not syncing it is safe and saves writing it on every commit, and the
// map freelist keeps that rebuild and each allocation cheap in a large
// file. Data pages are still fsynced. The timeout only guards against a
// process that ignores the data dir's lock.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}

// Choose returns the kind of log store a node opens in dataDir, and
// records it in the data dir's identity when none is recorded yet: the
// kind of the store the dir already holds (a dir from before the kind was
// recorded holds bolt), or want for a dir without one. A dir that holds
// the other kind is refused with how to convert it.
func Choose(dataDir string, ident *datadir.Identity, want Kind) (Kind, error) {
	have, err := recorded(dataDir, *ident)
	if err != nil {
		return "", err
	}
	if have == "" {
		ident.LogStore = string(want)
		return want, ident.Save(dataDir)
	}
	if have != want {
		return "", fmt.Errorf("%w: %s holds a %s log store, and this node was started with --log-store %s. "+
			"Start it with --log-store %s, or convert the dir while the node is stopped: "+
			"fencer migrate-log-store --data-dir %s --to %s (or remove the member, empty its data dir and let it rejoin; see docs/operations.md)",
			ErrWrongKind, dataDir, have, want, have, dataDir, want)
	}
	if ident.LogStore == "" {
		ident.LogStore = string(have)
		return have, ident.Save(dataDir)
	}
	return have, nil
}

// recorded is the kind of log store the dir holds: the one its identity
// names, else (a dir from before the kind was recorded) the one whose files
// it has, else "" (none yet).
func recorded(dataDir string, ident datadir.Identity) (Kind, error) {
	if ident.LogStore != "" {
		k := Kind(ident.LogStore)
		if k != Bolt && k != WAL {
			return "", fmt.Errorf("%s records log store %q, which this build does not know", filepath.Join(dataDir, datadir.IdentityFile), ident.LogStore)
		}
		return k, nil
	}
	for _, k := range Kinds {
		if _, err := os.Stat(Path(dataDir, k)); err == nil {
			return k, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", nil
}

// OpenExisting opens the log store dataDir holds, of the kind its identity
// records, for the offline commands (recover). It refuses a dir that holds
// none rather than create one.
func OpenExisting(dataDir string, ident datadir.Identity, logger hclog.Logger) (Store, Kind, error) {
	kind, err := recorded(dataDir, ident)
	if err != nil {
		return nil, "", err
	}
	if kind == "" {
		return nil, "", fmt.Errorf("data dir %s holds no log store", dataDir)
	}
	if _, err := os.Stat(Path(dataDir, kind)); err != nil {
		return nil, "", fmt.Errorf("data dir %s records a %s log store, but: %w", dataDir, kind, err)
	}
	s, err := Open(dataDir, kind, logger)
	return s, kind, err
}
