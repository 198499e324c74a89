package revoked

import "testing"

// The set forgets its oldest past Max, and only then.
func TestSetForgetsOldestFirst(t *testing.T) {
	s := New()
	for tok := uint64(1); tok <= Max+2; tok++ {
		s.Add(tok)
		s.Add(tok) // twice: once
	}
	if s.Len() != Max {
		t.Fatalf("Len %d, want %d", s.Len(), Max)
	}
	if s.Has(1) || s.Has(2) || !s.Has(3) || !s.Has(Max+2) {
		t.Errorf("Has 1 %v, 2 %v, 3 %v, last %v: want the two oldest forgotten", s.Has(1), s.Has(2), s.Has(3), s.Has(Max+2))
	}
	if got := s.Tokens(); got[0] != 3 || len(got) != Max {
		t.Errorf("Tokens start at %d (%d of them)", got[0], len(got))
	}
}
