package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// FreePort returns a loopback port that is free now, that this process has
// not handed out before, and that lies below the kernel's ephemeral range
// (see the package doc).
func FreePort() (int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 1000 {
		lo, hi = 10000, 20000
	}
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if portsUsed[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		portsUsed[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d..%d", lo, hi)
}

// FreeAddr is FreePort as a 127.0.0.1:port address.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
