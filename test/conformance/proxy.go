// Package conformance runs one script of scenarios against every fencer
// client through that client's agent (PROTOCOL.md). This file is the
// harness's fault injector: a TCP proxy in front of each member, so that a
// member can be made dead, slow or silent to the client under test while
// the harness itself still reaches it directly.
package conformance

import (
	"bytes"
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
	wg    sync.WaitGroup
}

// proxyConn is one client connection and its connection to the member.
type proxyConn struct {
	client, member net.Conn
	// watch is set once the client sent GET /v1/events on it.
	watch bool
}

// NewProxy listens on 127.0.0.1:0 and forwards to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
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
	for {
		n, err := c.member.Read(buf)
		if n > 0 {
			mode, delay := p.state()
			if mode == passThrough {
				select {
				case queue <- timedChunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(delay)}:
				case <-written:
					return
				}
			}
		}
		if err != nil {
			return // the deferred close lets queued answers reach the client first
		}
	}
}
