package load

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsOpsAndErrors(t *testing.T) {
	var calls atomic.Int64
	boom := errors.New("boom")
	res, err := Run(context.Background(), Config{Clients: 4, Duration: time.Minute, Ops: 100}, func(_ context.Context, i int) (Op, func(), error) {
		return func(context.Context) error {
			if calls.Add(1)%10 == 0 {
				return boom
			}
			return nil
		}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 100 {
		t.Errorf("ran %d ops, want exactly 100", calls.Load())
	}
	if res.Ops != 90 || res.Errors != 10 {
		t.Errorf("ops=%d errors=%d, want 90 and 10", res.Ops, res.Errors)
	}
	if res.FirstError != "boom" {
		t.Errorf("first error %q, want boom", res.FirstError)
	}
	if res.Clients != 4 || res.P50Ms > res.P99Ms || res.P99Ms > res.MaxMs {
		t.Errorf("inconsistent result: %+v", res)
	}
}

func TestRunPreparesAndCleansUpEveryClient(t *testing.T) {
	var prepared, cleaned atomic.Int64
	_, err := Run(context.Background(), Config{Clients: 3, Ops: 6}, func(_ context.Context, i int) (Op, func(), error) {
		prepared.Add(1)
		return func(context.Context) error { return nil }, func() { cleaned.Add(1) }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if prepared.Load() != 3 || cleaned.Load() != 3 {
		t.Errorf("prepared %d, cleaned %d; want 3 and 3", prepared.Load(), cleaned.Load())
	}
}

func TestRunFailsWhenAClientCannotStart(t *testing.T) {
	var cleaned atomic.Int64
	_, err := Run(context.Background(), Config{Clients: 3, Ops: 1}, func(_ context.Context, i int) (Op, func(), error) {
		if i == 2 {
			return nil, nil, errors.New("no session")
		}
		return func(context.Context) error { return nil }, func() { cleaned.Add(1) }, nil
	})
	if err == nil {
		t.Fatal("want an error")
	}
	if cleaned.Load() != 2 {
		t.Errorf("cleaned %d clients, want the 2 that started", cleaned.Load())
	}
}

func TestRunOpenLoopUsesScheduledStart(t *testing.T) {
	// One client, ops that take no time, at a rate the client easily keeps
	// up with: every op runs, and none is counted twice.
	var calls atomic.Int64
	res, err := Run(context.Background(), Config{Clients: 1, Rate: 1000, Ops: 20, Duration: time.Minute}, func(context.Context, int) (Op, func(), error) {
		return func(context.Context) error { calls.Add(1); return nil }, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 20 || res.Ops != 20 || res.Rate != 1000 {
		t.Errorf("calls=%d ops=%d rate=%v, want 20, 20, 1000", calls.Load(), res.Ops, res.Rate)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	_, err := Run(ctx, Config{Clients: 2, Duration: time.Hour}, func(context.Context, int) (Op, func(), error) {
		return func(context.Context) error {
			if calls.Add(1) == 50 {
				cancel()
			}
			return nil
		}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{Clients: -1}, {Rate: -1}, {Ops: -1}, {Duration: -time.Second}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	c := Config{}
	if err := c.Validate(); err != nil || c.Clients != 1 || c.Duration != 10*time.Second {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

func TestRecorderPercentiles(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 1000; i++ {
		r.add(time.Duration(i)*time.Millisecond, nil)
	}
	r.add(time.Second, errors.New("late"))
	res := r.summarize(Config{Clients: 1}, time.Second)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", res.P50Ms, 500}, {"p90", res.P90Ms, 900}, {"p99", res.P99Ms, 990}, {"p99.9", res.P999Ms, 999}, {"max", res.MaxMs, 1000}} {
		// Three significant digits: within 0.1%.
		if c.got < c.want*0.999 || c.got > c.want*1.001 {
			t.Errorf("%s = %v ms, want %v", c.name, c.got, c.want)
		}
	}
	if res.Ops != 1000 || res.Errors != 1 || res.FirstError != "late" || res.OpsPerSec != 1000 {
		t.Errorf("ops=%d errors=%d first=%q ops/s=%v", res.Ops, res.Errors, res.FirstError, res.OpsPerSec)
	}
}

func TestOpenLoopCountsQueueingDelay(t *testing.T) {
	// One client whose operations take 20 ms, scheduled every 10 ms: the
	// system falls behind by 10 ms per operation. Measured from each
	// operation's scheduled start, the latencies grow to about the whole
	// backlog; measured from when the client got round to it they would all
	// be 20 ms (coordinated omission). Every scheduled operation counts, the
	// ones that start after the window closed included.
	res, err := Run(context.Background(), Config{Clients: 1, Rate: 100, Duration: 500 * time.Millisecond}, func(context.Context, int) (Op, func(), error) {
		return func(context.Context) error { time.Sleep(20 * time.Millisecond); return nil }, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops < 49 || res.Ops > 51 {
		t.Errorf("ops=%d, want the 50 or so scheduled in the window", res.Ops)
	}
	if res.P50Ms < 150 || res.P99Ms < 350 {
		t.Errorf("p50=%v p99=%v ms, want the queueing delay (about 250 and 500 ms)", res.P50Ms, res.P99Ms)
	}
}
