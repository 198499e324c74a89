package outage

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/internal/bench/load"
)

// An outage the event causes shows as the longest gap, placed after the
// event, while every client keeps succeeding before and after it.
func TestRunMeasuresTheOutageAtTheEvent(t *testing.T) {
	var down atomic.Bool
	cfg := Config{
		Clients: 4, Duration: 1500 * time.Millisecond, Warmup: 200 * time.Millisecond, At: 600 * time.Millisecond,
		Group: func(i int) string { return []string{"even", "odd"}[i%2] },
		Event: func(ctx context.Context) (string, error) {
			down.Store(true)
			time.AfterFunc(300*time.Millisecond, func() { down.Store(false) })
			return "went down for 300ms", nil
		},
	}
	res, err := Run(context.Background(), cfg, func(context.Context, int) (load.Op, func(), error) {
		return func(ctx context.Context) error {
			time.Sleep(2 * time.Millisecond) // one operation's work
			if down.Load() {
				return errors.New("down")
			}
			return nil
		}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g := res.AtEvent
	// Loose bounds: a loaded machine delays operations and the event's
	// goroutine by tens of milliseconds; a gap placed anywhere else (before
	// the event, or ending at the first error) is still far outside them.
	if g.Ms < 290 || g.Ms > 600 || g.FromMs < -150 || g.FromMs > 50 {
		t.Fatalf("gap at the event %+v, want about 300ms starting at the event", g)
	}
	if res.Longest != g || res.Before.Ms > 200 || res.Event != "went down for 300ms" || res.Errors == 0 || res.Ops == 0 {
		t.Fatalf("result %+v", res)
	}
	if len(res.Groups) != 2 || res.Groups[0].Clients != 2 || res.Groups[0].Longest.Ms < 290 || res.WorstClientMs < g.Ms {
		t.Fatalf("groups %+v, worst client %v", res.Groups, res.WorstClientMs)
	}
}

// A system that never recovers shows the rest of the run as its gap.
func TestRunCountsAnOutageToTheEnd(t *testing.T) {
	var down atomic.Bool
	cfg := Config{Clients: 2, Duration: 800 * time.Millisecond, At: 300 * time.Millisecond,
		Event: func(context.Context) (string, error) { down.Store(true); return "", nil }}
	res, err := Run(context.Background(), cfg, func(context.Context, int) (load.Op, func(), error) {
		return func(context.Context) error {
			time.Sleep(time.Millisecond)
			if down.Load() {
				return errors.New("down")
			}
			return nil
		}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// About 500 ms; a loaded machine records the event late. A gap that
	// were not counted to the end would be a few milliseconds.
	if res.AtEvent.Ms < 300 || res.AtEvent.ToMs < 300 {
		t.Fatalf("gap %+v, want the rest of the run (about 500ms)", res.AtEvent)
	}
}

func TestConfigRefusesAnEventOutsideTheWindow(t *testing.T) {
	ev := func(context.Context) (string, error) { return "", nil }
	for _, c := range []Config{
		{Duration: time.Second, Warmup: 500 * time.Millisecond, At: 100 * time.Millisecond, Event: ev},
		{Duration: time.Second, At: 2 * time.Second, Event: ev},
		{Duration: time.Second, Warmup: time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}
