// Package revoked is the state's memory of revoked grants and sessions:
// their tokens (a session's id is its token, from the same sequence, so
// one set holds both), bounded, the oldest forgotten first, in log order,
// so that every replica answers a revoked holder alike (410 revoked rather
// than lease_lost) and forgets the same ones.
package revoked

import "slices"

// Max bounds the tokens remembered, as sessions.MaxEnded bounds the ended
// sessions.
const Max = 1 << 16

// Set is the revoked tokens and the order they were revoked in.
type Set struct {
	tokens map[uint64]bool
	order  []uint64 // oldest first; cut at the front
}

// New returns an empty set.
func New() *Set { return &Set{tokens: map[uint64]bool{}} }

// Has reports whether token was revoked lately.
func (s *Set) Has(token uint64) bool { return s.tokens[token] }

// Len counts the tokens remembered. Once anything was revoked it never
// falls back to 0 (the set forgets only past Max), which is what lets a
// snapshot say by this count alone that it may hold a grant ended
// "revoked" in its history (snapshot.Version6).
func (s *Set) Len() int { return len(s.order) }

// Add remembers token as revoked.
func (s *Set) Add(token uint64) {
	if s.tokens[token] {
		return
	}
	s.tokens[token] = true
	s.order = append(s.order, token)
	if len(s.order) > Max {
		delete(s.tokens, s.order[0])
		s.order = s.order[1:]
	}
}

// Tokens returns the tokens remembered, oldest first.
func (s *Set) Tokens() []uint64 { return slices.Clone(s.order) }
