package fence

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

// errReadOnly is returned by writes through a Tx given to View.
var errReadOnly = errors.New("fence: write in a read-only transaction")

// Tx is the guarded data bucket as seen from one bbolt transaction. It is
// valid only inside the Update or View callback that received it.
type Tx struct {
	tx   *bolt.Tx
	key  string
	mark Mark
}

// Key returns the key the write was fenced on; "" in a View.
func (t *Tx) Key() string { return t.key }

// Mark returns the (token, seq) being written, which becomes the high-water
// mark if the transaction commits; the zero Mark in a View.
func (t *Tx) Mark() Mark { return t.mark }

// Get returns a copy of the value stored under key, or nil if there is none.
// It is a copy because bbolt's own slice dies with the transaction.
func (t *Tx) Get(key string) []byte {
	v := t.tx.Bucket(bucketData).Get([]byte(key))
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// Put stores value under key.
func (t *Tx) Put(key string, value []byte) error {
	if !t.tx.Writable() {
		return errReadOnly
	}
	if key == "" {
		return ErrEmptyKey
	}
	return t.tx.Bucket(bucketData).Put([]byte(key), value)
}

// Delete removes key; removing an absent key is not an error.
func (t *Tx) Delete(key string) error {
	if !t.tx.Writable() {
		return errReadOnly
	}
	return t.tx.Bucket(bucketData).Delete([]byte(key))
}
