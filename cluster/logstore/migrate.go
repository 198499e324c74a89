package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/fencer-io/fencer/cluster/datadir"
)

// Migrate converts a stopped node's data dir to a log store of kind to: it
// copies every log entry and every stable key (the term and the vote) into
// a new store beside the old one, reads both back and compares them entry
// by entry and key by key, makes the new store durable and moves it into
// place, and only then names the new kind in node.json. That write is the
// switch: a crash before it leaves the dir on the old kind, whole; a crash
// after it leaves the new one, whole, and at worst the old store's files,
// which the next run removes. Snapshots are not touched: both kinds share
// the data dir's snapshot store. A dir that already holds kind to is left
// as it is, bar the leftovers of an interrupted migration.
func Migrate(dataDir string, to Kind, logger hclog.Logger) (MigrateResult, error) {
	if to != Bolt && to != WAL {
		return MigrateResult{}, fmt.Errorf("log store %q: want bolt or wal", to)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	lock, err := datadir.TryLock(dataDir)
	if err != nil {
		return MigrateResult{}, err
	}
	defer lock.Release()
	m, err := newMigration(dataDir, to, logger)
	if err != nil {
		return MigrateResult{}, err
	}
	for _, s := range m.steps() {
		if err := s.run(); err != nil {
			return m.res, fmt.Errorf("migrate %s from %s to %s: %s: %w", dataDir, m.res.From, to, s.name, err)
		}
	}
	return m.res, nil
}

// MigrateResult says what a migration did.
type MigrateResult struct {
	From, To Kind
	// Changed is false when the dir already held To.
	Changed bool
	// First and Last are the log's index range, both 0 for an empty log;
	// every entry between them was copied and compared.
	First, Last uint64
	// StableKeys is how many stable keys were copied and compared.
	StableKeys int
}

// The stable keys hashicorp/raft writes (raft.go: keyCurrentTerm,
// keyLastVoteTerm, keyLastVoteCand), by how it writes them. The kinds
// encode integers differently (bolt big-endian, wal little-endian), so a
// key is copied through the interface it was written with, and one that is
// in neither list cannot be copied faithfully: the migration refuses it.
var (
	uint64Keys = []string{"CurrentTerm", "LastVoteTerm"}
	bytesKeys  = []string{"LastVoteCand"}
)

// migration is one run of Migrate, as steps that tests can stop after any
// of, as a crash would.
type migration struct {
	dir   string
	ident datadir.Identity
	log   hclog.Logger
	res   MigrateResult
	keys  []string // the source's stable keys
}

type step struct {
	name string
	run  func() error
}

func newMigration(dataDir string, to Kind, logger hclog.Logger) (*migration, error) {
	ident, err := datadir.ReadIdentity(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a fencer data dir (it has no %s)", dataDir, datadir.IdentityFile)
	}
	if err != nil {
		return nil, err
	}
	from, err := recorded(dataDir, ident)
	if err != nil {
		return nil, err
	}
	return &migration{dir: dataDir, ident: ident, log: logger, res: MigrateResult{From: from, To: to}}, nil
}

// staging is where the new store is written before it is moved into place.
func (m *migration) staging() string { return Path(m.dir, m.res.To) + ".migrating" }

func (m *migration) steps() []step {
	if m.res.From == m.res.To {
		return []step{{"clean up", m.clearOther}}
	}
	m.res.Changed = true
	if m.res.From == "" {
		// No store yet: nothing to copy, the dir only records the kind.
		return []step{{"clear", m.clear}, {"switch", m.switchKind}}
	}
	return []step{
		{"clear", m.clear},
		{"copy", m.copy},
		{"verify", m.verify},
		{"sync", m.sync},
		{"install", m.install},
		{"switch", m.switchKind},
		{"remove the old store", m.removeOld},
	}
}

// clear removes what an interrupted migration to the same kind left: the
// staging copy, and a copy already moved into place that node.json does
// not name yet.
func (m *migration) clear() error {
	for _, p := range []string{m.staging(), Path(m.dir, m.res.To)} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return datadir.SyncDir(m.dir)
}

// clearOther removes, from a dir that already holds the wanted kind, what
// a migration interrupted after its switch (or before it, the other way)
// left: node.json names the kind in use, so the other's files are stale.
func (m *migration) clearOther() error {
	other := otherKind(m.res.To)
	for _, p := range []string{Path(m.dir, other), Path(m.dir, other) + ".migrating", m.staging()} {
		if _, err := os.Stat(p); err == nil {
			m.log.Info("removing the leftover of an interrupted migration", "path", p)
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if m.ident.LogStore == "" {
		// A dir from before the kind was recorded: record it.
		m.ident.LogStore = string(m.res.To)
		return m.ident.Save(m.dir)
	}
	return datadir.SyncDir(m.dir)
}

func otherKind(k Kind) Kind {
	if k == WAL {
		return Bolt
	}
	return WAL
}

// copy writes the new store at the staging path: every log entry, in
// batches, and every stable key.
func (m *migration) copy() error {
	keys, err := stableKeys(Path(m.dir, m.res.From), m.res.From)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !slices.Contains(uint64Keys, k) && !slices.Contains(bytesKeys, k) {
			return fmt.Errorf("the stable store holds key %q, which this build does not know how to copy; nothing was changed", k)
		}
	}
	m.keys = keys
	src, err := Open(m.dir, m.res.From, m.log)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openAt(m.staging(), m.res.To, m.log)
	if err != nil {
		return err
	}
	if err := copyStore(dst, src, keys, &m.res); err != nil {
		dst.Close()
		return err
	}
	m.log.Info("copied the log", "first", m.res.First, "last", m.res.Last, "stable_keys", len(keys))
	return dst.Close()
}

// Batches of the copy: up to this many entries or bytes of entry data.
const (
	copyBatchEntries = 1024
	copyBatchBytes   = 4 << 20
)

func copyStore(dst, src Store, keys []string, res *MigrateResult) error {
	first, last, err := bounds(src)
	if err != nil {
		return err
	}
	res.First, res.Last = first, last
	var batch []*raft.Log
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.StoreLogs(batch); err != nil {
			return fmt.Errorf("write entries %d..%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
		}
		batch, size = batch[:0], 0
		return nil
	}
	for i := first; i <= last && last > 0; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return fmt.Errorf("read entry %d of %d..%d: %w", i, first, last, err)
		}
		batch = append(batch, l)
		size += len(l.Data) + len(l.Extensions)
		if len(batch) >= copyBatchEntries || size >= copyBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, k := range keys {
		if slices.Contains(uint64Keys, k) {
			v, err := src.GetUint64([]byte(k))
			if err != nil {
				return fmt.Errorf("read stable key %s: %w", k, err)
			}
			if err := dst.SetUint64([]byte(k), v); err != nil {
				return fmt.Errorf("write stable key %s: %w", k, err)
			}
			continue
		}
		v, err := src.Get([]byte(k))
		if err != nil {
			return fmt.Errorf("read stable key %s: %w", k, err)
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return fmt.Errorf("write stable key %s: %w", k, err)
		}
	}
	res.StableKeys = len(keys)
	return nil
}

// bounds is a store's first and last index, both 0 when it is empty.
func bounds(s raft.LogStore) (first, last uint64, err error) {
	if first, err = s.FirstIndex(); err != nil {
		return 0, 0, err
	}
	if last, err = s.LastIndex(); err != nil {
		return 0, 0, err
	}
	if last == 0 {
		first = 0
	}
	return first, last, nil
}

// verify reopens the old store and the new one and compares them: the same
// index range, every entry equal, the same stable keys with equal values.
func (m *migration) verify() error {
	newKeys, err := stableKeys(m.staging(), m.res.To)
	if err != nil {
		return err
	}
	if !slices.Equal(newKeys, m.keys) {
		return fmt.Errorf("the new store has stable keys %q, the old one %q", newKeys, m.keys)
	}
	src, err := Open(m.dir, m.res.From, m.log)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openAt(m.staging(), m.res.To, m.log)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := compareStores(dst, src, m.keys); err != nil {
		return fmt.Errorf("the copy differs from the original, nothing was changed: %w", err)
	}
	m.log.Info("verified the copy", "entries", entries(m.res), "stable_keys", len(m.keys))
	return nil
}

func entries(r MigrateResult) uint64 {
	if r.Last == 0 {
		return 0
	}
	return r.Last - r.First + 1
}

// logAndStable is what compareStores reads.
type logAndStable interface {
	raft.LogStore
	raft.StableStore
}

// compareStores reports the first difference between two stores.
func compareStores(a, b logAndStable, keys []string) error {
	af, al, err := bounds(a)
	if err != nil {
		return err
	}
	bf, bl, err := bounds(b)
	if err != nil {
		return err
	}
	if af != bf || al != bl {
		return fmt.Errorf("index range %d..%d, want %d..%d", af, al, bf, bl)
	}
	for i := bf; i <= bl && bl > 0; i++ {
		var x, y raft.Log
		if err := a.GetLog(i, &x); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if err := b.GetLog(i, &y); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if !sameEntry(x, y) {
			return fmt.Errorf("entry %d differs: %+v, want %+v", i, x, y)
		}
	}
	for _, k := range keys {
		if slices.Contains(uint64Keys, k) {
			x, errX := a.GetUint64([]byte(k))
			y, errY := b.GetUint64([]byte(k))
			if errX != nil || errY != nil || x != y {
				return fmt.Errorf("stable key %s: %d (%v), want %d (%v)", k, x, errX, y, errY)
			}
			continue
		}
		x, errX := a.Get([]byte(k))
		y, errY := b.Get([]byte(k))
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			return fmt.Errorf("stable key %s: %q (%v), want %q (%v)", k, x, errX, y, errY)
		}
	}
	return nil
}

