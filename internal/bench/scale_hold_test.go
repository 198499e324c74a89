package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/bench/load"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The scale benchmark holds what it reports: in steps, every lock it
// counts is held by the server, under the session it belongs to (PerSession
// a session), and each renewal renews a session the server knows.
func TestScaleHoldsUnderSessions(t *testing.T) {
	c := tc.New(t, 1)
	leader := c.WaitLeader(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := NewFencer(ctx, []string{leader.HTTPAddr}, 8, time.Minute, 0, 5*time.Second, Conn{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scale{Fencer: f, Leader: leader.HTTPAddr, PerSession: 10}
	cfg := load.Config{Clients: 8, Duration: time.Minute}
	for _, n := range []int{15, 42} {
		res, err := s.HoldTo(ctx, cfg, n)
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || s.Held() != n || s.Sessions() != (n+9)/10 {
			t.Fatalf("hold to %d: %d held under %d sessions, %d errors (%s)", n, s.Held(), s.Sessions(), res.Errors, res.FirstError)
		}
	}
	for i, sess := range s.sessions {
		var st wire.SessionStatus
		getJSON(t, "http://"+leader.HTTPAddr+"/v1/sessions/"+strconv.FormatUint(sess.token, 10), &st)
		want := min(10, 42-10*i)
		if len(st.Grants) != want {
			t.Fatalf("session %d holds %d grants, want %d: %+v", sess.token, len(st.Grants), want, st.Grants)
		}
		for _, g := range st.Grants {
			if g.Kind != wire.GrantKindLock {
				t.Fatalf("session %d holds a %s", sess.token, g.Kind)
			}
		}
	}
	res, err := load.Run(ctx, load.Config{Clients: 4, Ops: 20, Duration: time.Minute}, s.Renewals())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 20 || res.Errors != 0 {
		t.Fatalf("renewals: %d, %d errors (%s)", res.Ops, res.Errors, res.FirstError)
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
