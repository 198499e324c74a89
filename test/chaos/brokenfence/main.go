package brokenfence

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// Main serves the broken resource Env describes, over the same store file as
// `fencer resource serve`, until the process is killed; it returns the exit
// code of a failure.
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

	// The harness stops the resource with SIGKILL, like a crash: there is
	// nothing to drain.
	srv := &http.Server{Handler: NewServer(store, mode), ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}
