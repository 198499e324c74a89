package test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Every node serves HTTP/2 over plain TCP (h2c, prior knowledge) beside
// HTTP/1.1, and the Go client speaks it with WithHTTP2: a lock cycle, a
// fenced write and a stale write's refusal go through a follower that
// forwards and through the leader, and the answers come over HTTP/2.
func TestNodesServeHTTP2Cleartext(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)

	h2 := &http.Client{Transport: &http.Transport{Protocols: client.Protocols(true)}, Timeout: 5 * time.Second}
	for _, n := range c.Running() {
		resp, err := h2.Get(n.URL() + "/readyz")
		if err != nil {
			t.Fatalf("%s over h2c: %v", n.ID, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /readyz over h2c answered %s %d, want HTTP/2.0 200", n.ID, resp.Proto, resp.StatusCode)
		}
	}
	// HTTP/1.1 is still served on the same port.
	resp, err := http.Get(leader.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz over HTTP/1.1 answered %s %d", resp.Proto, resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New([]string{c.Other(leader).HTTPAddr}, client.WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	first, err := cl.Acquire(ctx, "h2-lock", client.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("acquire over h2c: %v", err)
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("one"), first.Token(), client.WithLock("h2-lock")); err != nil {
		t.Fatalf("fenced put over h2c: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := cl.Acquire(ctx, "h2-lock", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(context.Background())
	if second.Token() <= first.Token() {
		t.Fatalf("tokens %d then %d", first.Token(), second.Token())
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("two"), second.Token(), client.WithLock("h2-lock")); err != nil {
		t.Fatal(err)
	}
	if err := cl.PutFenced(ctx, "h2-key", []byte("late"), first.Token()); !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("a stale write over h2c: %v, want ErrStaleToken", err)
	}
}

// The checks a client meets over HTTP/1.1 hold over h2c too: the ACL's
// authentication and roles, the body limit, the rate limit across the
// streams of one connection, and a request smuggled as an HTTP/1.1
// `Upgrade: h2c` is served as HTTP/1.1, never switched. Fails with the ACL
// middleware skipped for HTTP/2 requests (`r.ProtoMajor == 2`): the
// unauthenticated acquire is granted.
func TestSecurityHoldsOverHTTP2(t *testing.T) {
	acl := aclServer(t, aclFile)
	c := tc.New(t, 1, tc.Options{Server: func(id string) server.Options {
		o := acl(id)
		o.RateLimit = 20
		return o
	}})
	n := c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	h2 := &http.Client{Transport: &http.Transport{Protocols: client.Protocols(true)}, Timeout: 5 * time.Second}
	do := func(secret, method, path, body string) int {
		t.Helper()
		req := tc.NewRequest(t, method, n.URL()+path, body)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := h2.Do(req)
		if err != nil {
			t.Fatalf("%s %s over h2c: %v", method, path, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s answered over %s, want HTTP/2", method, path, resp.Proto)
		}
		return resp.StatusCode
	}
	const (
		clientSecret = "client-secret-0123456789"
		reader       = "reader-secret-0123456789"
	)
	acquire := `{"holder":"w","ttl_ms":5000}`
	for _, tt := range []struct {
		who, method, path, body string
		want                    int
	}{
		{"", "POST", "/v1/locks/jobs.a/acquire", acquire, 401},
		{"wrong-secret-0123456789", "POST", "/v1/locks/jobs.a/acquire", acquire, 401},
		{clientSecret, "POST", "/v1/locks/other/acquire", acquire, 403},
		{reader, "POST", "/v1/locks/jobs.b/acquire", acquire, 403},
		{clientSecret, "GET", "/v1/cluster/snapshot", "", 403},
		{clientSecret, "PUT", "/v1/kv/jobs.big", strings.Repeat("x", 2<<20), 413},
		{clientSecret, "POST", "/v1/locks/jobs.a/acquire", acquire, 200},
	} {
		if got := do(tt.who, tt.method, tt.path, tt.body); got != tt.want {
			t.Errorf("%s %s over h2c: %d, want %d", tt.method, tt.path, got, tt.want)
		}
	}

	// 60 requests at once, as streams of one connection: the rate limit
	// counts the client, not the connection.
	var limited atomic.Int32
	var wg sync.WaitGroup
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if do(reader, "GET", "/v1/locks/jobs.a?stale=true", "") == http.StatusTooManyRequests {
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Error("60 streams at once over one connection were never rate limited at 20/s")
	}

	// An HTTP/1.1 request asking to upgrade to h2c is answered as HTTP/1.1.
	req := tc.NewRequest(t, "GET", n.URL()+"/healthz", "")
	req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
	req.Header.Set("Upgrade", "h2c")
	req.Header.Set("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.ProtoMajor != 1 {
		t.Fatalf("Upgrade: h2c answered %s %d, want HTTP/1.1 served as asked", resp.Proto, resp.StatusCode)
	}
}
