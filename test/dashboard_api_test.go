package test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// GET /v1/cluster/members, asked of a follower, gives every member's own
// view (what the dashboard shows of members a browser cannot ask itself);
// a stopped member is unreachable, with the reason, and the others still
// answer.
func TestMemberStatuses(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitMembers(3, 10*time.Second)
	f := c.Other(leader)
	read := func() wire.MemberStatusList {
		t.Helper()
		status, body, _ := tc.Do(t, http.MethodGet, f.URL()+"/v1/cluster/members", "")
		var list wire.MemberStatusList
		if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("GET /v1/cluster/members: %d %s", status, body)
		}
		return list
	}
	var list wire.MemberStatusList
	tc.Poll(t, 10*time.Second, "every member's own view, one leader, one term", func() bool {
		list = read()
		leaders, terms := 0, map[uint64]bool{}
		for _, m := range list.Members {
			if m.State == "Leader" {
				leaders++
			}
			if m.SeesLeader != leader.ID || m.AppliedIndex == 0 || m.CommitIndex == 0 || m.Error != "" {
				return false
			}
			terms[m.Term] = true
		}
		return len(list.Members) == 3 && leaders == 1 && len(terms) == 1
	})
	if list.Node != f.ID {
		t.Errorf("gathered by %q, want %s", list.Node, f.ID)
	}
	for _, m := range list.Members {
		if (m.State == "Leader") != (m.ID == leader.ID) || m.Leader != (m.ID == leader.ID) || m.HTTPAddr == "" || m.RaftAddr == "" || !m.Voter {
			t.Errorf("member %+v (leader %s)", m, leader.ID)
		}
		if m.State == "Follower" && m.LastContact == "" {
			t.Errorf("follower %s without a last contact", m.ID)
		}
	}

	other := c.Other(leader, f)
	c.Stop(other)
	start := time.Now()
	list = read()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("an unreachable member held the answer %v", took)
	}
	for _, m := range list.Members {
		switch {
		case m.ID == other.ID && (m.State != "unreachable" || m.Error == ""):
			t.Errorf("the stopped member: %+v", m)
		case m.ID != other.ID && (m.State == "unreachable" || m.Term == 0):
			t.Errorf("a running member: %+v", m)
		}
	}
}

// GET /v1/whoami names the caller's role and prefixes to any role, refuses
// no token, and, without an ACL, says that everyone may do everything.
func TestWhoAmI(t *testing.T) {
	c := tc.New(t, 1, tc.Options{Server: aclServer(t, aclFile)})
	n := c.WaitLeader(10 * time.Second)
	for _, tt := range []struct {
		secret string
		want   wire.WhoAmI
	}{
		{"client-secret-0123456789", wire.WhoAmI{ACL: true, Name: "jobs-client", Role: "client", Locks: []string{"jobs."}, Keys: []string{"jobs."}}},
		{"reader-secret-0123456789", wire.WhoAmI{ACL: true, Name: "dashboard", Role: "reader", Keys: []string{"*"}}},
		{"operator-secret-012345678", wire.WhoAmI{ACL: true, Name: "ops", Role: "operator", Keys: []string{"*"}}},
	} {
		status, body, _ := tc.Do(t, http.MethodGet, n.URL()+"/v1/whoami", "", "Authorization", "Bearer "+tt.secret)
		var got wire.WhoAmI
		if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("whoami as %s: %d %s", tt.want.Name, status, body)
		}
		if got.ACL != tt.want.ACL || got.Name != tt.want.Name || got.Role != tt.want.Role || !slices.Equal(got.Locks, tt.want.Locks) || !slices.Equal(got.Keys, tt.want.Keys) {
			t.Errorf("whoami as %s: %+v, want %+v", tt.want.Name, got, tt.want)
		}
		// Every role may read the members' status.
		if status, body, _ := tc.Do(t, http.MethodGet, n.URL()+"/v1/cluster/members", "", "Authorization", "Bearer "+tt.secret); status != http.StatusOK {
			t.Errorf("members as %s: %d %s", tt.want.Name, status, body)
		}
	}
	if status, body, _ := tc.Do(t, http.MethodGet, n.URL()+"/v1/whoami", ""); status != http.StatusUnauthorized {
		t.Errorf("whoami without a token: %d %s", status, body)
	}
	// The dashboard's files need no token; they hold no data.
	status, body, hdr := tc.Do(t, http.MethodGet, n.URL()+"/ui/", "")
	if status != http.StatusOK || !strings.Contains(body, "fencer") || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("GET /ui/ with an ACL: %d %q, CSP %q", status, body[:min(len(body), 80)], hdr.Get("Content-Security-Policy"))
	}

	open := tc.New(t, 1)
	o := open.WaitLeader(10 * time.Second)
	status, body, _ = tc.Do(t, http.MethodGet, o.URL()+"/v1/whoami", "")
	var got wire.WhoAmI
	if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.ACL || got.Role != "operator" {
		t.Errorf("whoami without an ACL: %d %s", status, body)
	}
}
