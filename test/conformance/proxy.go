// Package conformance runs one script of scenarios against every fencer
// client through that client's agent (PROTOCOL.md). This file is the
// harness's fault injector: a TCP proxy in front of each member, so that a
// member can be made dead, slow or silent to the client under test while
// the harness itself still reaches it directly.
package conformance

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"
)

// proxyMode is what a Proxy does with traffic.
type proxyMode int

const (
	passThrough proxyMode = iota
	dead                  // reset every connection, refuse new ones
	blackhole             // keep connections open, forward nothing
)

// Proxy forwards one loopback port to one member's HTTP address.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  proxyMode
	delay time.Duration
	conns map[*proxyConn]struct{}
	// rewrite maps each member's address to its proxy's, in answers.
	rewrite map[string]string
	wg      sync.WaitGroup
}

// proxyConn is one client connection and its connection to the member.
type proxyConn struct {
	client, member net.Conn
	// watch is set once the client sent GET /v1/events on it.
	watch bool
}

// NewProxy listens on 127.0.0.1:0 and forwards to target (host:port). Its
// address is as long as target's (Rewrite replaces one by the other in
// answers whose Content-Length it must keep): on Linux every ephemeral
// port has five digits, and a listener that got a shorter one is retried.
func NewProxy(target string) (*Proxy, error) {
	var ln net.Listener
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		if len(l.Addr().String()) == len(target) {
			ln = l
			break
		}
		l.Close()
	}
	if ln == nil {
		return nil, fmt.Errorf("no listening address as long as %q", target)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients are given in place of the member's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget points the proxy at another address (a member restarted on a
// new port); open connections keep their old member.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Rewrite makes the proxy replace, in everything a member answers, each
// member's address by its proxy's (members name the leader by its address:
// the Fencer-Leader header, GET /v1/cluster), so that a client following
// the leader stays behind the proxies. Every pair must be of equal length.
func (p *Proxy) Rewrite(memberToProxy map[string]string) error {
	for m, px := range memberToProxy {
		if len(m) != len(px) {
			return fmt.Errorf("rewrite %q to %q: lengths differ", m, px)
		}
	}
	p.mu.Lock()
	p.rewrite = memberToProxy
	p.mu.Unlock()
	return nil
}

// rewritten applies Rewrite to data, and returns how many bytes at its end
// to hold back: a tail that may begin an address the next chunk completes.
func (p *Proxy) rewritten(data []byte) (out []byte, hold int) {
	p.mu.Lock()
	rw := p.rewrite
	p.mu.Unlock()
	for m, px := range rw {
		data = bytes.ReplaceAll(data, []byte(m), []byte(px))
	}
	for m := range rw {
		for n := min(len(m)-1, len(data)); n > hold; n-- {
			if bytes.HasSuffix(data, []byte(m[:n])) {
				hold = n
				break
			}
		}
	}
	return data, hold
}

// Close stops listening and resets every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.resetAll()
	p.wg.Wait()
}

// Dead resets every open connection and refuses new ones (accepted and
// reset at once), as a crashed member's host does.
func (p *Proxy) Dead() {
	p.setMode(dead)
	p.resetAll()
}

// Blackhole keeps connections open but forwards nothing either way, as a
// frozen member does; new connections are accepted and starve too.
func (p *Proxy) Blackhole() { p.setMode(blackhole) }

// Alive heals the proxy: pass-through, no delay. Connections that lived
// through a blackhole lost bytes, so they are reset.
func (p *Proxy) Alive() {
	p.mu.Lock()
	was := p.mode
	p.mode, p.delay = passThrough, 0
	p.mu.Unlock()
	if was == blackhole {
		p.resetAll()
	}
}

// DelayAnswers holds every chunk from the member to the client for d
// before passing it on (0: none). Chunks keep their order; d is not
// summed over chunks.
func (p *Proxy) DelayAnswers(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Open returns how many client connections are open, and how many of them
// carry a GET /v1/events stream.
func (p *Proxy) Open() (conns, watches int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		conns++
		if c.watch {
			watches++
		}
	}
	return conns, watches
}

func (p *Proxy) setMode(m proxyMode) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
}

func (p *Proxy) state() (proxyMode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) resetAll() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// reset closes the client side with SO_LINGER 0 (an RST, not a FIN: the
// client sees "connection reset", as from a host that lost the process).
func (c *proxyConn) reset() {
	reset(c.client)
	c.member.Close()
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		mode, _ := p.state()
		if mode == dead {
			reset(client)
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		member, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			reset(client) // the member is down: the client sees a refusal
			continue
		}
		c := &proxyConn{client: client, member: member}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve pumps both directions until either side closes, then drops c.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	done := make(chan struct{}, 2)
	go func() { p.toMember(c); done <- struct{}{} }()
	go func() { p.toClient(c); done <- struct{}{} }()
	<-done
	c.client.Close()
	c.member.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// eventsRequest starts a request line for the event stream.
var eventsRequest = []byte("GET /v1/events")

func (p *Proxy) toMember(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if bytes.HasPrefix(chunk, eventsRequest) || bytes.Contains(chunk, append([]byte("\n"), eventsRequest...)) {
				p.mu.Lock()
				c.watch = true
				p.mu.Unlock()
			}
			if mode, _ := p.state(); mode == passThrough {
				if _, werr := c.member.Write(chunk); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// timedChunk is a chunk from the member and when it may go on.
type timedChunk struct {
	data []byte
	due  time.Time
}

// toClient reads the member's chunks and hands them, stamped with their due
// time, to a writer that holds each until then.
func (p *Proxy) toClient(c *proxyConn) {
	queue := make(chan timedChunk, 1024)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for ch := range queue {
			if wait := time.Until(ch.due); wait > 0 {
				time.Sleep(wait) // the injected delay itself, not a wait for a state
			}
			if mode, _ := p.state(); mode != passThrough {
				continue
			}
			if _, err := c.client.Write(ch.data); err != nil {
				c.member.Close()
				return
			}
		}
	}()
	defer func() { close(queue); <-written }()
	buf := make([]byte, 32<<10)
	var carry []byte // a held-back tail (rewritten)
	forward := func(data []byte) bool {
		mode, delay := p.state()
		if mode != passThrough || len(data) == 0 {
			return true
		}
		select {
		case queue <- timedChunk{data: data, due: time.Now().Add(delay)}:
			return true
		case <-written:
			return false
		}
	}
	for {
		if len(carry) > 0 {
			// The rest of a split address comes at once, if at all: a
			// tail that merely ends like one goes on soon.
			c.member.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		}
		n, err := c.member.Read(buf)
		c.member.SetReadDeadline(time.Time{})
		if ne, ok := err.(net.Error); ok && ne.Timeout() && n == 0 {
			if !forward(carry) {
				return
			}
			carry = nil
			continue
		}
		data, hold := p.rewritten(append(carry, buf[:n]...))
		if err != nil {
			hold = 0
		}
		carry = bytes.Clone(data[len(data)-hold:])
		if !forward(data[:len(data)-hold]) {
			return
		}
		if err != nil {
			return // the deferred close lets queued answers reach the client first
		}
	}
}
