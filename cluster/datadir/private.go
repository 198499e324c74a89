package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The data dir holds lease secrets (in snapshots and in the log): only the
// user fencer runs as may read it, whatever the umask, and whoever created
// the dir. Every dir fencer makes in it is DirMode, every file FileMode.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// MakePrivate makes an existing data dir DirMode, saying so in the
// log when it was not, and narrows what is inside it (left by an older
// build, or by a snapshot store that makes its own modes). A dir this
// process cannot chmod (owned by another user, as a volume mounted for a
// group may be) is only warned about: the files fencer writes in it are
// private anyway.
func MakePrivate(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if old := st.Mode().Perm(); old != DirMode {
		if err := os.Chmod(dir, DirMode); err != nil {
			log.Warn("the data dir is readable by others and could not be made private; its files still are", "dir", dir, "mode", modeString(old), "err", err)
		} else {
			log.Warn("made the data dir private: it holds lease secrets", "dir", dir, "was", modeString(old), "now", modeString(DirMode))
		}
	}
	narrowed, err := makePrivate(dir, false)
	if err != nil {
		log.Warn("could not make everything in the data dir private", "dir", dir, "err", err)
	} else if narrowed > 0 {
		log.Warn("made files in the data dir private", "dir", dir, "count", narrowed)
	}
	return nil
}

// makePrivate gives every dir under root (root too, when withRoot is set)
// DirMode and every regular file FileMode, and reports how many it changed.
// Symbolic links are not followed.
func makePrivate(root string, withRoot bool) (int, error) {
	changed := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		want := FileMode
		switch {
		case d.IsDir():
			if path == root && !withRoot {
				return nil
			}
			want = DirMode
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (a snapshot reaped)
		}
		if err != nil {
			return err
		}
		if info.Mode().Perm() == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil {
			return err
		}
		changed++
		return nil
	})
	return changed, err
}

func modeString(m fs.FileMode) string { return fmt.Sprintf("%#o", m.Perm()) }

// OpenSnapshots opens the data dir's snapshot store, keeping two snapshots.
// The store keeps them in BASE/snapshots, and BASE has always been
// DATADIR/snapshots: they live in DATADIR/snapshots/snapshots.
func OpenSnapshots(dataDir string, logger hclog.Logger) (raft.SnapshotStore, error) {
	base := filepath.Join(dataDir, "snapshots")
	store, err := raft.NewFileSnapshotStoreWithLogger(base, 2, logger)
	if err != nil {
		return nil, err
	}
	// The store makes its dirs 0755.
	if _, err := makePrivate(base, true); err != nil {
		return nil, fmt.Errorf("snapshot dir: %w", err)
	}
	return privateSnapshots{FileSnapshotStore: store, dir: filepath.Join(base, "snapshots")}, nil
}

// privateSnapshots is hashicorp/raft's file snapshot store with private
// modes: the store makes each snapshot's dir 0755 and its files (meta.json,
// state.bin) 0666 less the umask, and offers no option to change that.
// Create narrows them before it returns the sink, so before a byte of state
// (the lease secrets) is written into state.bin; later writes reuse the
// files and keep their modes, and the rename that completes the snapshot
// keeps them too.
type privateSnapshots struct {
	*raft.FileSnapshotStore
	dir string // where the store keeps its snapshots
}

// Create starts a snapshot whose dir and files only this user can read.
func (s privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, err
	}
	// The sink writes into ID()+".tmp" (raft's tmpSuffix) until it is
	// closed. Should raft name it otherwise, this fails loudly rather than
	// leave a snapshot readable.
	if _, err := makePrivate(filepath.Join(s.dir, sink.ID()+".tmp"), true); err != nil {
		sink.Cancel()
		return nil, fmt.Errorf("make snapshot %s private: %w", sink.ID(), err)
	}
	return sink, nil
}
