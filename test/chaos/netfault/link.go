package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction names one half of a proxied TCP byte stream.
type Direction int

const (
	// Forward carries bytes from the dialer (the node that owns the link)
	// to the target: for Raft, the requests.
	Forward Direction = iota
	// Backward carries bytes from the target back to the dialer: for
	// Raft, the responses.
	Backward
)

// String returns "forward" or "backward".
func (d Direction) String() string {
	switch d {
	case Forward:
		return "forward"
	case Backward:
		return "backward"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// dialTimeout bounds the proxy's dial to the target. A target that does not
// answer within it is treated as down and the client connection is reset.
const dialTimeout = 2 * time.Second

// Stats are a link's counters since it was created.
type Stats struct {
	// Accepted counts connections proxied (or attempted) while the link was up.
	Accepted int64
	// Rejected counts connections reset on arrival because the link was cut.
	Rejected int64
	// DialErrors counts accepted connections whose target could not be dialed.
	DialErrors int64
	// Active is the number of proxied connections still open.
	Active int64
	// Bytes counts bytes delivered, indexed by Direction.
	Bytes [2]int64
	// Dropped counts bytes discarded by CutOneWay, indexed by Direction.
	Dropped [2]int64
}

// Link is a TCP proxy for one directed link between two nodes: the dialing
// node connects to Addr and the link forwards to the target, applying
// whatever fault is currently set. The controls take effect on connections
// already open as well as on new ones, and are safe for concurrent use.
type Link struct {
	name     string
	listener net.Listener
	ctx      context.Context // cancelled by Close; bounds dials to the target
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// The fault state is read once per chunk on the forwarding path, so it
	// lives in atomics rather than behind mu.
	cut   atomic.Bool
	drop  [2]atomic.Bool
	delay atomic.Int64 // time.Duration

	accepted, rejected, dialErrors atomic.Int64
	bytes, dropped                 [2]atomic.Int64

	mu     sync.Mutex // guards target, closed and pipes; ordered before pipe.mu
	target string
	closed bool
	pipes  map[*pipe]struct{}
}

// NewLink starts a proxy listening on 127.0.0.1:0 that forwards to target.
// The name only labels errors.
func NewLink(name, target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netfault: link %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Link{
		name:     name,
		listener: ln,
		ctx:      ctx,
		cancel:   cancel,
		target:   target,
		pipes:    make(map[*pipe]struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Name returns the name the link was created with.
func (l *Link) Name() string { return l.name }

// Addr returns the address the dialing node must connect to.
func (l *Link) Addr() string { return l.listener.Addr().String() }

// Target returns the address connections are currently forwarded to.
func (l *Link) Target() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.target
}

// SetTarget points new connections at addr, for a node that restarted on a
// new port. Open connections keep their old target.
func (l *Link) SetTarget(addr string) {
	l.mu.Lock()
	l.target = addr
	l.mu.Unlock()
}

// Cut blackholes the link in both directions. Open connections are reset
// (SO_LINGER 0, so the peer sees ECONNRESET rather than a clean EOF), and new
// ones are accepted and reset at once.
//
// Resetting rather than holding connections silently is deliberate: the
// transport's dial and its next read fail immediately instead of waiting out
// its I/O timeout, so a test reaches the interesting state (election, lost
// lease) in heartbeats rather than in seconds. Raft cannot tell the
// difference between the two in anything but timing. Use CutOneWay for the
// silent kind.
func (l *Link) Cut() {
	l.mu.Lock()
	l.cut.Store(true)
	victims := l.pipeList()
	l.mu.Unlock()
	for _, p := range victims {
		p.abort()
	}
}

// CutOneWay silently discards bytes travelling in dir while the other
// direction keeps working. Connections stay open: for a request/response
// protocol a Forward cut means requests vanish and a Backward cut means
// replies never arrive, so the caller sees only its own timeout. A stream
// that has lost bytes can never be trusted again, so Heal resets it.
func (l *Link) CutOneWay(dir Direction) {
	l.drop[dir].Store(true)
}

// Delay holds every chunk, in both directions, for d before delivering it,
// keeping order. Chunks already queued keep the delay they were read with.
// Delay(0) removes the delay.
func (l *Link) Delay(d time.Duration) {
	l.delay.Store(int64(d))
}

// Heal clears every fault, delay included. New connections are forwarded
// normally; connections reset by Cut stay closed, and connections that lost
// bytes to CutOneWay are reset now, since their byte streams have holes.
func (l *Link) Heal() {
	l.mu.Lock()
	l.cut.Store(false)
	l.drop[Forward].Store(false)
	l.drop[Backward].Store(false)
	l.delay.Store(0)
	var damaged []*pipe
	for p := range l.pipes {
		if p.damaged.Load() {
			damaged = append(damaged, p)
		}
	}
	l.mu.Unlock()
	for _, p := range damaged {
		p.abort()
	}
}

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	active := int64(len(l.pipes))
	l.mu.Unlock()
	s := Stats{
		Accepted:   l.accepted.Load(),
		Rejected:   l.rejected.Load(),
		DialErrors: l.dialErrors.Load(),
		Active:     active,
	}
	for d := range 2 {
		s.Bytes[d] = l.bytes[d].Load()
		s.Dropped[d] = l.dropped[d].Load()
	}
	return s
}

// Close stops the listener, resets every open connection and waits for all
// of the link's goroutines to exit.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	victims := l.pipeList()
	l.mu.Unlock()

	err := l.listener.Close()
	l.cancel()
	for _, p := range victims {
		p.abort()
	}
	l.wg.Wait()
	return err
}

// pipeList returns the open pipes; the caller holds l.mu.
func (l *Link) pipeList() []*pipe {
	ps := make([]*pipe, 0, len(l.pipes))
	for p := range l.pipes {
		ps = append(ps, p)
	}
	return ps
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		conn, err := l.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE and the like): back off briefly
			// rather than spin.
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		l.Serve(conn)
	}
}

// Serve proxies conn through the link as if its dialer had connected to
// Addr: a Gate, which accepts connections for many links, hands each to
// the link of the process that dialed it.
func (l *Link) Serve(conn net.Conn) {
	p, target := l.admit(conn)
	if p == nil {
		return
	}
	go func() {
		defer l.wg.Done()
		p.run(target)
	}()
}

// admit registers a freshly accepted connection, or resets it if the link
// is cut or closed. Deciding under l.mu means a concurrent Cut either sees
// the new pipe or the new pipe sees the cut; none slips through. An
// admitted pipe is counted in l.wg here, before Close can start waiting.
func (l *Link) admit(conn net.Conn) (*pipe, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.cut.Load() {
		l.rejected.Add(1)
		reset(conn)
		return nil, ""
	}
	l.accepted.Add(1)
	p := newPipe(l, conn)
	l.pipes[p] = struct{}{}
	l.wg.Add(1)
	return p, l.target
}

func (l *Link) forget(p *pipe) {
	l.mu.Lock()
	delete(l.pipes, p)
	l.mu.Unlock()
}

// reset closes conn with SO_LINGER 0 so the peer gets an RST.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
