package main

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

// exitError carries a specific exit status out of a command, and the code
// that -o json reports for it when the error chain has none of its own.
type exitError struct {
	code int
	kind string
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a mistake in the command line: an unknown command or flag, a
// missing or malformed argument. Under -o json its code is "usage".
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Codes of -o json errors that the CLI finds itself; an error answered by a
// server carries the server's code instead (lock_held, lease_lost, …).
const (
	codeUsage          = "usage"           // bad command line
	codeUnavailable    = "unavailable"     // no endpoint answered
	codeNotFencer      = "not_fencer"      // an endpoint is not fencer's HTTP API
	codeLeaseExpired   = "lease_expired"   // no renewal confirmed in time
	codeOutcomeUnknown = "outcome_unknown" // a write's answer was lost
	codeTimeout        = "timeout"         // the command's own deadline passed
	codeCommandFailed  = "command_failed"  // exec: COMMAND exited non-zero
	codeCannotRun      = "cannot_run"      // exec: COMMAND could not be started
	codeInterrupted    = "interrupted"     // a signal ended the command
	codeError          = "error"           // anything else
)

// errorCode is the machine-readable code of err for -o json.
func errorCode(err error) string {
	var api *client.APIError
	var usage *usageError
	var ee *exitError
	switch {
	case errors.As(err, &api) && api.Code != "":
		return api.Code
	case errors.As(err, &usage):
		return codeUsage
	case errors.Is(err, client.ErrNotFencer):
		return codeNotFencer
	case errors.Is(err, client.ErrLeaseExpired):
		return codeLeaseExpired
	case errors.Is(err, client.ErrOutcomeUnknown):
		return codeOutcomeUnknown
	case errors.Is(err, client.ErrUnavailable):
		return codeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return codeTimeout
	case errors.As(err, &ee) && ee.kind != "":
		return ee.kind
	case api != nil:
		// An answer without fencer's error body, from a proxy in between.
		return fmt.Sprintf("http_%d", api.Status)
	}
	return codeError
}

// errorBody is an error under -o json.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func reportError(w io.Writer, err error, asJSON bool) {
	if !asJSON {
		fmt.Fprintln(w, "fencer: "+oneLine(err))
		return
	}
	b, _ := json.Marshal(errorBody{Error: oneLine(err), Code: errorCode(err)}) // cannot fail: two strings
	fmt.Fprintf(w, "%s\n", b)
}

// wantsJSON reports whether the command line asked for -o json. The flag's
// parsed value decides when it was parsed; when parsing stopped before it
// (a bad flag earlier on the line), the raw arguments up to "--" do.
func wantsJSON(cmd *cobra.Command, args []string) bool {
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
