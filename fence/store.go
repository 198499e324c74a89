package fence

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names inside the bbolt file.
var (
	bucketMarks = []byte("fence_high_water")
	bucketData  = []byte("fence_data")
	bucketMeta  = []byte("fence_meta")
)

// metaScopeMode records whether a store was created per-key or store-wide.
var metaScopeMode = []byte("scope_mode")

// StoreScope is the single fence scope used by a store opened with
// Options.StoreWide.
const StoreScope = "*"

// Options configures a Store. The zero value (or nil) means per-key fences
// and a one second timeout for the file lock.
type Options struct {
	// StoreWide makes every key share one fence, StoreScope: a write to any
	// key must carry a token above every token the store has accepted.
	// Use it when one lock guards the whole resource. The default is one
	// fence per key, for a resource where each key is guarded by its own lock.
	// The mode is recorded when the store is created; opening it later in
	// the other mode fails.
	StoreWide bool

	// OpenTimeout bounds the wait for bbolt's exclusive file lock, so a
	// second process opening the same file fails instead of hanging.
	// Zero means one second.
	OpenTimeout time.Duration
}

// Validate reports whether the options are usable.
func (o *Options) Validate() error {
	if o.OpenTimeout < 0 {
		return fmt.Errorf("fence: negative OpenTimeout %v", o.OpenTimeout)
	}
	return nil
}

// Store is a bbolt file holding guarded data and the high-water marks that
// guard it. Marks and data change only together, in one fsynced transaction.
type Store struct {
	db        *bolt.DB
	storeWide bool
}

// Open opens or creates the store at path.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = time.Second
	}
	// NoSync stays false: a mark that is not on disk when the write is
	// acknowledged is a mark a crash can roll back.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.OpenTimeout})
	if err != nil {
		return nil, fmt.Errorf("fence: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMarks, bucketData, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return checkScopeMode(tx.Bucket(bucketMeta), o.StoreWide)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("fence: init %s: %w", path, err), db.Close())
	}
	return &Store{db: db, storeWide: o.StoreWide}, nil
}

// checkScopeMode records the store's scope mode on first open and refuses a
// later open in the other mode: the per-key marks and the store-wide mark are
// different rows, so switching modes would start the new fence from zero and
// re-accept old tokens.
func checkScopeMode(meta *bolt.Bucket, storeWide bool) error {
	want := []byte("per-key")
	if storeWide {
		want = []byte("store-wide")
	}
	got := meta.Get(metaScopeMode)
	if got == nil {
		return meta.Put(metaScopeMode, want)
	}
	if string(got) != string(want) {
		return fmt.Errorf("fence: store was created %s, cannot open it %s", got, want)
	}
	return nil
}

// Close closes the store file.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the store's file path.
func (s *Store) Path() string { return s.db.Path() }

// Scope returns the fence scope that guards key: key itself, or StoreScope
// for a store-wide fence.
func (s *Store) Scope(key string) string {
	if s.storeWide {
		return StoreScope
	}
	return key
}

// Update runs fn as a write fenced by token on key, without a sequence; it is
// UpdateSeq with seq 0.
func (s *Store) Update(key string, token uint64, fn func(tx *Tx) error) error {
	return s.UpdateSeq(key, token, 0, fn)
}

// UpdateSeq runs fn as a write fenced by (token, seq) on key, in one bbolt
// read-write transaction: it checks the write against the high-water mark of
// key's scope (see Mark.Admits), runs fn, and records (token, seq) as the new
// mark. If the write is stale, fn is not run and the error is a *StaleError.
// If fn returns an error, nothing fn wrote and no mark is kept, and that error
// is returned unchanged. seq is 0 when the writer does not number its writes.
//
// Write transactions are serialised by bbolt, so fn should be short.
func (s *Store) UpdateSeq(key string, token, seq uint64, fn func(tx *Tx) error) error {
	if key == "" {
		return ErrEmptyKey
	}
	if token == 0 {
		return fmt.Errorf("%w: token 0", ErrMissingToken)
	}
	scope := s.Scope(key)
	return s.db.Update(func(btx *bolt.Tx) error {
		marks := btx.Bucket(bucketMarks)
		hw, err := decodeMark(marks.Get([]byte(scope)))
		if err != nil {
			return err
		}
		if !hw.Admits(token, seq) {
			return &StaleError{Key: scope, Token: token, Seq: seq, HighWater: hw.Token, HighSeq: hw.Seq}
		}
		if err := fn(&Tx{tx: btx, key: key, mark: Mark{Token: token, Seq: seq}}); err != nil {
			return err
		}
		return marks.Put([]byte(scope), Mark{Token: token, Seq: seq}.encode())
	})
}

// HighWater returns the high-water mark guarding key; the zero Mark if no
// write to its scope was ever accepted.
func (s *Store) HighWater(key string) (Mark, error) {
	var m Mark
	err := s.db.View(func(btx *bolt.Tx) error {
		var err error
		m, err = decodeMark(btx.Bucket(bucketMarks).Get([]byte(s.Scope(key))))
		return err
	})
	return m, err
}

// View runs fn in a read-only transaction over the guarded data. Reads need
// no token: fencing protects the resource from stale writers, not readers.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error {
		return fn(&Tx{tx: btx})
	})
}
