// Package cli is what fencer's commands share: flags for reaching a
// cluster and for logging, environment defaults, argument checks, command
// groups, and the errors, exit statuses and -o json error bodies they end
// with.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
)

// ExitError carries a specific exit status out of a command, and the code
// that -o json reports for it when the error chain has none of its own.
type ExitError struct {
	Code int
	Kind string
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is a mistake in the command line: an unknown command or flag, a
// missing or malformed argument. Under -o json its code is "usage".
type UsageError struct{ err error }

func (e *UsageError) Error() string { return e.err.Error() }
func (e *UsageError) Unwrap() error { return e.err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// Usage marks err as a mistake in the command line.
func Usage(err error) error { return &UsageError{err} }

// ExitCode is the exit status for err: an ExitError's own, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// OneLine is err's message on one line.
func OneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Codes of -o json errors that the CLI finds itself; an error answered by a
// server carries the server's code instead (lock_held, lease_lost, …).
const (
	CodeUsage          = "usage"           // bad command line
	CodeUnavailable    = "unavailable"     // no endpoint answered
	CodeNotFencer      = "not_fencer"      // an endpoint is not fencer's HTTP API
	CodeLeaseExpired   = "lease_expired"   // no renewal confirmed in time
	CodeOutcomeUnknown = "outcome_unknown" // a write's answer was lost
	CodeTimeout        = "timeout"         // the command's own deadline passed
	CodeCommandFailed  = "command_failed"  // exec: COMMAND exited non-zero
	CodeCannotRun      = "cannot_run"      // exec: COMMAND could not be started
	CodeInterrupted    = "interrupted"     // a signal ended the command
	CodeError          = "error"           // anything else
)

// errorCode is the machine-readable code of err for -o json.
func errorCode(err error) string {
	var api *client.APIError
	var usage *UsageError
	var ee *ExitError
	switch {
	case errors.As(err, &api) && api.Code != "":
		return api.Code
	case errors.As(err, &usage):
		return CodeUsage
	case errors.Is(err, client.ErrNotFencer):
		return CodeNotFencer
	case errors.Is(err, client.ErrLeaseExpired):
		return CodeLeaseExpired
	case errors.Is(err, client.ErrOutcomeUnknown):
		return CodeOutcomeUnknown
	case errors.Is(err, client.ErrUnavailable):
		return CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.As(err, &ee) && ee.Kind != "":
		return ee.Kind
	case api != nil:
		// An answer without fencer's error body, from a proxy in between.
		return fmt.Sprintf("http_%d", api.Status)
	}
	return CodeError
}

// ErrorBody is an error under -o json.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// ReportError prints err to w: one line, or a JSON object under -o json.
func ReportError(w io.Writer, err error, asJSON bool) {
	if !asJSON {
		fmt.Fprintln(w, "fencer: "+OneLine(err))
		return
	}
	b, _ := json.Marshal(ErrorBody{Error: OneLine(err), Code: errorCode(err)}) // cannot fail: two strings
	fmt.Fprintf(w, "%s\n", b)
}

// WantsJSON reports whether the command line asked for -o json. The flag's
// parsed value decides when it was parsed; when parsing stopped before it
// (a bad flag earlier on the line), the raw arguments up to "--" do.
func WantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("output"); f != nil && f.Changed {
			return f.Value.String() == "json"
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case a == "-o" || a == "--output":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		case a == "-ojson" || a == "-o=json" || a == "--output=json":
			return true
		}
	}
	return false
}
