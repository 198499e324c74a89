package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// identity is what a data dir remembers about whose it is. It is written the
// first time the dir is used and checked on every start.
type identity struct {
	NodeID string `json:"node_id"`
	// Incarnation is drawn at random when the data dir is created. A member
	// that comes back with a new incarnation has lost what it acknowledged
	// to Raft, so it must not silently take back its old vote.
	Incarnation string `json:"incarnation"`
	// ClusterID is the id of the cluster this dir's state belongs to,
	// recorded once the node has learned it.
	ClusterID string `json:"cluster_id,omitempty"`
}

const identityFile = "node.json"

// loadIdentity reads the data dir's identity, creating it for a new dir, and
// refuses a dir that belongs to another node.
func loadIdentity(dir, id string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		ident := identity{NodeID: id, Incarnation: newID()}
		return ident, saveIdentity(dir, ident)
	}
	if err != nil {
		return identity{}, fmt.Errorf("read %s: %w", path, err)
	}
	var ident identity
	if err := json.Unmarshal(data, &ident); err != nil {
		return identity{}, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	if ident.NodeID != id {
		return identity{}, fmt.Errorf("data dir %s belongs to node %q, not %q: use that id or another data dir", dir, ident.NodeID, id)
	}
	return ident, nil
}

func saveIdentity(dir string, ident identity) error {
	path := filepath.Join(dir, identityFile)
	data, _ := json.MarshalIndent(ident, "", "  ")
	if err := writeFileSync(path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeFileSync writes a file and its directory entry durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fileMode)
	if err != nil {
		return err
	}
	// A leftover file keeps its old mode through O_CREATE.
	if err := f.Chmod(fileMode); err != nil {
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
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
