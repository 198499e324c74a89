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

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {90, 90}, {99, 99}, {100, 100}, {0, 1}} {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}
