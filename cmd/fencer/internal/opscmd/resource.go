package opscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/resource"
)

// resourceServeOptions are the flags of "fencer resource serve".
type resourceServeOptions struct {
	dataDir   string
	addr      string
	storeWide bool
}

func (o *resourceServeOptions) validate() error {
	if o.dataDir == "" {
		return cli.Usagef("--data-dir is required")
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return cli.Usagef("--addr %q: %w", o.addr, err)
	}
	return nil
}

// NewResourceCmd returns "fencer resource", the example fenced storage
// server that stale grant holders can be pointed at.
func NewResourceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "resource",
		Short:   "Run the example resource that enforces fencing tokens",
		Example: `  fencer resource serve --data-dir ./resource --addr 127.0.0.1:7100`,
	}
	o := &resourceServeOptions{}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve a fenced key/value store over HTTP until SIGINT or SIGTERM",
		Example: `  fencer resource serve --data-dir ./resource --addr 127.0.0.1:7100
  fencer resource serve --data-dir ./resource --store-wide   # one fence for all keys`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, cmd.OutOrStdout())
		},
	}
	fs := serve.Flags()
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the resource's bbolt file (created if absent)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7100", "HTTP listen address; port 0 picks a free one")
	fs.BoolVar(&o.storeWide, "store-wide", false, "one fence for the whole store instead of one per key")
	return cli.Group(cmd, serve)
}

func (o *resourceServeOptions) run(ctx context.Context, out io.Writer) (err error) {
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	store, err := fence.Open(filepath.Join(o.dataDir, "resource.db"), &fence.Options{StoreWide: o.storeWide})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: resource.NewServer(store), ReadHeaderTimeout: 10 * time.Second}
	// Print the bound address: with port 0 it is the only way to learn it.
	fmt.Fprintf(out, "fencer resource listening on %s\n", ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Drain in-flight writes before closing the store under them.
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
