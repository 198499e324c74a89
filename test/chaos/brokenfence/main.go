package brokenfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/fence"
)

// Env, when set, makes a test binary that calls Main serve a broken resource
// instead of running its tests; its value is a Config as JSON. The chaos
// harness starts its own test binary this way, as it starts its clients.
const Env = "FENCER_CHAOS_BROKEN_FENCE"

// Config is what Main serves.
type Config struct {
	DataDir string `json:"data_dir"`
	Addr    string `json:"addr"`
	Mode    string `json:"mode"` // see ParseMode
}

// Main serves the broken resource Env describes until SIGINT or SIGTERM,
// over the same store file as `fencer resource serve`, and returns the exit
// code.
func Main() int {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "broken resource:", err)
		return 1
	}
	return 0
}

func serve() (err error) {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(Env)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", Env, err)
	}
	mode, err := ParseMode(cfg.Mode)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	store, err := fence.Open(filepath.Join(cfg.DataDir, "resource.db"), nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	fmt.Printf("WARNING: fencing deliberately broken (%s); test use only\nbroken resource listening on %s\n", cfg.Mode, ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: NewServer(store, mode), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
