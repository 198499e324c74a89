package checker

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// simulate runs a correct lock service and fenced store sequentially and
// records what clients would have seen: each op takes effect at its
// linearization point, somewhere inside an interval that overlaps its
// neighbours'. Leases expire at random, and some outcomes are lost to
// timeouts whether or not the op took effect.
func simulate(seed int64, n, lostOneIn int) history.History {
	rng := rand.New(rand.NewSource(seed))
	type lock struct {
		held   bool
		token  uint64
		holder string
	}
	type keyState struct {
		Written bool
		Value   string
		Last    history.Stamp
	}
	locks := map[string]*lock{"a": {}, "b": {}}
	keys := map[string]*keyState{"k": {}, "j": {}}
	var next uint64 = 1
	known := map[string][]uint64{} // tokens clients were told, per lock
	var h history.History
	for i := 0; i < n; i++ {
		lp := int64(i) * 10
		op := history.Op{Client: rng.Intn(5), Call: lp - rng.Int63n(40), Return: lp + rng.Int63n(40), Outcome: history.OK}
		name := []string{"a", "b"}[rng.Intn(2)]
		l := locks[name]
		if l.held && rng.Intn(8) == 0 {
			*l = lock{} // the lease ran out; nobody is told
		}
		pick := func() uint64 {
			if l.held && slices.Contains(known[name], l.token) && rng.Intn(2) == 0 {
				return l.token
			}
			if ts := known[name]; len(ts) > 0 {
				return ts[rng.Intn(len(ts))]
			}
			return 0
		}
		lost := lostOneIn > 0 && rng.Intn(lostOneIn) == 0 // the answer is lost
		apply := !lost || rng.Intn(2) == 0
		switch rng.Intn(6) {
		case 0:
			op.Kind, op.Target, op.Holder = history.Acquire, name, fmt.Sprintf("h%d", op.Client)
			if l.held {
				op.Outcome, op.Token, op.HeldBy = history.LockHeld, l.token, l.holder
			} else if apply {
				next += uint64(1 + rng.Intn(3))
				*l = lock{held: true, token: next, holder: op.Holder}
				op.Token = next
				if !lost {
					known[name] = append(known[name], next)
				}
			}
		case 1, 2:
			op.Kind, op.Target, op.Token = []history.OpKind{history.Renew, history.Release}[rng.Intn(2)], name, pick()
			if !l.held || l.token != op.Token {
				op.Outcome = history.LeaseLost
			} else if op.Kind == history.Release && apply {
				*l = lock{}
			}
		case 3:
			op.Kind, op.Target = history.Read, name
			op.Held, op.Token = l.held, l.token
		case 4:
			key := []string{"k", "j"}[rng.Intn(2)]
			op.Kind, op.Target, op.Token, op.Value = history.Put, key, pick(), fmt.Sprintf("v%d", i)
			s := keys[key]
			if !s.Last.Admits(op.Stamp()) {
				op.Outcome = history.StaleToken
			} else if apply {
				*s = keyState{Written: true, Value: op.Value, Last: op.Stamp()}
			}
		case 5:
			key := []string{"k", "j"}[rng.Intn(2)]
			s := keys[key]
			op.Kind, op.Target = history.Get, key
			op.Found, op.Value, op.Token = s.Written, s.Value, s.Last.Token
		}
		if lost {
			op = history.Op{Kind: op.Kind, Target: op.Target, Client: op.Client, Holder: op.Holder,
				Token: op.Token, Value: op.Value, Call: op.Call, Return: op.Return, Outcome: history.Unknown}
			if op.Kind == history.Acquire {
				op.Token = 0
			}
		}
		h.Ops = append(h.Ops, op)
	}
	for _, key := range sortedKeys(keys) {
		s := keys[key]
		h.FinalReads = append(h.FinalReads, history.FinalRead{Key: key, Found: s.Written, Value: s.Value, Token: s.Last.Token})
	}
	return h
}

// Histories of a correct service, including unknown outcomes and unseen
// expiry, must pass every check.
func TestSimulatedCorrectRunsPass(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		h := simulate(seed, 400, 10)
		start := time.Now()
		r := Check(h, Options{Timeout: 10 * time.Second})
		if !r.OK() {
			t.Fatalf("seed %d: correct run rejected:\n%s", seed, r)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("seed %d: check took %v", seed, d)
		}
	}
}

// Breaking the simulated service must be caught: here the old holder's
// renews keep succeeding after its lease was re-granted.
func TestSimulatedDoubleHolderFails(t *testing.T) {
	h := simulate(7, 400, 10)
	var old, newer *history.Op
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Kind == history.Acquire && op.Outcome == history.OK && op.Target == "a" {
			if old == nil {
				old = op
			} else if newer == nil {
				newer = op
			}
		}
	}
	if old == nil || newer == nil {
		t.Fatal("simulation granted lock a fewer than twice")
	}
	h.Ops = append(h.Ops, renew(9, "a", old.Token, history.OK, newer.Return+1, newer.Return+2))
	wantStatus(t, h, CheckLocks, Fail)
}

// A violation at the very end of a long history full of indeterminate
// operations makes porcupine try every other order first; the pruning in
// plan must keep that within budget, or the verdict would be Inconclusive.
func TestSimulatedLateViolationIsConclusive(t *testing.T) {
	h := simulate(5, 2000, 10)
	var old *history.Op
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == history.Acquire && op.Outcome == history.OK && op.Target == "a" {
			old = op
			break
		}
	}
	h.Ops = append(h.Ops, renew(9, "a", old.Token, history.OK, 30000, 30010))
	start := time.Now()
	wantStatus(t, h, CheckLocks, Fail)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("check took %v", d)
	}
}
