// Package datadir is a node's data dir on disk: whose it is (node.json: the
// node's id, an incarnation drawn when the dir was created, the cluster's id
// once learned, the kind of its log store), that nobody else can read it,
// that one process uses it at a time, and the snapshot store Raft keeps in
// it.
package datadir

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Identity is what a data dir remembers about whose it is. It is written the
// first time the dir is used and checked on every start.
type Identity struct {
	NodeID string `json:"node_id"`
	// Incarnation is drawn at random when the data dir is created. A member
	// that comes back with a new incarnation has lost what it acknowledged
	// to Raft, so it must not silently take back its old vote.
	Incarnation string `json:"incarnation"`
	// ClusterID is the id of the cluster this dir's state belongs to,
	// recorded once the node has learned it.
	ClusterID string `json:"cluster_id,omitempty"`
	// LogStore is the kind of Raft log store the dir holds ("bolt" or
	// "wal", package logstore), recorded when the store is created and
	// changed only by fencer migrate-log-store. Empty in a dir from before
	// the choice existed, which holds bolt.
	LogStore string `json:"log_store,omitempty"`
}

// IdentityFile is the identity's file in the data dir.
const IdentityFile = "node.json"

// LoadIdentity reads the data dir's identity, creating it for a new dir, and
// refuses a dir that belongs to another node.
func LoadIdentity(dir, id string) (Identity, error) {
	ident, err := ReadIdentity(dir)
	if errors.Is(err, fs.ErrNotExist) {
		ident := Identity{NodeID: id, Incarnation: NewID()}
		return ident, ident.Save(dir)
	}
	if err != nil {
		return Identity{}, err
	}
	if ident.NodeID != id {
		return Identity{}, fmt.Errorf("data dir %s belongs to node %q, not %q: use that id or another data dir", dir, ident.NodeID, id)
	}
	return ident, nil
}

// ReadIdentity reads the data dir's identity; the error wraps
// fs.ErrNotExist when the dir has none.
func ReadIdentity(dir string) (Identity, error) {
	path := filepath.Join(dir, IdentityFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, fmt.Errorf("read %s: %w", path, err)
	}
	var ident Identity
	if err := json.Unmarshal(data, &ident); err != nil {
		return Identity{}, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return ident, nil
}

// Save writes the identity durably into the data dir.
func (ident Identity) Save(dir string) error {
	path := filepath.Join(dir, IdentityFile)
	data, _ := json.MarshalIndent(ident, "", "  ")
	if err := writeFileSync(path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeFileSync writes a file and its directory entry durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	// A leftover file keeps its old mode through O_CREATE.
	if err := f.Chmod(FileMode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the entries of dir (files created, renamed or removed in
// it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// NewID draws a random id of 16 hex characters (incarnations, cluster ids).
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}
