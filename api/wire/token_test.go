package wire

import (
	"strconv"
	"testing"
)

func TestParseToken(t *testing.T) {
	for s, want := range map[string]uint64{"1": 1, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if v, ok := ParseToken(s); !ok || v != want {
			t.Fatalf("ParseToken(%q) = %d %v", s, v, ok)
		}
	}
	for _, s := range []string{"", "0", "00", "01", "-1", "+1", "1 ", "1e3", "0x10", "18446744073709551616", "99999999999999999999"} {
		if _, ok := ParseToken(s); ok {
			t.Fatalf("ParseToken(%q) accepted", s)
		}
	}
}

// FuzzParseToken checks that ParseToken accepts exactly the canonical
// decimal spellings of 1 … 2^64-1 and returns their value.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "42", "18446744073709551615", "18446744073709551616", "", "0", "00", "01", "-1", "+1", " 1", "1 ", "1e3", "0x10", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseToken(s)
		want, err := strconv.ParseUint(s, 10, 64)
		canonical := err == nil && want > 0 && strconv.FormatUint(want, 10) == s
		if ok != canonical {
			t.Fatalf("ParseToken(%q) ok=%v, want %v", s, ok, canonical)
		}
		if ok && v != want {
			t.Fatalf("ParseToken(%q) = %d, want %d", s, v, want)
		}
	})
}
