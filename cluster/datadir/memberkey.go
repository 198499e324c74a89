package datadir

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MemberKeyFile holds the node's member key: the private half of the key
// with which it signs what it asks of the other members (the cluster
// records the public half when it joins). It never leaves the data dir.
const MemberKeyFile = "member.key"

// LoadMemberKey reads the data dir's member key, drawing one for a dir
// that has none. A wiped dir thus draws a new key, as it draws a new
// incarnation.
func LoadMemberKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, MemberKeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		if err := writeFileSync(path, []byte(base64.StdEncoding.EncodeToString(key.Seed())+"\n")); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is corrupt: want the base64 of a %d-byte Ed25519 seed (delete it to draw a new key; see docs/security.md, rotation)", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