func sameEntry(x, y raft.Log) bool {
	return x.Index == y.Index && x.Term == y.Term && x.Type == y.Type &&
		bytes.Equal(x.Data, y.Data) && bytes.Equal(x.Extensions, y.Extensions) && x.AppendedAt.Equal(y.AppendedAt)
}

// stableKeys lists the stable keys of a closed store at path, sorted, by
// reading its bolt file: the StableStore interface cannot list them.
func stableKeys(path string, kind Kind) ([]string, error) {
	file, bucket := path, []byte("conf") // raft-boltdb's bucket of stable keys
	if kind == WAL {
		file, bucket = filepath.Join(path, metadb.FileName), []byte(metadb.StableBucket)
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // a store never opened has no keys
	}
	db, err := bbolt.Open(file, datadir.FileMode, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("read stable keys of %s: %w", file, err)
	}
	defer db.Close()
	var keys []string
	err = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	slices.Sort(keys)
	return keys, err
}

// sync makes the new store's files and directory entries durable.
func (m *migration) sync() error {
	err := filepath.WalkDir(m.staging(), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return datadir.SyncDir(path)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
	if err != nil {
		return err
	}
	return datadir.SyncDir(m.dir)
}

// install moves the new store into place. node.json still names the old
// kind, so a node started now runs on the old store as before.
func (m *migration) install() error {
	if err := os.Rename(m.staging(), Path(m.dir, m.res.To)); err != nil {
		return err
	}
	return datadir.SyncDir(m.dir)
}

// switchKind names the new kind in node.json, durably: the switch.
func (m *migration) switchKind() error {
	m.ident.LogStore = string(m.res.To)
	return m.ident.Save(m.dir)
}

// removeOld removes the old store, which nothing names any more.
func (m *migration) removeOld() error {
	if err := os.RemoveAll(Path(m.dir, m.res.From)); err != nil {
		return err
	}
	return datadir.SyncDir(m.dir)
}
