// Package transport opens a node's Raft transport: TCP, or mutual TLS when
// the cluster runs it; dialling each peer at a proxy address when told to
// (the chaos suite routes links through fault proxies this way); and
// logging a stranger's connections at most once a minute; cutting the
// node off from the cluster when it must stop leading but cannot stop Raft
// (Sever); and holding a replication call to a peer that is down until it
// returns, within a bound, so that Raft's backoff does not grow while the
// peer is away (waitForPeer).
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/internal/tlsutil"
)

// Config describes a node's Raft transport.
type Config struct {
	// Addr is the bind and advertise address; port 0 binds any port and
	// advertises it.
	Addr string
	// TLSServer and TLSClient, when set, run the transport over mutual TLS
	// (tlsutil.PeerConfig).
	TLSServer *tls.Config
	TLSClient *tls.Config
	// PeerAddrs overrides the address dialled to reach a peer, by peer id.
	PeerAddrs map[string]string
	// PeerAddrsFile holds the same map, one ID=HOST:PORT per line or
	// comma-separated; it is re-read whenever it changes.
	PeerAddrsFile string
	// LocalID is this node's id. Raft names its own address in every
	// request's header, through the same lookup as peers': with peer
	// addresses given, this node's id resolves to its own address.
	LocalID    string
	RaftLogger hclog.Logger // hashicorp/raft's logger
	Logger     *slog.Logger // the TLS layer's
	// LookupHost resolves host names: this node's own in Addr (to bind),
	// and peers' when dialling them over TCP. Nil is the system resolver.
	// Tests give one that knows names the system does not.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// PeerWait bounds how long a replication call waits for a peer that
	// does not accept connections (Transport.waitForPeer): 0 is
	// DefaultPeerWait, negative does not wait.
	PeerWait time.Duration
}

// OwnNameTimeout bounds how long Open waits for a host name in Addr to
// resolve (in Kubernetes a pod's own DNS record may appear just after it
// starts).
var OwnNameTimeout = 30 * time.Second

// nameAddr is an address advertised by host name: peers resolve it each
// time they dial, so it outlives a change of IP (a rescheduled pod).
type nameAddr string

func (a nameAddr) Network() string { return "tcp" }
func (a nameAddr) String() string  { return string(a) }

// Open binds the transport. Addr may name its host by IP or by name: a
// name is resolved once to bind, and advertised as the name, so that the
// Raft configuration holds names and peers resolve them whenever they dial
// (a peer whose name does not resolve yet is retried like one that is down).
//
// It is long because it is the transport's setup in order, with one cleanup
// path.
func Open(cfg Config) (*Transport, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: want HOST:PORT: %w", cfg.Addr, err)
	}
	named := host != "" && net.ParseIP(host) == nil
	tcfg := &raft.NetworkTransportConfig{
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  newTransportLogger(cfg.RaftLogger),
	}
	var peers *peerAddrs
	if len(cfg.PeerAddrs) > 0 || cfg.PeerAddrsFile != "" {
		peers = &peerAddrs{static: cfg.PeerAddrs, file: cfg.PeerAddrsFile, self: cfg.LocalID}
		tcfg.ServerAddressProvider = peers
		tcfg.Timeout = time.Second // a blackholed link must fail fast
	}
	bind := cfg.Addr
	var advertise net.Addr
	if named {
		ip, err := resolveOwn(cfg, host)
		if err != nil {
			return nil, err
		}
		if port == "0" {
			return nil, fmt.Errorf("raft address %q: a host name needs a fixed port, the one its peers dial", cfg.Addr)
		}
		bind, advertise = net.JoinHostPort(ip, port), nameAddr(cfg.Addr)
	} else {
		tcpAddr, err := net.ResolveTCPAddr("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("raft address: %w", err)
		}
		if tcpAddr.Port != 0 {
			advertise = tcpAddr // else let the transport advertise what it bound
		}
	}
	var stream raft.StreamLayer
	if cfg.TLSServer != nil {
		layer, err := tlsutil.NewTLSStreamLayer(bind, advertise, cfg.TLSServer, cfg.TLSClient)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.Addr, err)
		}
		layer.Logger = cfg.Logger
		stream = layer
	} else {
		ln, err := net.Listen("tcp", bind)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.Addr, err)
		}
		if advertise == nil {
			advertise = ln.Addr()
		}
		if a, ok := advertise.(*net.TCPAddr); ok && (a.IP == nil || a.IP.IsUnspecified()) {
			ln.Close()
			return nil, fmt.Errorf("raft address %s: peers cannot dial an unspecified address; bind a specific one", advertise)
		}
		stream = &tcpLayer{Listener: ln, advertise: advertise, lookup: cfg.LookupHost}
	}
	if peers != nil {
		peers.selfAddr = raft.ServerAddress(stream.Addr().String())
	}
	// Every connection goes through the layer that Sever closes.
	sev := newSeverable(stream)
	tcfg.Stream = sev
	wait := cfg.PeerWait
	if wait == 0 {
		wait = DefaultPeerWait
	}
	return &Transport{NetworkTransport: raft.NewNetworkTransportWithConfig(tcfg), layer: sev, wait: newPeerWait(wait)}, nil
}

