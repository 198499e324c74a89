package transport

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDirectReusesAndAborts: answers read to the end reuse one connection;
// a context that ends aborts a request the server never answers.
// Fails with finish's put removed (every request dials: 5 connections), and
// with the AfterFunc and SetDeadline in exchange removed (the hung request
// waits for the server's 10 s).
func TestDirectReusesAndAborts(t *testing.T) {
	var conns atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)
	hc := NewHTTPClient(nil, false)
	for range 5 {
		resp, err := hc.Get(srv.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 sequential requests, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
	start := time.Now()
	_, err := hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("aborted after %v", d)
	}
}

// A pooled connection the server closed while it was idle is not used: a
// POST is not sent again once written, so sent on it, its answer would be
// lost. Fails with get's alive check left out: the POST gets EOF.
func TestDirectLeavesAConnectionTheServerClosed(t *testing.T) {
	defer func(d time.Duration) { idleCheck = d }(idleCheck)
	idleCheck = 0 // check every idle connection
	// A server that answers one request per connection, keep-alive
	// announced, then closes the connection.
	closed := make(chan struct{}, 4)
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		defer func() { c.Close(); closed <- struct{}{} }() // closed before it is said
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	hc := NewHTTPClient(nil, false)
	post := func() error {
		resp, err := hc.Post("http://"+addr+"/x", "application/json", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := post(); err != nil {
		t.Fatal(err)
	}
	<-closed
	if err := post(); err != nil {
		t.Fatalf("a POST after the server closed the idle connection: %v", err)
	}
}

// A PUT whose answer was lost (the server closed a reused connection after
// reading it) is not sent again: a fenced write may have landed, and only
// the client, reading the answer to its own retry, can tell. Fails with PUT
// counted replayable (net/http's idempotent methods): the server reads it
// twice.
func TestDirectSendsAPutOnce(t *testing.T) {
	var puts atomic.Int32
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if req.Method == http.MethodPut {
				puts.Add(1)
				return // its answer lost
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	hc := NewHTTPClient(nil, false)
	url := "http://" + addr + "/k"
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("v"))
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a PUT whose answer was lost succeeded")
	}
	if n := puts.Load(); n != 1 {
		t.Fatalf("the server read the PUT %d times, want once", n)
	}
}

// rawServer serves each connection accepted on a loopback port with serve,
// closing it after, until the test ends; it returns the address.
func rawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String()
}
