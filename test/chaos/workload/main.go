package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ConfigEnv is the environment variable that carries a client's Config
// (JSON) to its process; a binary that finds it set should run Main.
const ConfigEnv = "FENCER_CHAOS_CLIENT"

// Main runs a client process: the Config from ConfigEnv, history lines on
// stdout, logs on stderr, until stdin reaches EOF (the harness closes it
// to stop the client) or SIGTERM. It returns the exit code.
func Main() int {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(ConfigEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "chaos client: %s: %v\n", ConfigEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := Run(ctx, cfg, os.Stdout, log); err != nil {
		fmt.Fprintf(os.Stderr, "chaos client %d: %v\n", cfg.Client, err)
		return 1
	}
	return 0
}
