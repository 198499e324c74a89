// Package secrets makes and reads the secret of a grant (the API's
// "lease"): the leader makes it from random bytes, and it tells, a little,
// which lock it was made for (see fsm/DESIGN.md, "A secret knows its lock,
// a little").
package secrets

import (
	"crypto/subtle"
	"encoding/hex"
	"hash/fnv"
)

// A grant's secret is 32 hex digits, 16 bytes: 12 random bytes, then a 2-byte
// mark that depends on them alone and a 2-byte tag that depends on them and
// on the lock's name. The leader draws the random bytes (the FSM never does);
// the mark and the tag let a refused renewal or release say that the secret
// was issued for another lock, which the state alone cannot tell from a
// grant of this lock that ended. 96 random bits stay unguessable; secrets
// from older builds (all random) carry no mark, except by a 1-in-65,536
// chance, and are then described less precisely.
const RandomLen = 12

// New returns the secret of a grant of lock name, made from random.
func New(name string, random [RandomLen]byte) string {
	var b [RandomLen + 4]byte
	copy(b[:], random[:])
	mark, tag := secretMark(random[:]), secretTag(name, random[:])
	b[12], b[13], b[14], b[15] = mark[0], mark[1], tag[0], tag[1]
	return hex.EncodeToString(b[:])
}

// Equal compares two secrets in constant time.
func Equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Origin is what a secret shows about the lock it was issued for.
type Origin int

// The origins of a secret.
const (
	Unknown   Origin = iota // no mark: not made by New
	ThisLock                // made by New for this name
	OtherLock               // made by New for another name
)

// OriginOf says which lock secret was made for, as far as it shows.
func OriginOf(secret, name string) Origin {
	b, err := hex.DecodeString(secret)
	if err != nil || len(b) != RandomLen+4 {
		return Unknown
	}
	random := b[:RandomLen]
	if mark := secretMark(random); b[12] != mark[0] || b[13] != mark[1] {
		return Unknown
	}
	if tag := secretTag(name, random); b[14] != tag[0] || b[15] != tag[1] {
		return OtherLock
	}
	return ThisLock
}

// secretMark and secretTag need no cryptographic strength: they are not
// secret, and the random bytes are what cannot be guessed.
func secretMark(random []byte) [2]byte {
	h := fnv.New64a()
	h.Write(random)
	s := h.Sum64()
	return [2]byte{byte(s >> 8), byte(s)}
}

func secretTag(name string, random []byte) [2]byte {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(random)
	s := h.Sum64()
	return [2]byte{byte(s >> 8), byte(s)}
}
