package opscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/fence/proxy"
)

// fenceProxyOptions are the flags of "fencer fence-proxy".
type fenceProxyOptions struct {
	upstream   string
	dataDir    string
	listen     string
	methods    string
	keyPattern string
	maxBody    int64
	client     cli.ClientFlags

	cfg proxy.Config // built by validate
}

func (o *fenceProxyOptions) validate() error {
	if o.upstream == "" {
		return cli.Usagef("--upstream is required")
	}
	if o.dataDir == "" {
		return cli.Usagef("--data-dir is required")
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return cli.Usagef("--listen %q: %w", o.listen, err)
	}
	u, err := url.Parse(o.upstream)
	if err != nil {
		return cli.Usagef("--upstream %q: %w", o.upstream, err)
	}
	var methods []string
	for _, m := range strings.Split(o.methods, ",") {
		if m = strings.TrimSpace(m); m != "" {
			methods = append(methods, strings.ToUpper(m))
		}
	}
	if len(methods) == 0 {
		return cli.Usagef("--methods is empty: name the methods that must carry a fencing token")
	}
	locks, err := o.client.Client()
	if err != nil {
		return err
	}
	o.cfg = proxy.Config{Upstream: u, Methods: methods, KeyPattern: o.keyPattern, Locks: locks, MaxBodyBytes: o.maxBody}
	if err := o.cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	return nil
}

// NewFenceProxyCmd returns "fencer fence-proxy", which fences any HTTP
// service by standing in front of it.
func NewFenceProxyCmd() *cobra.Command {
	o := &fenceProxyOptions{}
	cmd := &cobra.Command{
		Use:   "fence-proxy",
		Short: "Fence an HTTP service: forward only writes whose fencing token passes",
		Long: `Serve a reverse proxy in front of --upstream that lets a write through only
if its Fencing-Token is greater than the last one accepted for its key (or
equal, with a greater Fencing-Sequence). Writes without a token get 428
missing_token, stale ones 409 stale_token with last_token, and neither
reaches the upstream. A write that names its lock in Fencing-Lock passes only
while its token is that lock's current grant, asked of the cluster
(--endpoints). The marks live in --data-dir, fsynced; a mark stays advanced
only if the upstream answers 2xx. Reads pass through. Writes that reach the
upstream another way are not fenced: see docs/fences.md.`,
		Example: `  fencer fence-proxy --upstream http://127.0.0.1:8080 --data-dir ./proxy --listen 127.0.0.1:7200
  fencer fence-proxy --upstream http://127.0.0.1:8080 --data-dir ./proxy --key-pattern '/v1/items/{id}'
  curl -X PUT -H 'Fencing-Token: 7' -H 'Fencing-Lock: job' --data v http://127.0.0.1:7200/v1/items/a`,
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
	fs := cmd.Flags()
	fs.StringVar(&o.upstream, "upstream", "", "URL of the service to fence, http:// or https:// (required)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the proxy's high-water marks (created if absent; required)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:7200", "HTTP listen address; port 0 picks a free one")
	fs.StringVar(&o.methods, "methods", strings.Join(proxy.DefaultMethods, ","), "comma-separated methods that must carry a fencing token; others pass through")
	fs.StringVar(&o.keyPattern, "key-pattern", "", "path pattern naming each write's fence key, e.g. /v1/items/{id} or /files/{path...}; default: one fence for the whole upstream")
	fs.Int64Var(&o.maxBody, "max-body-bytes", 0, "largest fenced write body, read before the key is locked (0: 8 MiB)")
	o.client.Bind(fs)
	return cmd
}

func (o *fenceProxyOptions) run(ctx context.Context, out io.Writer) (err error) {
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	marks, err := proxy.OpenMarks(filepath.Join(o.dataDir, "fence-proxy.db"), o.keyPattern)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, marks.Close()) }()
	p, err := proxy.New(marks, o.cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	// Print the bound address: with port 0 it is the only way to learn it.
	fmt.Fprintf(out, "fencer fence-proxy listening on %s for %s\n", ln.Addr(), o.cfg.Upstream.Redacted())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Let writes in flight learn their upstream's answer (and put their
	// mark back if refused) before the store closes under them.
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
