package netfault

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// promptly bounds every wait for something that should happen at once.
// Generous, because a loaded CI machine is slow; tests finish far sooner.
const promptly = 5 * time.Second

// lineServer answers each line it reads with "name:line", so a reply says
// which node it came from.
type lineServer struct {
	name string
	ln   net.Listener
	wg   sync.WaitGroup
}

func newLineServer(t *testing.T, name string) *lineServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{name: name, ln: ln}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *lineServer) addr() string { return s.ln.Addr().String() }

func (s *lineServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			// Tests close their links before their servers, and closing a
			// link resets this conn, so the handler cannot outlive the test.
			r := bufio.NewReader(conn)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := conn.Write([]byte(s.name + ":" + line)); err != nil {
					return
				}
			}
		}()
	}
}

// holdServer hands each accepted connection to the test, which then plays
// the target side by hand.
func holdServer(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 16)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			ch <- conn
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), ch
}

func nextConn(t *testing.T, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c
	case <-time.After(promptly):
		t.Fatal("target never saw a connection")
		return nil
	}
}

// client is a test's connection through a link.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, promptly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// ask sends one line and returns the reply without its newline.
func (c *client) ask(msg string) (string, error) {
	if err := c.conn.SetDeadline(time.Now().Add(promptly)); err != nil {
		return "", err
	}
	if _, err := c.conn.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func mustAsk(t *testing.T, c *client, msg, want string) {
	t.Helper()
	got, err := c.ask(msg)
	if err != nil {
		t.Fatalf("ask %q: %v", msg, err)
	}
	if got != want {
		t.Fatalf("ask %q = %q, want %q", msg, got, want)
	}
}

// mustBreak asserts the connection fails, and fails promptly: a read that
// only ends at its deadline means the fault was silent, not a reset.
func mustBreak(t *testing.T, conn net.Conn) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(promptly)); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Read(make([]byte, 64))
	if err == nil {
		t.Fatal("read succeeded on a cut connection")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("cut connection was left hanging instead of closed")
	}
}

// mustBeRefused asserts a new connection to addr fails, either at the dial
// (the reset can beat connect's return) or at the first exchange.
func mustBeRefused(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, promptly)
	if err != nil {
		return
	}
	defer conn.Close()
	c := &client{conn: conn, r: bufio.NewReader(conn)}
	got, err := c.ask("ping")
	if err == nil {
		t.Fatalf("ask through a cut link = %q, want an error", got)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("connection through a cut link hung instead of failing")
	}
}

// mustStaySilent asserts nothing is readable on conn right now. It proves
// nothing arrived only because the caller first waited for the link to
// account for the bytes it dropped.
func mustStaySilent(t *testing.T, conn net.Conn) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(make([]byte, 64))
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, err %v; want nothing", n, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(promptly)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTestLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := NewLink("test", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func writeAll(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	if _, err := conn.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func readExactly(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(promptly)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatalf("reading %q: %v", want, err)
	}
	if string(buf) != want {
		t.Fatalf("read %q, want %q", buf, want)
	}
}