// resolveOwn resolves this node's own host name to the IP to bind,
// retrying for OwnNameTimeout.
func resolveOwn(cfg Config, host string) (string, error) {
	lookup := cfg.LookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	deadline := time.Now().Add(OwnNameTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := lookup(ctx, host)
		cancel()
		if err == nil && len(addrs) > 0 {
			return addrs[0], nil
		}
		if err == nil {
			err = errors.New("no addresses")
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("raft address: resolve this node's own name %q: %w", host, err)
		}
		if cfg.Logger != nil {
			cfg.Logger.Warn("this node's raft host name does not resolve yet; retrying", "host", host, "err", err)
		}
		time.Sleep(time.Second) // waiting for DNS, bounded by OwnNameTimeout
	}
}

// tcpLayer is Raft's plain TCP stream layer (whose fields hashicorp/raft
// does not export), which also advertises a host name and resolves names
// with Config.LookupHost.
type tcpLayer struct {
	net.Listener
	advertise net.Addr
	lookup    func(ctx context.Context, host string) ([]string, error)
}

func (l *tcpLayer) Addr() net.Addr { return l.advertise }

func (l *tcpLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	host, port, err := net.SplitHostPort(string(address))
	if err != nil || l.lookup == nil || net.ParseIP(host) != nil {
		return d.DialContext(ctx, "tcp", string(address))
	}
	ips, err := l.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	for _, ip := range ips {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", net.JoinHostPort(ip, port)); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// ParsePeerAddrs parses "n2=HOST:PORT,n3=HOST:PORT".
func ParsePeerAddrs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer address %q: want ID=HOST:PORT", part)
		}
		out[id] = addr
	}
	return out, nil
}

// peerAddrs resolves a peer id to the address this node must dial: from the
// file if one is given (re-read when it changes), else from the static map.
type peerAddrs struct {
	static map[string]string
	file   string
	// self and selfAddr: this node answers for itself without a lookup
	// (without it, each request logged a warning: hundreds a second).
	self     string
	selfAddr raft.ServerAddress

	mu       sync.Mutex
	modTime  time.Time
	fromFile map[string]string
}

func (p *peerAddrs) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if p.self != "" && string(id) == p.self {
		return p.selfAddr, nil
	}
	m := p.static
	if p.file != "" {
		p.mu.Lock()
		if st, err := os.Stat(p.file); err == nil && !st.ModTime().Equal(p.modTime) {
			if data, err := os.ReadFile(p.file); err == nil {
				if parsed, err := ParsePeerAddrs(strings.ReplaceAll(string(data), "\n", ",")); err == nil {
					p.fromFile, p.modTime = parsed, st.ModTime()
				}
			}
		}
		if p.fromFile != nil {
			m = p.fromFile
		}
		p.mu.Unlock()
	}
	if addr, ok := m[string(id)]; ok {
		return raft.ServerAddress(addr), nil
	}
	return "", fmt.Errorf("no proxy address for %s", id)
}
