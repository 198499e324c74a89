package tlsutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultHandshakeTimeout bounds an inbound TLS handshake on the Raft port.
const DefaultHandshakeTimeout = 5 * time.Second

// TLSStreamLayer is a raft.StreamLayer whose connections are mutual TLS.
// Pass it to raft.NewNetworkTransportWithConfig as the Stream.
//
// Inbound handshakes run concurrently, each under HandshakeTimeout, and only
// completed ones are returned by Accept: a plaintext peer fails on its first
// byte, a silent one is dropped at the deadline, and neither ever reaches
// raft's RPC decoder nor holds up the connections behind it.
type TLSStreamLayer struct {
	// HandshakeTimeout bounds each inbound handshake; zero means
	// DefaultHandshakeTimeout. Set it before the transport starts.
	HandshakeTimeout time.Duration
	// Logger receives refused handshakes; nil discards. Set it before the
	// transport starts.
	Logger *slog.Logger

	ln        net.Listener
	advertise net.Addr
	serverCfg *tls.Config
	clientCfg *tls.Config

	start  sync.Once
	conns  chan net.Conn
	closed chan struct{}
	close  sync.Once
}

var _ raft.StreamLayer = (*TLSStreamLayer)(nil)

// NewTLSStreamLayer listens on bindAddr. advertise is the address peers dial
// (nil: the bound address); a concrete IP, not 0.0.0.0, or a host name. serverCfg
// accepts peers and clientCfg dials them, as PeerConfig returns them.
func NewTLSStreamLayer(bindAddr string, advertise net.Addr, serverCfg, clientCfg *tls.Config) (*TLSStreamLayer, error) {
	if serverCfg == nil || clientCfg == nil {
		return nil, errors.New("tls stream layer: want both a server and a client TLS config")
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft listen on %s: %w", bindAddr, err)
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	// A concrete IP, or a host name peers resolve when they dial.
	if tcp, ok := advertise.(*net.TCPAddr); ok && (tcp.IP == nil || tcp.IP.IsUnspecified()) {
		ln.Close()
		return nil, fmt.Errorf("raft address %v is not advertisable: give a concrete IP or a host name", advertise)
	} else if host, _, err := net.SplitHostPort(advertise.String()); !ok && (err != nil || host == "") {
		ln.Close()
		return nil, fmt.Errorf("raft address %v is not advertisable: want HOST:PORT", advertise)
	}
	return &TLSStreamLayer{
		ln:        ln,
		advertise: advertise,
		serverCfg: serverCfg,
		clientCfg: clientCfg,
		conns:     make(chan net.Conn),
		closed:    make(chan struct{}),
	}, nil
}

// Accept returns the next inbound connection whose handshake completed.
func (s *TLSStreamLayer) Accept() (net.Conn, error) {
	s.start.Do(func() { go s.acceptLoop() })
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *TLSStreamLayer) acceptLoop() {
	var delay time.Duration
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			// A transient error (out of file descriptors): back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go s.handshake(raw)
	}
}

func (s *TLSStreamLayer) handshake(raw net.Conn) {
	timeout := s.HandshakeTimeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn := tls.Server(raw, s.serverCfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		if s.Logger != nil {
			s.Logger.Warn("refused raft connection", "remote", raw.RemoteAddr().String(), "err", err)
		}
		return
	}
	select {
	case s.conns <- conn:
	case <-s.closed:
		conn.Close()
	}
}

// Dial connects to a peer and completes the handshake within timeout. The
// peer's certificate must name the host being dialed.
func (s *TLSStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.clientCfg}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return d.DialContext(ctx, "tcp", string(address))
}

// Addr returns the advertised address.
func (s *TLSStreamLayer) Addr() net.Addr { return s.advertise }

// Close stops listening; Accept then fails with net.ErrClosed.
func (s *TLSStreamLayer) Close() error {
	var err error
	s.close.Do(func() {
		close(s.closed)
		err = s.ln.Close()
	})
	return err
}
