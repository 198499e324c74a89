package secrets

import (
	"strings"
	"testing"
)

func secretFor(name string, seed byte) string {
	var r [RandomLen]byte
	for i := range r {
		r[i] = seed + byte(i)
	}
	return New(name, r)
}

func TestSecretsKnowTheirLock(t *testing.T) {
	s := secretFor("a", 1)
	if len(s) != 32 || strings.Trim(s, "0123456789abcdef") != "" {
		t.Fatalf("secret %q: want 32 lowercase hex digits", s)
	}
	if OriginOf(s, "a") != ThisLock || OriginOf(s, "b") != OtherLock {
		t.Fatalf("origin of a's secret: for a %v, for b %v", OriginOf(s, "a"), OriginOf(s, "b"))
	}
	// Secrets of older builds were 32 random hex digits, unmarked.
	for _, old := range []string{"0123456789abcdef0123456789abcdef", "zz", ""} {
		if o := OriginOf(old, "a"); o != Unknown {
			t.Errorf("origin of %q: %v, want unknown", old, o)
		}
	}
	// Over many names, the tag tells them apart but for rare collisions.
	same := 0
	for i := range 1000 {
		if OriginOf(secretFor("lock-"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), byte(i)), "other") == ThisLock {
			same++
		}
	}
	if same > 5 {
		t.Fatalf("%d of 1000 secrets looked like they were other's", same)
	}
}

func TestEqual(t *testing.T) {
	a := secretFor("a", 1)
	if !Equal(a, strings.Clone(a)) || Equal(a, secretFor("a", 2)) || Equal(a, a[:31]) {
		t.Fatal("Equal")
	}
}
