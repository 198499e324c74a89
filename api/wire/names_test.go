package wire

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestNamesMatchTheirPatterns checks the hand-written loops against the
// documented patterns on every byte value and on the length bounds.
func TestNamesMatchTheirPatterns(t *testing.T) {
	cases := []string{"", strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("a", 200), strings.Repeat("a", 201),
		"jobs.nightly:v2-a_b", "n1.east_2-b", "a/b", "ä", "a b", ".", "..", "...", ".a", "..a"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	notDots := func(s string) bool { return s != "." && s != ".." }
	for _, check := range []struct {
		name  string
		valid func(string) bool
		class string
		max   int
		also  func(string) bool // a condition beyond the pattern
	}{
		{"ValidName", ValidName, NameChars, MaxNameLen, notDots},
		{"ValidNamePrefix", ValidNamePrefix, NameChars, MaxNameLen, nil},
		{"ValidNodeID", ValidNodeID, `[A-Za-z0-9._-]`, MaxNodeIDLen, nil},
	} {
		pattern := regexp.MustCompile(fmt.Sprintf(`^%s{1,%d}$`, check.class, check.max))
		for _, s := range cases {
			want := pattern.MatchString(s) && (check.also == nil || check.also(s))
			if got := check.valid(s); got != want {
				t.Errorf("%s(%q) = %v, the pattern says %v", check.name, s, got, want)
			}
		}
	}
	// The rules users read are the patterns that are checked.
	for rule, want := range map[string]string{
		NameRule:   fmt.Sprintf("1-%d of %s, not . or ..", MaxNameLen, NameChars),
		NodeIDRule: fmt.Sprintf("1-%d of [A-Za-z0-9._-]", MaxNodeIDLen),
	} {
		if rule != want {
			t.Errorf("rule %q, want %q", rule, want)
		}
	}
}
