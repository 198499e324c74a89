// Package outage measures how long a system stops serving while something
// happens to it, such as its leader being stopped: clients run an operation
// in a closed loop, every success is time-stamped, and the result is the
// longest interval in which no client succeeded. Like package load it knows
// nothing of fencer, so that the etcd side of the comparison
// (scripts/etcdbench) measures with exactly the same code.
package outage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencer-io/fencer/internal/bench/load"
)

// Config is one run. Zero values mean the defaults.
type Config struct {
	Clients  int           // concurrent clients (default 16)
	Duration time.Duration // the whole run, warm-up included (default 10s)
	// Warmup is not judged: gaps are measured from Warmup to Duration, both
	// ends included, so a system that never recovers shows the whole rest
	// of the run as its gap.
	Warmup time.Duration
	// OpTimeout bounds each operation (default 10s).
	OpTimeout time.Duration
	// Group labels client i, to report kinds of client apart (default: one
	// group, "all").
	Group func(i int) string
	// Event, when set, runs once At after the start; it returns what it
	// did, for the report. Gaps are reported relative to its start.
	At    time.Duration
	Event func(ctx context.Context) (string, error)
	// Origin, when set, says after the event ran the moment gaps are
	// measured from (zero: when the event began), for an event that does
	// something else first.
	Origin func() time.Time
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.Group == nil {
		c.Group = func(int) string { return "all" }
	}
	switch {
	case c.Clients < 0 || c.Clients > 10000:
		return fmt.Errorf("clients %d: want 1 to 10000", c.Clients)
	case c.Duration < 0 || c.Warmup < 0 || c.OpTimeout < 0 || c.At < 0:
		return errors.New("durations must not be negative")
	case c.Warmup >= c.Duration:
		return fmt.Errorf("warm-up %v leaves nothing of the %v run to measure", c.Warmup, c.Duration)
	case c.Event != nil && (c.At < c.Warmup || c.At >= c.Duration):
		return fmt.Errorf("event at %v: want it within the measured window %v..%v", c.At, c.Warmup, c.Duration)
	}
	return nil
}

// Gap is an interval without a successful operation. Its ends are in
// milliseconds since the event (negative: before it), or since the start of
// the measured window when there is no event.
type Gap struct {
	Ms     float64 `json:"ms"`
	FromMs float64 `json:"from_ms"`
	ToMs   float64 `json:"to_ms"`
}

// Group is what one kind of client saw.
type Group struct {
	Name    string `json:"name"`
	Clients int    `json:"clients"`
	Ops     int64  `json:"ops"`
	Errors  int64  `json:"errors"`
	// Longest is the longest interval in which no client of the group
	// succeeded.
	Longest Gap `json:"longest"`
	// WorstClientMs is the longest interval one client of the group went
	// without a success: what the unluckiest caller felt.
	WorstClientMs float64 `json:"worst_client_ms"`
}

// Result is the outcome of a run.
type Result struct {
	System  string  `json:"system"`
	Mode    string  `json:"mode"`
	Clients int     `json:"clients"`
	Seconds float64 `json:"seconds"` // measured window
	// Event says what the event did; EventError why it failed.
	Event      string `json:"event,omitempty"`
	EventError string `json:"event_error,omitempty"`
	Ops        int64  `json:"ops"`
	Errors     int64  `json:"errors"`
	// Longest is the longest interval in which no client succeeded.
	Longest Gap `json:"longest"`
	// AtEvent is the longest such interval that ends after the event and
	// begins no later than a second after it: what the event cost, apart
	// from stalls of a shared machine before or long after it. Before is
	// the longest that ended before the event: the noise floor.
	AtEvent       Gap     `json:"at_event"`
	Before        Gap     `json:"before"`
	WorstClientMs float64 `json:"worst_client_ms"`
	Groups        []Group `json:"groups"`
	// Timeline holds milestones the caller observed (ms since the event),
	// such as when a new leader was first reported.
	Timeline   map[string]float64 `json:"timeline,omitempty"`
	FirstError string             `json:"first_error,omitempty"`
	// DrainMs is how long the operations still running at the end of the
	// run took to finish (each is bounded by OpTimeout): a system that
	// holds requests well past their end shows here, not in the gaps.
	DrainMs float64 `json:"drain_ms"`
}

// client is one client's record; only that client writes it.
type client struct {
	group    string
	ok       []time.Time // completion times of successes
	failed   []time.Time // completion times of failures
	firstErr error
}

