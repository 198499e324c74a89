package k8sleader_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv(electorEnv); raw != "" {
		os.Exit(runElector(raw))
	}
	os.Exit(m.Run())
}

// Timing of the electors: client-go's own rules (LeaseDuration >
// RenewDeadline > 1.2 RetryPeriod), and records in whole seconds, make 2s
// the shortest useful lease. The grant's TTL is the same 2s.
const (
	leaseDuration = 2 * time.Second
	renewDeadline = 1500 * time.Millisecond
	retryPeriod   = 250 * time.Millisecond
)

// Three processes run client-go's LeaderElector on a k8sleader.Lock against
// three `fencer serve` members, and their leader writes its term to the
// example fenced resource; a fourth joins whose clock runs fast, so that
// it tries to take the election at every retry. Exactly one of them leads
// per term and terms increase; a leader stays leader while it renews
// (nobody takes over, the fast one included); a leader paused with SIGSTOP loses the election to
// another within about a TTL, and when it wakes its writes with its old
// term are refused by the resource; a leader stopped with SIGTERM resigns
// (ReleaseOnCancel) and another takes over.
func TestElectorsFencedByFencer(t *testing.T) {
	endpoints, resource := startFencer(t, 3)
	es := &electors{t: t, dir: t.TempDir(), procs: map[string]*proc{}, cfg: electorConfig{
		Endpoints: endpoints, Election: "controller", Resource: resource, Key: "state",
		WriteEvery: 100 * time.Millisecond, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
	}}
	for _, id := range []string{"e1", "e2", "e3"} {
		es.start(id)
	}
	isLeading := func(e event) bool { return e.Ev == "leading" }

	// The first leader, and its first accepted write.
	first, at := es.wait(20*time.Second, 0, "a first leader", isLeading)
	es.wait(5*time.Second, at, first.ID+"'s first accepted write", func(e event) bool {
		return e.ID == first.ID && e.Ev == "write" && e.Status == http.StatusOK
	})
	// An elector whose clock runs fast joins: it tries to take the
	// election at every retry. Fencer refuses it, and the leader renews
	// through fencer: for longer than a lease duration nobody else leads.
	skewed := es.cfg
	skewed.Skewed = true
	es.startWith("e4", skewed)
	stable := time.Now().Add(leaseDuration + time.Second)
	for time.Now().Before(stable) {
		if e, _, ok := es.find(at+1, isLeading); ok {
			t.Fatalf("%s leads (term %d) while %s renews its term %d", e.ID, e.Term, first.ID, first.Term)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if hw := highWater(t, resource, "state"); hw != first.Term {
		t.Fatalf("resource's high-water mark %d, want %s's term %d", hw, first.ID, first.Term)
	}
	// Every write of the leader's so far was accepted: the refusal below
	// is the new term's doing, not a replay's.
	var accepted int
	for _, e := range es.seen() {
		if e.ID == first.ID && e.Ev == "write" {
			if e.Status != http.StatusOK {
				t.Fatalf("%s's write while it led: %+v, want 200", first.ID, e)
			}
			accepted++
		}
	}
	if accepted < 2 {
		t.Fatalf("%s wrote %d times while it led for %v", first.ID, accepted, leaseDuration+time.Second)
	}

	// Pause the leader: fencer lets its grant expire, another elector is
	// granted a greater term and writes with it.
	paused := es.procs[first.ID]
	pausedAt := time.Now()
	paused.signal(t, syscall.SIGSTOP)
	second, at2 := es.wait(15*time.Second, at+1, "a leader after the pause", isLeading)
	took := time.Since(pausedAt)
	es.wait(5*time.Second, at2, second.ID+"'s first accepted write", func(e event) bool {
		return e.ID == second.ID && e.Ev == "write" && e.Status == http.StatusOK
	})
	t.Logf("%s (term %d) paused; %s leads with term %d after %v", first.ID, first.Term, second.ID, second.Term, took.Round(time.Millisecond))

	// Wake it: the write it had in flight, with its old term, is refused,
	// and it stops leading.
	resumed := len(es.seen())
	paused.signal(t, syscall.SIGCONT)
	if _, err := paused.stdin.Write([]byte("write\n")); err != nil {
		t.Fatal(err)
	}
	forced, _ := es.wait(10*time.Second, resumed, first.ID+"'s write after the pause", func(e event) bool {
		return e.ID == first.ID && e.Forced
	})
	if forced.Term != first.Term || forced.Status != http.StatusConflict || forced.Code != wire.CodeStaleToken {
		t.Fatalf("the paused leader's write with term %d after a new leader: %+v, want 409 %s", first.Term, forced, wire.CodeStaleToken)
	}
	for _, e := range es.seen()[resumed:] {
		if e.ID == first.ID && e.Ev == "write" && e.Status == http.StatusOK {
			t.Fatalf("%s's write after it woke was accepted: %+v", first.ID, e)
		}
	}
	es.wait(10*time.Second, resumed, first.ID+" stopping", func(e event) bool { return e.ID == first.ID && e.Ev == "stopped" })

	// Stop the second leader: it resigns, so fencer frees the election at
	// once, and a third term begins.
	handover := len(es.seen())
	p2 := es.procs[second.ID]
	termAt := time.Now()
	p2.signal(t, syscall.SIGTERM)
	select {
	case <-p2.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10s after SIGTERM", second.ID)
	}
	if err := p2.cmd.ProcessState; !err.Success() {
		t.Fatalf("%s exited with %v after SIGTERM", second.ID, err)
	}
	if st := electionStatus(t, endpoints); st.Held && st.Holder == second.ID {
		t.Fatalf("%s exited after SIGTERM still holding the election (term %d): it did not resign", second.ID, st.Token)
	}
	third, _ := es.wait(15*time.Second, handover, "a leader after the resignation", isLeading)
	t.Logf("%s resigned; %s leads with term %d %v after the SIGTERM", second.ID, third.ID, third.Term, time.Since(termAt).Round(time.Millisecond))

	checkTerms(t, es.seen(), first.ID)
}

// checkTerms checks the leadership history: every leader got a term from
// fencer, no term was given twice, each leader's term is greater than
// every earlier one's, and nobody started leading while another still
// led, but for paused, which believed it led until it woke.
func checkTerms(t *testing.T, evs []event, paused string) {
	t.Helper()
	var last uint64
	leading := map[string]bool{}
	for _, e := range evs {
		switch e.Ev {
		case "stopped":
			leading[e.ID] = false
		case "leading":
			if e.Term == 0 || e.Term <= last {
				t.Fatalf("%s leads with term %d after term %d: want a new, greater term per leader\nevents: %+v", e.ID, e.Term, last, leadings(evs))
			}
			for id, on := range leading {
				if on && id != paused {
					t.Fatalf("%s leads with term %d while %s still leads\nevents: %+v", e.ID, e.Term, id, leadings(evs))
				}
			}
			last, leading[e.ID] = e.Term, true
		}
	}
}

func leadings(evs []event) []event {
	var out []event
	for _, e := range evs {
		if e.Ev != "write" {
			out = append(out, e)
		}
	}
	return out
}

func highWater(t *testing.T, resource, key string) uint64 {
	t.Helper()
	resp, err := http.Get(resource + "/v1/high-water/" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Token uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.Token
}

func electionStatus(t *testing.T, endpoints []string) wire.LockStatus {
	t.Helper()
	c, err := client.New(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.ElectionLeader(ctx, "controller")
	if err != nil {
		t.Fatal(fmt.Errorf("election status: %w", err))
	}
	return st
}
