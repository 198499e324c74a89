package fence

import (
	"errors"
	"fmt"

	"github.com/fencer-io/fencer/api/wire"
)

// Errors returned by this package. They are shared with pgfence and the
// resource server so that errors.Is works across every layer; the mapping
// to HTTP statuses lives only at the edge, in middleware.go.
var (
	// ErrMissingToken means a write carried no usable fencing token: the
	// token was absent, empty, zero or not a strict decimal. It is never
	// read as token 0, because "missing means zero" is exactly the shim that
	// lets a stale writer through.
	ErrMissingToken = errors.New("fence: missing or malformed fencing token")

	// ErrStaleToken means a write carried a token that is not strictly
	// greater than the high-water mark (an equal token is a replay). The
	// concrete error is a *StaleError holding the mark.
	ErrStaleToken = errors.New("fence: stale fencing token")

	// ErrMalformedSequence means a Fencing-Sequence was present but is not
	// a strict decimal in 1..2^64-1.
	ErrMalformedSequence = errors.New("fence: malformed fencing sequence")

	// ErrEmptyKey means a fenced write named no key.
	ErrEmptyKey = errors.New("fence: empty key")
)

// StaleError reports a refused write together with the high-water mark that
// refused it, so a client can tell how far behind it is.
type StaleError struct {
	Key       string // fence scope that refused the write
	Token     uint64 // token the write carried
	Seq       uint64 // sequence the write carried, 0 if none
	HighWater uint64 // last accepted token for Key
	HighSeq   uint64 // sequence of the last accepted write, 0 if none
}

// Error describes the refusal.
func (e *StaleError) Error() string {
	if e.Seq == 0 && e.HighSeq == 0 {
		return fmt.Sprintf("fence: stale fencing token %d for %q: last accepted token is %d", e.Token, e.Key, e.HighWater)
	}
	return fmt.Sprintf("fence: stale fencing token %d/seq %d for %q: last accepted is %d/seq %d",
		e.Token, e.Seq, e.Key, e.HighWater, e.HighSeq)
}

// Is makes errors.Is(err, ErrStaleToken) true for every *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }

// Code returns the stable machine-readable code for err (one of wire's), as
// used in the "code" field of HTTP error bodies, or "" when err is not a
// fence error.
func Code(err error) string {
	switch {
	case errors.Is(err, ErrMissingToken):
		return wire.CodeMissingToken
	case errors.Is(err, ErrStaleToken):
		return wire.CodeStaleToken
	case errors.Is(err, ErrMalformedSequence):
		return wire.CodeMalformedSequence
	case errors.Is(err, ErrEmptyKey):
		return wire.CodeEmptyKey
	}
	return ""
}