// Run prepares every client, runs them for the configured time with the
// event at its moment, cleans up, and judges the measured window.
// Operations still running at the end finish (within OpTimeout) but do not
// count. ctx cancels the run early.
//
// It is long because it is one measured run, stop to report, each step used
// once.
func Run(ctx context.Context, cfg Config, newClient load.Client) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	ops, cleanup, err := load.Prepare(ctx, cfg.Clients, newClient)
	defer cleanup()
	if err != nil {
		return Result{}, err
	}

	start := time.Now()
	end := start.Add(cfg.Duration)
	stopCtx, stop := context.WithDeadline(ctx, end)
	defer stop()
	clients := make([]client, cfg.Clients)
	var wg sync.WaitGroup
	for i, op := range ops {
		clients[i].group = cfg.Group(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &clients[i]
			for stopCtx.Err() == nil {
				opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
				err := op(opCtx)
				cancel()
				if err != nil {
					c.failed = append(c.failed, time.Now())
					if c.firstErr == nil {
						c.firstErr = err
					}
					continue
				}
				c.ok = append(c.ok, time.Now())
			}
		}()
	}
	var event struct {
		at   time.Time
		what string
		err  error
	}
	if cfg.Event != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(time.Until(start.Add(cfg.At)))
			defer t.Stop()
			select {
			case <-stopCtx.Done():
				return
			case <-t.C:
			}
			event.at = time.Now()
			event.what, event.err = cfg.Event(stopCtx)
			if cfg.Origin != nil && !cfg.Origin().IsZero() {
				event.at = cfg.Origin()
			}
		}()
	}
	wg.Wait()
	drain := max(time.Since(end), 0)

	window := start.Add(cfg.Warmup)
	origin := window
	if !event.at.IsZero() {
		origin = event.at
	}
	if now := time.Now(); now.Before(end) {
		end = now // cancelled early
	}
	res := judge(clients, window, end, origin)
	res.Clients = cfg.Clients
	res.DrainMs = ms(drain)
	res.Event = event.what
	if event.err != nil {
		res.EventError = event.err.Error()
	}
	if cfg.Event != nil && event.at.IsZero() {
		res.EventError = "the run ended before the event"
	}
	return res, nil
}

// judge computes the gaps of the window [from, to]; times are reported
// relative to origin.
func judge(clients []client, from, to, origin time.Time) Result {
	res := Result{Seconds: to.Sub(from).Seconds()}
	groups := map[string]*Group{}
	var names []string
	var all []time.Time
	byGroup := map[string][]time.Time{}
	for i := range clients {
		c := &clients[i]
		g := groups[c.group]
		if g == nil {
			g = &Group{Name: c.group}
			groups[c.group] = g
			names = append(names, c.group)
		}
		in := within(c.ok, from, to)
		failed := int64(len(within(c.failed, from, to)))
		g.Clients++
		g.Ops += int64(len(in))
		g.Errors += failed
		res.Ops += int64(len(in))
		res.Errors += failed
		if res.FirstError == "" && c.firstErr != nil {
			res.FirstError = c.firstErr.Error()
		}
		own := longest(in, from, to, origin)
		g.WorstClientMs = max(g.WorstClientMs, own.Ms)
		res.WorstClientMs = max(res.WorstClientMs, own.Ms)
		all = append(all, in...)
		byGroup[c.group] = append(byGroup[c.group], in...)
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	res.Longest = longest(all, from, to, origin)
	if !origin.Equal(from) {
		res.AtEvent = longestWhere(all, from, to, origin, func(g Gap) bool { return g.ToMs > 0 && g.FromMs <= 1000 })
		res.Before = longestWhere(all, from, to, origin, func(g Gap) bool { return g.ToMs <= 0 })
	}
	for _, name := range names {
		g := groups[name]
		ts := byGroup[name]
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		g.Longest = longest(ts, from, to, origin)
		res.Groups = append(res.Groups, *g)
	}
	return res
}

// within returns the times of ts (in order) that fall in [from, to].
func within(ts []time.Time, from, to time.Time) []time.Time {
	var out []time.Time
	for _, t := range ts {
		if !t.Before(from) && !t.After(to) {
			out = append(out, t)
		}
	}
	return out
}

// longest returns the longest interval between consecutive times of sorted,
// counting from and to as ends.
func longest(sorted []time.Time, from, to, origin time.Time) Gap {
	return longestWhere(sorted, from, to, origin, func(Gap) bool { return true })
}

// longestWhere is longest among the intervals that keep says to.
func longestWhere(sorted []time.Time, from, to, origin time.Time, keep func(Gap) bool) Gap {
	var g Gap
	prev := from
	for i := 0; i <= len(sorted); i++ {
		t := to
		if i < len(sorted) {
			t = sorted[i]
		}
		c := Gap{Ms: ms(t.Sub(prev)), FromMs: ms(prev.Sub(origin)), ToMs: ms(t.Sub(origin))}
		if c.Ms > g.Ms && keep(c) {
			g = c
		}
		prev = t
	}
	return g
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Text formats a result as one line for humans.
func (r Result) Text() string {
	s := fmt.Sprintf("%-8s %-9s clients=%-3d longest gap %.0f ms (%+.0f..%+.0f ms), at the event %.0f ms (%+.0f..%+.0f ms), before it %.0f ms; worst client %.0f ms ops=%d errors=%d",
		r.System, r.Mode, r.Clients, r.Longest.Ms, r.Longest.FromMs, r.Longest.ToMs, r.AtEvent.Ms, r.AtEvent.FromMs, r.AtEvent.ToMs, r.Before.Ms, r.WorstClientMs, r.Ops, r.Errors)
	if len(r.Groups) > 1 {
		for _, g := range r.Groups {
			s += fmt.Sprintf("; %s: gap %.0f ms, worst client %.0f ms, errors %d", g.Name, g.Longest.Ms, g.WorstClientMs, g.Errors)
		}
	}
	if r.Event != "" {
		s += "; " + r.Event
	}
	if r.EventError != "" {
		s += "; event failed: " + r.EventError
	}
	if r.FirstError != "" {
		s += fmt.Sprintf(" (first error: %s)", r.FirstError)
	}
	if r.DrainMs >= 1000 {
		s += fmt.Sprintf("; operations still running at the end took %.0f ms more", r.DrainMs)
	}
	return s
}
