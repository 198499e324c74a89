package entry

import "errors"

var (
	// ErrFormatTooOld: a command was encoded for members whose log format
	// cannot read it.
	ErrFormatTooOld = errors.New("the members' log format cannot carry this command")
	// ErrMalformedCommand: an entry could not be decoded, or a command is
	// one no log could carry. Every replica decodes the same bytes the same
	// way, so each one skips a malformed committed entry identically; see
	// fsm.FSM.Apply.
	ErrMalformedCommand = errors.New("malformed command")
)
