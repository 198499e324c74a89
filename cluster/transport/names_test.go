package transport

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A host name in Addr is advertised as given and bound at what it resolves
// to; dialling a peer by name goes through LookupHost each time, so a name
// that did not resolve at first is reached once it does.
func TestNamedAddress(t *testing.T) {
	var published atomic.Bool
	lookup := func(ctx context.Context, host string) ([]string, error) {
		if host == "self.test" || host == "peer.test" && published.Load() {
			return []string{"127.0.0.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	trans, err := Open(Config{Addr: "self.test:" + port, LookupHost: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	if got := string(trans.LocalAddr()); got != "self.test:"+port {
		t.Fatalf("advertised %q, want the name self.test:%s", got, port)
	}

	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	_, peerPort, _ := net.SplitHostPort(peer.Addr().String())
	layer := &tcpLayer{lookup: lookup}
	if _, err := layer.Dial(raft.ServerAddress("peer.test:"+peerPort), time.Second); err == nil {
		t.Fatal("dialled a name that does not resolve yet")
	}
	published.Store(true)
	c, err := layer.Dial(raft.ServerAddress("peer.test:"+peerPort), time.Second)
	if err != nil {
		t.Fatalf("dial once the name resolves: %v", err)
	}
	c.Close()
}

func TestNamedAddressErrors(t *testing.T) {
	defer func(d time.Duration) { OwnNameTimeout = d }(OwnNameTimeout)
	OwnNameTimeout = 0
	none := func(ctx context.Context, host string) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if _, err := Open(Config{Addr: "nowhere.test:7", LookupHost: none}); err == nil || !strings.Contains(err.Error(), `"nowhere.test"`) {
		t.Fatalf("own name that never resolves: %v", err)
	}
	local := func(ctx context.Context, host string) ([]string, error) { return []string{"127.0.0.1"}, nil }
	if _, err := Open(Config{Addr: "self.test:0", LookupHost: local}); err == nil || !strings.Contains(err.Error(), "fixed port") {
		t.Fatalf("a name with port 0: %v", err)
	}
}
