package opscmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/internal/bench"
	"github.com/fencer-io/fencer/internal/bench/load"
	"github.com/fencer-io/fencer/internal/gcfloor"
)

// benchOptions are the flags of "fencer bench".
type benchOptions struct {
	client    cli.ClientFlags
	workloads string
	load      load.Config
	ttl       time.Duration
	wait      time.Duration
	cpuProf   string
}

// NewBenchCmd returns "fencer bench".
func NewBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a cluster: lock cycles, handoffs, renewals and fenced writes per second",
		Long: `Measure a running cluster. Each client sends one operation at a time to the
leader over a kept-alive connection (closed loop); with --rate the operations
are scheduled at that total rate instead, and latency counts from each one's
scheduled start (open loop). Operations in the warm-up are not counted.
Requests are retried as the Go client retries them (an acquire with one
request id across its attempts); an operation that still fails counts as an
error.

Workloads (comma-separated in --workload):
  uncontended   each client its own lock: acquire, release
  contended     every client on one lock, queueing (--wait): acquire, release;
                ops/s is handoffs/s
  renew         each client holds a lease and renews it
  fenced-write  acquire, a fenced PUT naming the lock, release; a write whose
                answer was lost is confirmed by reading the key, as a fenced
                writer does; a refused write (a newer token wrote, the lock
                is no longer held) counts as an error
  hold          acquire a new lock and keep it (use a long --ttl and --ops)`,
		Example: `  fencer bench                                   # uncontended, 16 clients, 10 s
  fencer bench -w uncontended,contended,renew -c 32 -d 30s
  fencer bench -w fenced-write --rate 2000 -o json`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.Bind(fs)
	fs.StringVarP(&o.workloads, "workload", "w", "uncontended", "workloads to run, comma-separated: "+strings.Join(bench.Workloads, ", "))
	fs.IntVarP(&o.load.Clients, "clients", "c", 16, "concurrent clients")
	fs.DurationVarP(&o.load.Duration, "duration", "d", 10*time.Second, "measured time per workload")
	fs.DurationVar(&o.load.Warmup, "warmup", 2*time.Second, "time run before measuring, per workload")
	fs.Float64Var(&o.load.Rate, "rate", 0, "open loop: total operations per second (0: closed loop)")
	fs.Int64Var(&o.load.Ops, "ops", 0, "stop after this many operations (0: run for --duration)")
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "TTL of every grant")
	fs.DurationVar(&o.wait, "wait", 30*time.Second, "contended: how long an acquire may queue")
	fs.StringVar(&o.cpuProf, "cpu-profile", "", "write a Go CPU profile of this benchmark client to this file")
	return cmd
}

func (o *benchOptions) validate() ([]string, error) {
	if err := o.client.Validate(); err != nil {
		return nil, err
	}
	var names []string
	for _, w := range strings.Split(o.workloads, ",") {
		if w = strings.TrimSpace(w); w == "" {
			continue
		}
		if !slices.Contains(bench.Workloads, w) {
			return nil, cli.Usagef("--workload %q: want some of %s", w, strings.Join(bench.Workloads, ", "))
		}
		names = append(names, w)
	}
	if len(names) == 0 {
		return nil, cli.Usagef("--workload is empty")
	}
	if o.load.Clients < 1 {
		return nil, cli.Usagef("--clients %d: want at least 1", o.load.Clients)
	}
	if o.load.Duration <= 0 {
		return nil, cli.Usagef("--duration %v: want a positive duration", o.load.Duration)
	}
	if o.ttl < wire.MinTTL || o.ttl > wire.MaxTTL {
		return nil, cli.Usagef("--ttl %v: want %v to %v", o.ttl, wire.MinTTL, wire.MaxTTL)
	}
	if o.wait < 0 || o.wait > wire.MaxWait {
		return nil, cli.Usagef("--wait %v: want 0 to %v", o.wait, wire.MaxWait)
	}
	o.load.OpTimeout = o.wait + o.client.Timeout
	return names, o.load.Validate()
}

func (o *benchOptions) run(cmd *cobra.Command) error {
	names, err := o.validate()
	if err != nil {
		return err
	}
	if o.cpuProf != "" {
		// The client shares the machine with the cluster it measures, so
		// its own CPU is part of the result.
		pf, err := os.Create(o.cpuProf)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The measuring client shares the CPUs with what it measures: keep its
	// collector quiet, as scripts/etcdbench does for etcd's client.
	gcfloor.Start(gcfloor.DefaultFloor)
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tlsCfg, security, err := o.client.Security()
	if err != nil {
		return err
	}
	f, err := bench.NewFencer(ctx, o.client.EndpointList(), o.load.Clients, o.ttl, o.wait, o.client.Timeout, bench.Conn{TLS: tlsCfg, HTTP2: o.client.HTTP2}, security...)
	if err != nil {
		return err
	}
	defer f.Client.Close()
	out := cmd.OutOrStdout()
	results := []load.Result{}
	for _, name := range names {
		newClient, err := f.Workload(name)
		if err != nil {
			return err
		}
		res, err := load.Run(ctx, o.load, newClient)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.System, res.Workload = "fencer", name
		results = append(results, res)
		if !o.client.JSON() {
			fmt.Fprintln(out, res.Text())
		}
		if ctx.Err() != nil {
			break
		}
	}
	if o.client.JSON() {
		return cli.WriteJSON(out, results)
	}
	return context.Cause(ctx)
}
