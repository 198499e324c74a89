// Package load runs a benchmark workload against any system and measures it:
// a fixed number of clients, a warm-up whose operations are not counted, then
// a measured window. It knows nothing of fencer, so that the etcd side of the
// comparison (a separate Go module) measures with exactly the same code.
//
// Closed loop (the default): each client starts its next operation as soon as
// the last one ends, so throughput is what the system sustains at that
// concurrency. Open loop (Rate > 0): operations are scheduled at a fixed total
// rate and each one's latency runs from its scheduled start, not from when a
// client got round to it, so a system that falls behind shows its queueing
// delay instead of hiding it (no coordinated omission).
package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Config is one run. Zero values mean the defaults.
type Config struct {
	Clients  int           // concurrent clients (default 1)
	Duration time.Duration // measured window (default 10s)
	Warmup   time.Duration // run before the window, not counted
	Rate     float64       // total operations per second; 0 is closed loop
	// OpTimeout bounds each operation (default 10s).
	OpTimeout time.Duration
	// Ops, when positive, ends the run once that many operations have
	// started (the warm-up's included), even before Duration is up.
	Ops int64
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	switch {
	case c.Clients < 0 || c.Clients > 10000:
		return fmt.Errorf("clients %d: want 1 to 10000", c.Clients)
	case c.Duration < 0 || c.Warmup < 0 || c.OpTimeout < 0:
		return errors.New("durations must not be negative")
	case c.Ops < 0:
		return fmt.Errorf("ops %d: want 0 (no limit) or more", c.Ops)
	case c.Rate < 0:
		return fmt.Errorf("rate %v: want 0 (closed loop) or a positive rate", c.Rate)
	}
	return nil
}

// Op is one operation of one client.
type Op func(ctx context.Context) error

// Client prepares client i (0-based) before the run: it returns the client's
// operation and a cleanup run after the run. Anything slow (sessions, held
// leases for a renewal workload) belongs here, not in the operation.
type Client func(ctx context.Context, i int) (op Op, cleanup func(), err error)

// Prepare prepares n clients in order and returns their operations and one
// function that runs every cleanup, to be called even when Prepare fails
// (the clients prepared before the failure are cleaned up then).
func Prepare(ctx context.Context, n int, newClient Client) ([]Op, func(), error) {
	ops := make([]Op, n)
	var cleanups []func()
	cleanup := func() {
		for _, c := range cleanups {
			c()
		}
	}
	for i := range ops {
		op, c, err := newClient(ctx, i)
		if err != nil {
			return nil, cleanup, fmt.Errorf("preparing client %d: %w", i, err)
		}
		ops[i] = op
		if c != nil {
			cleanups = append(cleanups, c)
		}
	}
	return ops, cleanup, nil
}

// Result is the outcome of a run. Latencies are in milliseconds.
type Result struct {
	System    string  `json:"system"`
	Workload  string  `json:"workload"`
	Clients   int     `json:"clients"`
	Rate      float64 `json:"rate,omitempty"` // target ops/s in open loop
	Seconds   float64 `json:"seconds"`        // measured window
	Ops       int64   `json:"ops"`            // operations that succeeded in the window
	Errors    int64   `json:"errors"`         // operations that failed in the window
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Ms     float64 `json:"p50_ms"`
	P90Ms     float64 `json:"p90_ms"`
	P99Ms     float64 `json:"p99_ms"`
	P999Ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	// FirstError is one error seen, to tell what kind of failures they were.
	FirstError string `json:"first_error,omitempty"`
}

