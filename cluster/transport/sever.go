package transport

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Transport is a node's Raft transport, which the node can cut itself off
// with.
type Transport struct {
	*raft.NetworkTransport
	layer *severable
	wait  *peerWait
}

// Sever closes every connection of the transport and refuses new ones, in
// both directions, for good. hashicorp/raft sends heartbeats from goroutines
// of their own, which go on while its main loop is stuck (a leader whose
// disk write hangs); Raft's Shutdown waits for that loop, so it cannot stop
// them, and as long as they flow no follower elects another leader. After
// Sever the node is silent to the cluster, as if it had exited.
func (t *Transport) Sever() {
	t.wait.stop()
	t.layer.sever()
}

// errSevered is what a severed transport's dials return.
var errSevered = errors.New("raft transport severed: this node cut itself off from the cluster")

// severable wraps a stream layer with Sever.
type severable struct {
	raft.StreamLayer

	mu      sync.Mutex
	severed bool
	conns   map[*trackedConn]struct{}
}

func newSeverable(l raft.StreamLayer) *severable {
	return &severable{StreamLayer: l, conns: map[*trackedConn]struct{}{}}
}

// Accept hands out the connections accepted until Sever; after it, each is
// closed at once and Accept waits for the next, so the transport's accept
// loop neither serves them nor logs a failure per attempt.
func (s *severable) Accept() (net.Conn, error) {
	for {
		c, err := s.StreamLayer.Accept()
		if err != nil {
			return nil, err
		}
		if tc := s.track(c); tc != nil {
			return tc, nil
		}
	}
}

func (s *severable) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	severed := s.severed
	s.mu.Unlock()
	if severed {
		return nil, errSevered
	}
	c, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if tc := s.track(c); tc != nil {
		return tc, nil
	}
	return nil, errSevered
}

// track records c, or closes it and returns nil once severed.
func (s *severable) track(c net.Conn) *trackedConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.severed {
		c.Close()
		return nil
	}
	tc := &trackedConn{Conn: c, s: s}
	s.conns[tc] = struct{}{}
	return tc
}

func (s *severable) sever() {
	s.mu.Lock()
	s.severed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// trackedConn leaves its layer's set when closed.
type trackedConn struct {
	net.Conn
	s    *severable
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
