// Package server wires a cluster.Node to its HTTP API on a listener. It is
// what `fencer serve` and `fencer dev` run, and what in-process tests start,
// so that every one of them runs the same node.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fencer-io/fencer/api"
	"github.com/fencer-io/fencer/cluster"
)

var _ api.Cluster = (*cluster.Node)(nil)

// Instance is a running node with its HTTP server.
type Instance struct {
	Node *cluster.Node
	HTTP *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on httpAddr (port 0 picks one; the real address is then the
// advertised one), opens the node and serves its API.
func Start(cfg cluster.Config, httpAddr string) (*Instance, error) {
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return nil, fmt.Errorf("http listen on %s: %w", httpAddr, err)
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = ln.Addr().String()
	}
	node, err := cluster.Open(cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           api.NewServer(node, logger.With("node", cfg.ID)).Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	in := &Instance{Node: node, HTTP: srv, ln: ln, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		in.done <- err
	}()
	return in, nil
}

// Addr returns the HTTP address the instance serves on.
func (in *Instance) Addr() string { return in.ln.Addr().String() }

// Done delivers the HTTP server's exit error.
func (in *Instance) Done() <-chan error { return in.done }

// Close stops serving HTTP (letting requests in flight finish for a moment),
// then shuts the node down.
func (in *Instance) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	in.HTTP.Shutdown(ctx)
	return in.Node.Close()
}
