package workload

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

func TestSettleRawClassifiesAnswers(t *testing.T) {
	refusal := func(status int, code string) error {
		return &RawError{Status: status, Body: wire.Error{Code: code, Message: "m", Holder: "c1", Token: 7}}
	}
	for _, tc := range []struct {
		name string
		kind history.OpKind
		err  error
		want history.Outcome
	}{
		{"ok", history.SessionCreate, nil, history.OK},
		{"session ended", history.SessionRenew, refusal(410, wire.CodeSessionExpired), history.SessionExpired},
		{"held", history.Acquire, refusal(409, wire.CodeLockHeld), history.LockHeld},
		{"full", history.SemAcquire, refusal(409, wire.CodeSemaphoreFull), history.SemaphoreFull},
		{"delayed", history.SemAcquire, refusal(409, wire.CodeLockDelay), history.LockDelay},
		{"other refusal", history.SessionClose, refusal(409, wire.CodeSessionMismatch), history.OtherError},
		{"5xx", history.SessionClose, refusal(503, wire.CodeOutcomeUnknown), history.Unknown},
		// A refusal after an attempt whose answer was lost says nothing
		// of that attempt.
		{"after an uncertain attempt", history.SessionClose, errors.Join(errUncertain, refusal(410, wire.CodeSessionExpired)), history.Unknown},
		{"no answer", history.SessionRenew, context.DeadlineExceeded, history.Unknown},
	} {
		op := history.Op{Kind: tc.kind}
		settleRaw(&op, tc.err)
		if op.Outcome != tc.want {
			t.Errorf("%s: outcome %s, want %s", tc.name, op.Outcome, tc.want)
		}
		if tc.want == history.LockHeld && (op.Token != 7 || op.HeldBy != "c1") {
			t.Errorf("%s: holder %q t%d, want c1 t7", tc.name, op.HeldBy, op.Token)
		}
	}
}

// RawAPI moves on from a node that does not answer or answers no_leader,
// and reports a refusal after a 5xx that may have done the work as
// uncertain.
func TestRawAPIMovesToTheNextNode(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now: connection refused

	var calls atomic.Int32
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			wire.WriteError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader})
		},
		func(w http.ResponseWriter) {
			json.NewEncoder(w).Encode(wire.SessionRenewResponse{Session: 5, TTLMillis: 1000})
		},
		func(w http.ResponseWriter) {
			wire.WriteError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeOutcomeUnknown})
		},
		func(w http.ResponseWriter) {
			wire.WriteError(w, http.StatusGone, &wire.Error{Code: wire.CodeSessionExpired})
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answers[int(calls.Add(1))-1](w)
	}))
	defer srv.Close()

	a := NewRawAPI([]string{deadAddr, srv.URL}, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out wire.SessionRenewResponse
	if err := a.Call(ctx, http.MethodPost, "/v1/sessions/5/renew", 0, wire.SessionLeaseRequest{Lease: "x"}, &out); err != nil || out.Session != 5 {
		t.Fatalf("renew: %v, %+v", err, out)
	}
	// Refused connections and no_leader did nothing: a refusal after
	// them is definite.
	calls.Store(3)
	fresh := NewRawAPI([]string{deadAddr, srv.URL}, time.Second)
	err = fresh.Call(ctx, http.MethodPost, "/v1/sessions/5/close", 0, wire.SessionLeaseRequest{Lease: "x"}, nil)
	if errors.Is(err, errUncertain) || err == nil {
		t.Fatalf("close after a refused connection: %v, want a definite refusal", err)
	}
	calls.Store(2)
	err = a.Call(ctx, http.MethodPost, "/v1/sessions/5/close", 0, wire.SessionLeaseRequest{Lease: "x"}, nil)
	var re *RawError
	if !errors.Is(err, errUncertain) || !errors.As(err, &re) || re.Body.Code != wire.CodeSessionExpired {
		t.Fatalf("close after outcome_unknown: %v, want an uncertain session_expired", err)
	}
}
