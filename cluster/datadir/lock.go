package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockFile is the file a process holds locked while it uses the data dir.
const LockFile = "fencer.lock"

// ErrInUse: another process (a running node, a migration, a recovery) holds
// the data dir.
var ErrInUse = errors.New("data dir is in use by another process")

// Lock is a process's hold on a data dir: a node takes it for as long as it
// runs, and the offline commands (migrate-log-store, recover) before they
// touch anything, so that neither ever works on a dir the other has open.
// The kernel drops it when the process exits, however it exits.
type Lock struct{ f *os.File }

// TryLock takes the data dir's lock, or fails at once with ErrInUse.
func TryLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (is the node still running? stop it first)", ErrInUse, dir)
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up.
func (l *Lock) Release() {
	if l != nil {
		l.f.Close() // closing the file drops the flock
	}
}
