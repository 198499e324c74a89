// Package transport opens a node's Raft transport: TCP, or mutual TLS when
// the cluster runs it; dialling each peer at a proxy address when told to
// (the chaos suite routes links through fault proxies this way); and
// logging a stranger's connections at most once a minute.
package transport

import (
	"crypto/tls"
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
	RaftLogger    hclog.Logger // hashicorp/raft's logger
	Logger        *slog.Logger // the TLS layer's
}

// Open binds the transport.
func Open(cfg Config) (*raft.NetworkTransport, error) {
	tcpAddr, err := net.ResolveTCPAddr("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("raft address: %w", err)
	}
	var advertise net.Addr = tcpAddr
	if tcpAddr.Port == 0 {
		advertise = nil // let the transport advertise what it bound
	}
	tcfg := &raft.NetworkTransportConfig{
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  newTransportLogger(cfg.RaftLogger),
	}
	if len(cfg.PeerAddrs) > 0 || cfg.PeerAddrsFile != "" {
		tcfg.ServerAddressProvider = &peerAddrs{static: cfg.PeerAddrs, file: cfg.PeerAddrsFile}
		tcfg.Timeout = time.Second // a blackholed link must fail fast
	}
	if cfg.TLSServer == nil {
		trans, err := raft.NewTCPTransportWithConfig(cfg.Addr, advertise, tcfg)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.Addr, err)
		}
		return trans, nil
	}
	layer, err := tlsutil.NewTLSStreamLayer(cfg.Addr, advertise, cfg.TLSServer, cfg.TLSClient)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.Addr, err)
	}
	layer.Logger = cfg.Logger
	tcfg.Stream = layer
	return raft.NewNetworkTransportWithConfig(tcfg), nil
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

	mu       sync.Mutex
	modTime  time.Time
	fromFile map[string]string
}

func (p *peerAddrs) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
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
