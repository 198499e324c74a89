package fence

import (
	"fmt"
	"strconv"
)

// Header names carrying the fence on an HTTP request.
const (
	// HeaderToken carries the fencing token issued by fencer for the grant.
	HeaderToken = "Fencing-Token"
	// HeaderSequence optionally numbers the writes made under one grant,
	// starting at 1; see Mark.Admits.
	HeaderSequence = "Fencing-Sequence"
)

// ParseToken parses a fencing token: a strict decimal in 1..2^64-1 with no
// sign, space or leading zero. Anything else, including "" and "0", is an
// ErrMissingToken: a resource must fail closed rather than guess.
func ParseToken(s string) (uint64, error) {
	n, ok := parseStrictUint(s)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrMissingToken, s)
	}
	return n, nil
}

// ParseSequence parses a Fencing-Sequence value with the same strict rules as
// ParseToken; failures are ErrMalformedSequence.
func ParseSequence(s string) (uint64, error) {
	n, ok := parseStrictUint(s)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrMalformedSequence, s)
	}
	return n, nil
}

// parseStrictUint accepts only [1-9][0-9]* that fits in a uint64.
// strconv.ParseUint alone would also accept "0", "007" and "0x1f" (base 0),
// and a lenient parser is how "05" and "5" become two different replays.
func parseStrictUint(s string) (uint64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
