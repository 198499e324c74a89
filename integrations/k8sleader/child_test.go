package k8sleader_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/integrations/k8sleader"
)

// electorEnv, when set in the environment, makes the test binary run as an
// elector process (runElector) with the JSON electorConfig it holds.
const electorEnv = "K8SLEADER_TEST_ELECTOR"

// electorConfig is what the test tells an elector process.
type electorConfig struct {
	Identity  string
	Endpoints []string
	Election  string
	// Resource is the fenced resource's base URL; the leader writes its
	// term to Resource/v1/data/Key every WriteEvery.
	Resource   string
	Key        string
	WriteEvery time.Duration

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Skewed makes the elector believe every other holder's lease has
	// run out (skewedLock): it campaigns at every retry.
	Skewed bool
}

// skewedLock is an elector's view through a clock that runs fast: any
// other holder's record reads as expired (a lease of 0s), so client-go's
// elector tries to take the election at every retry, as it would take a
// Kubernetes Lease. Only fencer's refusal stops it.
type skewedLock struct{ *k8sleader.Lock }

func (l skewedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Lock.Get(ctx)
	if err == nil && rec.HolderIdentity != l.Identity() {
		rec.LeaseDurationSeconds = 0
		raw, err = json.Marshal(rec)
	}
	return rec, raw, err
}

// event is one line an elector process prints on stdout.
type event struct {
	Ev     string `json:"ev"` // leading, stopped, write
	ID     string `json:"id"`
	Term   uint64 `json:"term,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`    // a write's Fencing-Sequence
	Status int    `json:"status,omitempty"` // a write's HTTP status, 0 if it got none
	Code   string `json:"code,omitempty"`   // a refused write's error code
	Forced bool   `json:"forced,omitempty"` // the write the test asked for on stdin
}

// runElector is an elector process: client-go's LeaderElector on a
// k8sleader.Lock, run again each time it stops leading, until SIGTERM
// (which releases the election). While it leads, a controller loop writes
// to the fenced resource with the lock's term, checking only the elector's
// context, as a controller does: a leader paused between its check and its
// write still sends it. A "write" line on stdin sends one more write with
// the last term it led with, whatever it believes now: the write that was
// in flight when the pause struck.
func runElector(raw string) int {
	var cfg electorConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "elector config:", err)
		return 2
	}
	var outMu sync.Mutex
	emit := func(e event) {
		e.ID = cfg.Identity
		b, _ := json.Marshal(e)
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.Write(append(b, '\n'))
	}
	c, err := client.New(cfg.Endpoints, client.WithTimeout(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lock, err := k8sleader.New(k8sleader.Config{Client: c, Election: cfg.Election, Identity: cfg.Identity, TTL: cfg.LeaseDuration})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var elect resourcelock.Interface = lock
	if cfg.Skewed {
		elect = skewedLock{lock}
	}
	hc := &http.Client{Timeout: time.Second}
	// A term writes the key many times, so it numbers its writes
	// (Fencing-Sequence): only a greater term refuses one.
	var seq struct {
		sync.Mutex
		term, n uint64
	}
	write := func(term uint64, forced bool) {
		seq.Lock()
		if seq.term != term {
			seq.term, seq.n = term, 0
		}
		seq.n++
		n := seq.n
		seq.Unlock()
		req, _ := http.NewRequest(http.MethodPut, cfg.Resource+"/v1/data/"+cfg.Key, strings.NewReader(cfg.Identity))
		req.Header.Set(wire.HeaderToken, strconv.FormatUint(term, 10))
		req.Header.Set(wire.HeaderSequence, strconv.FormatUint(n, 10))
		e := event{Ev: "write", Term: term, Seq: n, Forced: forced}
		if resp, err := hc.Do(req); err == nil {
			e.Status = resp.StatusCode
			var body wire.Error
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			e.Code = body.Code
		}
		emit(e)
	}
	var lastTerm struct {
		sync.Mutex
		v uint64
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "write" {
				lastTerm.Lock()
				term := lastTerm.v
				lastTerm.Unlock()
				write(term, true)
			}
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            elect,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Election,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					term := lock.Term()
					lastTerm.Lock()
					lastTerm.v = term
					lastTerm.Unlock()
					emit(event{Ev: "leading", Term: term})
					t := time.NewTicker(cfg.WriteEvery)
					defer t.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-t.C:
							write(term, false)
						}
					}
				},
				OnStoppedLeading: func() { emit(event{Ev: "stopped"}) },
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		le.Run(ctx)
	}
	return 0
}
