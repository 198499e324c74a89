package main

import (
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

// newRootCmd returns the fencer command. Every subcommand is listed here, in
// the order "fencer --help" shows them.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "fencer",
		Short: "fencer: a Raft lock service whose grants carry fencing tokens",
		Example: `  fencer dev                                   # a local 3-node cluster
  fencer lock acquire job --ttl 30s -o json     # token and lease secret
  fencer exec job -- ./batch.sh                 # run while holding the lock
  fencer watch jobs.                            # lock events as they happen
  fencer cluster status`,
		Version:       readBuildInfo().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("fencer {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { warnDeprecated(cmd, wantsJSON(cmd, nil)) }
	group(root,
		newServeCmd(),
		newDevCmd(),
		newLockCmd(),
		newSemCmd(),
		newElectCmd(),
		newLeaderCmd(),
		newKVCmd(),
		newExecCmd(),
		newWatchCmd(),
		newTokenCmd(),
		newMembersCmd(),
		newClusterCmd(),
		newSnapshotCmd(),
		newRecoverCmd(),
		newMigrateLogCmd(),
		newTLSCmd(),
		newResourceCmd(),
		newBenchCmd(),
		newVersionCmd(),
	)
	return root
}

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
