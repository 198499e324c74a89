package workload

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/test/chaos/history"
)

func line(t *testing.T, l Line) []byte {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecorderPairsInvokesAndCompletes(t *testing.T) {
	r := NewRecorder()
	acq := history.Op{Kind: history.Acquire, Target: "a", Holder: "c0", Call: 10}
	put := history.Op{Kind: history.Put, Target: "kv.a", Token: 5, Call: 5}
	for _, l := range []Line{
		{Ev: Invoke, ID: 1, Op: &put},
		{Ev: Invoke, ID: 2, Op: &acq},
	} {
		if err := r.Feed(0, line(t, l)); err != nil {
			t.Fatal(err)
		}
	}
	done := acq
	done.Outcome, done.Token, done.Return = history.OK, 7, 20
	if err := r.Feed(0, line(t, Line{Ev: Complete, ID: 2, Op: &done})); err != nil {
		t.Fatal(err)
	}
	ops := r.Ops(100)
	if len(ops) != 2 {
		t.Fatalf("got %d ops, want 2", len(ops))
	}
	// Ordered by call: the put that never completed comes first, unknown,
	// returning at the end of the history.
	if ops[0].Kind != history.Put || ops[0].Outcome != history.Unknown || ops[0].Return != 100 {
		t.Errorf("pending put recorded as %v", ops[0])
	}
	if ops[1].Kind != history.Acquire || ops[1].Outcome != history.OK || ops[1].Token != 7 {
		t.Errorf("completed acquire recorded as %v", ops[1])
	}
}

func TestRecorderTracksHolds(t *testing.T) {
	r := NewRecorder()
	if err := r.Feed(3, line(t, Line{Ev: Hold, Lock: "b", Token: 9, TTLMillis: 800})); err != nil {
		t.Fatal(err)
	}
	if h, ok := r.Holding(3); !ok || h.Lock != "b" || h.Token != 9 || h.TTL != 800 {
		t.Fatalf("Holding(3) = %+v, %v", h, ok)
	}
	if err := r.Feed(3, line(t, Line{Ev: Unhold})); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Holding(3); ok {
		t.Fatal("still holding after unhold")
	}
}

func TestRecorderRejectsGarbage(t *testing.T) {
	r := NewRecorder()
	for _, raw := range []string{`not json`, `{"ev":"invoke","id":1}`, `{"ev":"what"}`} {
		if err := r.Feed(0, []byte(raw)); err == nil {
			t.Errorf("Feed(%s) accepted", raw)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	api := func(status int, code string) error { return &client.APIError{Status: status, Code: code} }
	cases := []struct {
		kind history.OpKind
		err  error
		want history.Outcome
	}{
		{history.Acquire, nil, history.OK},
		{history.Acquire, api(409, "lock_held"), history.LockHeld},
		{history.Acquire, api(410, "lease_lost"), history.OtherError},
		{history.Acquire, api(503, "no_leader"), history.Unknown},
		{history.Acquire, fmt.Errorf("POST: %w", client.ErrUnavailable), history.Unknown},
		{history.Renew, api(410, "lease_lost"), history.LeaseLost},
		{history.Release, api(410, "lease_lost"), history.LeaseLost},
		{history.Put, api(409, "stale_token"), history.StaleToken},
		{history.Put, api(409, "not_lock_holder"), history.NotLockHolder},
		// Only stale_token says the token is not above the key's mark:
		// every other refusal of a put is its own, and definite.
		{history.Put, api(409, "unissued_token"), history.Refused},
		{history.Put, api(428, "missing_token"), history.Refused},
		{history.Put, api(429, "kv_full"), history.Refused},
		{history.Put, api(409, "upgrade_required"), history.Refused},
		{history.Put, api(409, ""), history.OtherError}, // not fencer's answer
		{history.Put, api(503, "no_leader"), history.Unknown},
		// A retried put whose first attempt may have landed.
		{history.Put, fmt.Errorf("%w: %w", client.ErrOutcomeUnknown, api(409, "stale_token")), history.Unknown},
		{history.Put, fmt.Errorf("%w: %w", client.ErrOutcomeUnknown, api(409, "unissued_token")), history.Unknown},
		{history.Read, api(400, "invalid_name"), history.OtherError},
		// An acquire retried after a lost answer may have been granted.
		{history.Acquire, api(409, "upgrade_required"), history.OtherError},
	}
	for _, c := range cases {
		if got := outcomeOf(c.kind, c.err); got != c.want {
			t.Errorf("outcomeOf(%s, %v) = %s, want %s", c.kind, c.err, got, c.want)
		}
	}
}

func TestSettleRecordsTheCode(t *testing.T) {
	w := &worker{}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&client.APIError{Status: 409, Code: "unissued_token"}, "unissued_token"},
		{fmt.Errorf("PUT: %w", &client.APIError{Status: 503, Code: "outcome_unknown"}), "outcome_unknown"},
		{fmt.Errorf("%w: %w", client.ErrOutcomeUnknown, &client.APIError{Status: 409, Code: "stale_token"}), "stale_token"},
		{client.ErrUnavailable, ""},
	} {
		op := history.Op{Kind: history.Put}
		w.settle(&op, c.err)
		if op.Code != c.want {
			t.Errorf("settle(%v): code %q, want %q", c.err, op.Code, c.want)
		}
	}
}

func TestResourceOutcome(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   history.Outcome
	}{
		{409, `{"error":"stale","code":"stale_token","last_token":7}`, history.StaleToken},
		{428, `{"error":"no token","code":"missing_token"}`, history.Refused},
		{400, `{"error":"bad","code":"malformed_sequence"}`, history.Refused},
		{409, `not json`, history.OtherError},
		{500, `{"error":"disk","code":"internal"}`, history.Unknown},
		{502, `bad gateway`, history.Unknown},
	} {
		if got := resourceOutcome(c.status, errorCode([]byte(c.body))); got != c.want {
			t.Errorf("resourceOutcome(%d, %s) = %s, want %s", c.status, c.body, got, c.want)
		}
	}
}