// Run prepares every client, runs the warm-up and the measured window, and
// cleans up. In closed loop an operation counts if it ends inside the
// window; operations still running when the window closes finish (within
// OpTimeout) but are not counted, and are never cancelled, so the end of a
// run is not an error. In open loop an operation counts if it was scheduled
// inside the window, and the run waits for the last of them.
// ctx cancels the run early; then the result covers what was measured.
//
// It is long because it is one benchmark run from start to report, each step
// used once; split, its timing would be spread over helpers.
func Run(ctx context.Context, cfg Config, newClient Client) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	ops, cleanup, err := Prepare(ctx, cfg.Clients, newClient)
	defer cleanup()
	if err != nil {
		return Result{}, err
	}

	start := time.Now()
	window := start.Add(cfg.Warmup)
	end := window.Add(cfg.Duration)
	// runCtx ends the run early (the caller, or Ops reached); stopCtx also
	// ends with the window, which stops a closed loop. The open loop's
	// schedule runs to the window's end whatever the clients' delay, so that
	// the operations an overloaded system is latest to start still count.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	stopCtx, stopWindow := context.WithDeadline(runCtx, end)
	defer stopWindow()

	var ticks <-chan time.Time // scheduled start times, open loop only
	if cfg.Rate > 0 {
		ch := make(chan time.Time, cfg.Clients)
		ticks = ch
		go schedule(runCtx, start, end, cfg.Rate, ch)
	}

	rec := newRecorder()
	var started atomic.Int64
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var began time.Time
				if ticks == nil {
					if stopCtx.Err() != nil {
						return
					}
					began = time.Now()
				} else {
					var ok bool
					if began, ok = <-ticks; !ok {
						return
					}
				}
				if cfg.Ops > 0 && started.Add(1) > cfg.Ops {
					stop()
					return
				}
				// The operation's context is not stopCtx: the window closing
				// must not fail an operation in flight.
				opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
				err := op(opCtx)
				cancel()
				done := time.Now()
				counted := done // closed loop: by when it ended
				if ticks != nil {
					counted = began // open loop: by when it was due
				}
				if counted.Before(window) || counted.After(end) {
					continue
				}
				rec.add(done.Sub(began), err)
			}
		}()
	}
	wg.Wait()
	measured := min(time.Since(window), cfg.Duration)
	if ticks != nil {
		measured = max(min(time.Since(window), cfg.Duration), 0)
	}
	if stopped := time.Now(); cfg.Ops > 0 && stopped.Before(end) {
		// The run ended on its operation count: the window closed when the
		// last operation did.
		measured = max(stopped.Sub(window), 0)
	}
	return rec.summarize(cfg, measured), nil
}

// schedule sends the scheduled start time of each operation, at fixed
// intervals for rate per second, from start until end or until ctx ends. A
// send blocks while every client is busy; the schedule does not slip, so the
// wait shows up in the latencies.
func schedule(ctx context.Context, start, end time.Time, rate float64, out chan<- time.Time) {
	defer close(out)
	interval := time.Duration(float64(time.Second) / rate)
	for k := int64(0); ; k++ {
		at := start.Add(time.Duration(k) * interval)
		if at.After(end) {
			return
		}
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-ctx.Done():
			return
		case out <- at:
		}
	}
}

// recorder holds the measurements of every client.
type recorder struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram // microseconds
	errors   int64
	firstErr error
}

// maxRecorded is the largest latency the histogram tells apart; a longer one
// is recorded as this (OpTimeout is far below it by default).
const maxRecorded = 2 * time.Minute

func newRecorder() *recorder {
	return &recorder{hist: hdrhistogram.New(1, maxRecorded.Microseconds(), 3)}
}

func (r *recorder) add(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errors++
		if r.firstErr == nil {
			r.firstErr = err
		}
		return
	}
	us := min(max(d.Microseconds(), 1), maxRecorded.Microseconds())
	r.hist.RecordValue(us) // cannot fail: us is in range
}

func (r *recorder) summarize(cfg Config, measured time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Clients: cfg.Clients, Rate: cfg.Rate, Seconds: measured.Seconds(), Errors: r.errors}
	if r.firstErr != nil {
		res.FirstError = r.firstErr.Error()
	}
	res.Ops = r.hist.TotalCount()
	if measured > 0 {
		res.OpsPerSec = float64(res.Ops) / measured.Seconds()
	}
	if res.Ops == 0 {
		return res
	}
	at := func(p float64) float64 { return float64(r.hist.ValueAtPercentile(p)) / 1000 }
	res.P50Ms, res.P90Ms, res.P99Ms, res.P999Ms = at(50), at(90), at(99), at(99.9)
	res.MaxMs = float64(r.hist.Max()) / 1000
	return res
}

// Text formats a result as one line for humans.
func (r Result) Text() string {
	s := fmt.Sprintf("%-8s %-14s clients=%-3d ops/s=%-9.1f p50=%.2fms p90=%.2fms p99=%.2fms p99.9=%.2fms max=%.2fms ops=%d errors=%d",
		r.System, r.Workload, r.Clients, r.OpsPerSec, r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs, r.Ops, r.Errors)
	if r.Rate > 0 {
		s += fmt.Sprintf(" (open loop at %.0f/s)", r.Rate)
	}
	if r.FirstError != "" {
		s += fmt.Sprintf(" (first error: %s)", r.FirstError)
	}
	return s
}
