package fence

import (
	"fmt"

	"github.com/fencer-io/fencer/api/wire"
)

// ParseToken parses a fencing token (wire.HeaderToken): a strict decimal in
// 1..2^64-1 with no sign, space or leading zero (wire.ParseToken). Anything
// else, including "" and "0", is an ErrMissingToken: a resource must fail
// closed rather than guess, and a lenient parser is how "05" and "5" become
// two different replays.
func ParseToken(s string) (uint64, error) {
	n, ok := wire.ParseToken(s)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrMissingToken, s)
	}
	return n, nil
}

// ParseSequence parses a Fencing-Sequence value (wire.HeaderSequence) with
// the same strict rule as ParseToken; failures are ErrMalformedSequence.
func ParseSequence(s string) (uint64, error) {
	n, ok := wire.ParseToken(s)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrMalformedSequence, s)
	}
	return n, nil
}
