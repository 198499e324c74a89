package peers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/internal/membership"
)

// member is a fake member's API: answer serves every request.
func member(t *testing.T, answer http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(answer)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A member's refusal of a join comes back as the sentinel the node acts on
// (a conflict stops it; a refused credential slows its retries), with the
// member's message; any other failure is neither.
func TestJoinRefusals(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   error
	}{
		{http.StatusConflict, wire.CodeMemberConflict, membership.ErrConflict},
		{http.StatusUnauthorized, wire.CodeUnauthorized, ErrUnauthorized},
		{http.StatusForbidden, wire.CodeForbidden, ErrUnauthorized},
		{http.StatusBadRequest, wire.CodeInvalidName, nil},
	} {
		addr := member(t, func(w http.ResponseWriter, r *http.Request) {
			wire.WriteError(w, c.status, &wire.Error{Code: c.code, Message: "refused by the fake"})
		})
		err := New("n2", Credentials{}).Join(context.Background(), []string{addr}, wire.JoinRequest{ID: "n2"})
		if err == nil || !strings.Contains(err.Error(), "refused by the fake") {
			t.Fatalf("%d %s: %v, want the member's message", c.status, c.code, err)
		}
		for _, s := range []error{membership.ErrConflict, ErrUnauthorized} {
			if errors.Is(err, s) != (s == c.want) {
				t.Errorf("%d %s: %v; errors.Is %v: %v, want %v", c.status, c.code, err, s, errors.Is(err, s), s == c.want)
			}
		}
	}
}

// The node's removal by the new leader waits for a leader other than itself,
// retries while that leader is not ready (503), and gives up, distinctly,
// when the context ends.
func TestRemoveSelf(t *testing.T) {
	var calls atomic.Int32
	addr := member(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete || r.URL.Path != "/v1/cluster/members/n1" || calls.Add(1) < 3 {
			// Not ready: the client may also look for the leader.
			wire.WriteError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "not ready"})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	var asked atomic.Int32
	leader := func() (string, string) {
		if asked.Add(1) < 3 {
			return "n1", addr // still itself
		}
		return "n2", addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := New("n1", Credentials{}).RemoveSelf(ctx, "n1", leader); err != nil || calls.Load() != 3 {
		t.Fatalf("RemoveSelf: %v after %d calls, want success on the third", err, calls.Load())
	}

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := New("n1", Credentials{}).RemoveSelf(ctx, "n1", func() (string, string) { return "n1", addr }); !errors.Is(err, ErrNoNewLeader) {
		t.Fatalf("RemoveSelf with no other leader: %v, want ErrNoNewLeader", err)
	}
}

// The members' last indexes come back by id; one that does not answer is
// left out.
func TestLastIndexes(t *testing.T) {
	status := func(last uint64) string {
		return member(t, func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(wire.ClusterStatus{LastIndex: last})
		})
	}
	down := member(t, func(w http.ResponseWriter, r *http.Request) {}) // answers no status
	got := New("n1", Credentials{}).LastIndexes(context.Background(),
		map[string]string{"n2": status(7), "n3": status(9), "n4": down}, time.Second)
	if got["n2"] != 7 || got["n3"] != 9 || len(got) != 2 {
		t.Fatalf("LastIndexes: %v, want n2:7 n3:9", got)
	}
}
