package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

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

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "fencer",
		Short:         "fencer: a Raft lock service whose grants carry fencing tokens",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newServeCmd(),
		newDevCmd(),
	)
	for _, extra := range extraCommands {
		root.AddCommand(extra())
	}
	return root
}

// extraCommands are added by other files of this package (client and
// operator commands) through init, so that each command lives in its own file.
var extraCommands []func() *cobra.Command

// logFlags are the logging options shared by commands that run nodes.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&l.level, "log-level", envOr("FENCER_LOG_LEVEL", "info"), "log level: debug, info, warn, error ($FENCER_LOG_LEVEL)")
	fs.StringVar(&l.format, "log-format", envOr("FENCER_LOG_FORMAT", "text"), "log format: text or json ($FENCER_LOG_FORMAT)")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envUint(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envBool(name string) bool {
	v := os.Getenv(name)
	return v == "1" || strings.EqualFold(v, "true")
}
