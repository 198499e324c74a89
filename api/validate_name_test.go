package api

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNameMatchesItsPattern checks the hand-written loop against the
// documented pattern (less "." and "..") on every byte value and on the
// length bounds.
func TestValidNameMatchesItsPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)
	cases := []string{"", strings.Repeat("a", 200), strings.Repeat("a", 201), "jobs.nightly:v2-a_b", "a/b", "ä", "a b", ".", "..", "...", ".a", "..a"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	for _, s := range cases {
		if got, want := ValidName(s), pattern.MatchString(s) && s != "." && s != ".."; got != want {
			t.Errorf("ValidName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
