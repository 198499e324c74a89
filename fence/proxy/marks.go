package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencer-io/fencer/fence"
)

var (
	bucketMarks = []byte("fence_proxy_high_water")
	bucketMeta  = []byte("fence_proxy_meta")
	metaKeys    = []byte("keys") // the key pattern the marks were made under
)

// Marks is the proxy's own store of high-water marks, one per fence key, in
// a bbolt file written with fsync (bbolt's default), as fence.Store keeps
// its marks. It holds no data: the data is the upstream's.
type Marks struct {
	db *bolt.DB
}

// OpenMarks opens or creates the mark store at path for keys taken with
// pattern ("" for one fence for the whole upstream). The pattern is recorded
// when the store is created, and opening it with another fails: keys made
// by another pattern name other marks, so switching would start every fence
// from zero and let old tokens back in.
func OpenMarks(path, pattern string) (*Marks, error) {
	// The file lock's timeout makes a second proxy on the same directory
	// fail rather than wait: two proxies, two in-memory key locks and one
	// file would hold nothing in order.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("fence proxy: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketMarks); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		want := describePattern(pattern)
		got := meta.Get(metaKeys)
		if got == nil {
			return meta.Put(metaKeys, []byte(want))
		}
		if string(got) != want {
			return fmt.Errorf("its marks were made for keys from %s, not %s: use a new --data-dir for another key pattern", got, want)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("fence proxy: init %s: %w", path, err), db.Close())
	}
	return &Marks{db: db}, nil
}

func describePattern(pattern string) string {
	if pattern == "" {
		return "the whole upstream"
	}
	return "pattern " + pattern
}

// Close closes the file.
func (m *Marks) Close() error { return m.db.Close() }

// HighWater returns key's mark, the zero Mark if none.
func (m *Marks) HighWater(key string) (fence.Mark, error) {
	var hw fence.Mark
	err := m.db.View(func(tx *bolt.Tx) error {
		var err error
		hw, err = decodeMark(tx.Bucket(bucketMarks).Get([]byte(key)))
		return err
	})
	return hw, err
}

// Advance records (token, seq) as key's mark if the current mark admits it
// (fence.Mark.Admits), and returns the mark it replaced; otherwise a
// *fence.StaleError. The new mark is on disk when it returns.
func (m *Marks) Advance(key string, token, seq uint64) (prev fence.Mark, err error) {
	err = m.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		hw, err := decodeMark(b.Get([]byte(key)))
		if err != nil {
			return err
		}
		if !hw.Admits(token, seq) {
			return &fence.StaleError{Key: key, Token: token, Seq: seq, HighWater: hw.Token, HighSeq: hw.Seq}
		}
		prev = hw
		return b.Put([]byte(key), encodeMark(fence.Mark{Token: token, Seq: seq}))
	})
	return prev, err
}

// Revert puts key's mark back to prev, after a write that Advance admitted
// was refused by the upstream. Only the proxy's key lock keeps another
// write from having advanced the mark in between, so it is called with the
// lock held.
func (m *Marks) Revert(key string, prev fence.Mark) error {
	return m.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		if prev == (fence.Mark{}) {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), encodeMark(prev))
	})
}

const markLen = 16

func encodeMark(m fence.Mark) []byte {
	b := make([]byte, markLen)
	binary.BigEndian.PutUint64(b[:8], m.Token)
	binary.BigEndian.PutUint64(b[8:], m.Seq)
	return b
}

// decodeMark refuses a mark of the wrong size: guessing would let an old
// token back in.
func decodeMark(b []byte) (fence.Mark, error) {
	if b == nil {
		return fence.Mark{}, nil
	}
	if len(b) != markLen {
		return fence.Mark{}, fmt.Errorf("fence proxy: corrupt high-water mark: %d bytes", len(b))
	}
	return fence.Mark{Token: binary.BigEndian.Uint64(b[:8]), Seq: binary.BigEndian.Uint64(b[8:])}, nil
}
