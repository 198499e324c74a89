package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// LogFlags are the logging options shared by commands that run nodes.
type LogFlags struct {
	Level  string
	format string
}

// Bind adds --log-level and --log-format to fs.
func (l *LogFlags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", EnvOr("FENCER_LOG_LEVEL", "info"), "log level: debug, info, warn, error ($FENCER_LOG_LEVEL)")
	fs.StringVar(&l.format, "log-format", EnvOr("FENCER_LOG_FORMAT", "text"), "log format: text or json ($FENCER_LOG_FORMAT)")
}

// Logger returns the logger the flags ask for, writing to w.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.Level)
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

// EnvOr is $name, or def when it is not set.
func EnvOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// EnvUint is $name as an unsigned integer, or def.
func EnvUint(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

// EnvDuration is $name as a duration, or def.
func EnvDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// EnvBool reports whether $name is 1 or true.
func EnvBool(name string) bool {
	v := os.Getenv(name)
	return v == "1" || strings.EqualFold(v, "true")
}
