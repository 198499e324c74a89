package test

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// asHost sends a request to n naming host in the Host header, with a JSON
// body when body is set; it returns the status.
func asHost(t *testing.T, n *tc.Node, method, path, host, body string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, n.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A cluster without ACLs is not open to web pages: a page whose name was
// re-pointed at a node (DNS rebinding) cannot read a snapshot, a page
// cannot acquire with a body a browser sends without asking, nor change
// state from another origin. Names the cluster itself uses keep working.
func TestBrowsersCannotDriveAnOpenCluster(t *testing.T) {
	name, _ := os.Hostname()
	resolves := false
	if addrs, err := net.LookupHost(name); err == nil && len(addrs) > 0 {
		ip := net.ParseIP(addrs[0])
		resolves = ip != nil && ip.IsLoopback() && !strings.EqualFold(name, "localhost")
	}
	c := tc.New(t, 1, tc.Options{Server: func(id string) server.Options {
		if id == "n1" && resolves {
			return server.Options{AllowedHosts: []string{name}}
		}
		return server.Options{}
	}})
	n := c.WaitLeader(10 * time.Second)
	_, port, _ := net.SplitHostPort(n.HTTPAddr)

	if s := asHost(t, n, "GET", "/v1/cluster/snapshot", "evil.example:"+port, ""); s != http.StatusMisdirectedRequest {
		t.Errorf("snapshot for a rebinding page: %d, want 421", s)
	}
	for _, host := range []string{n.HTTPAddr, "localhost:" + port} {
		if s := asHost(t, n, "GET", "/v1/cluster/snapshot", host, ""); s != http.StatusOK {
			t.Errorf("snapshot with Host %s: %d", host, s)
		}
	}
	if s := asHost(t, n, "POST", "/v1/locks/page/acquire", n.HTTPAddr, `{"holder":"page"}`, "Content-Type", "text/plain"); s != http.StatusUnsupportedMediaType {
		t.Errorf("acquire as text/plain: %d, want 415", s)
	}
	if st, _ := n.Inst.Coord.Lock(context.Background(), "page", true); st.Held {
		t.Error("a text/plain acquire took the lock")
	}
	if s := asHost(t, n, "POST", "/v1/cluster/leader/transfer", n.HTTPAddr, "", "Sec-Fetch-Site", "cross-site"); s != http.StatusForbidden {
		t.Errorf("a cross-site transfer: %d, want 403", s)
	}

	if !resolves {
		t.Skipf("host name %q does not resolve to loopback: not testing names in --join", name)
	}
	// n1 allows its machine's name; n2 joins through that name, and then
	// answers to it too, since its --join names it.
	n2 := c.Add("n2", func(cfg *cluster.Config) { cfg.Join = []string{name + ":" + port} })
	c.WaitMembers(2, 20*time.Second)
	_, port2, _ := net.SplitHostPort(n2.HTTPAddr)
	if s := asHost(t, n2, "GET", "/v1/cluster", name+":"+port2, ""); s != http.StatusOK {
		t.Errorf("n2 with Host %s, a name in its --join: %d", name, s)
	}
	if s := asHost(t, n2, "GET", "/v1/cluster", "evil.example:"+port2, ""); s != http.StatusMisdirectedRequest {
		t.Errorf("n2 for a rebinding page: %d, want 421", s)
	}
}
