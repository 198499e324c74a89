package request

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// CheckMemberAddrs refuses member addresses Raft or a peer could never dial:
// raft_addr is HOST:PORT, http_addr is [http[s]://][HOST]:PORT (the scheme
// and an empty host are what peers accept from a node's own --http-addr).
// A member added with a bad address would sit in the configuration,
// counting towards the quorum, until an operator removed it.
func CheckMemberAddrs(raftAddr, httpAddr string) error {
	if !validHostPort(raftAddr, true) {
		return badRequest(wire.CodeInvalidMember, fmt.Sprintf("raft_addr %.64q: want HOST:PORT", raftAddr))
	}
	bare := strings.TrimPrefix(strings.TrimPrefix(httpAddr, "http://"), "https://")
	if !validHostPort(bare, false) {
		return badRequest(wire.CodeInvalidMember, fmt.Sprintf("http_addr %.64q: want HOST:PORT, optionally after http:// or https://", httpAddr))
	}
	return nil
}

// validHostPort reports whether s is HOST:PORT with a port from 1 to 65535
// and a host that is an IP address or a DNS name (or empty, when allowed).
func validHostPort(s string, needHost bool) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return false
	}
	if host == "" {
		return !needHost
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return validDNSName(host)
}

// validDNSName reports whether s is a DNS name: dot-separated labels of
// 1-63 letters, digits, hyphens and underscores, at most 253 bytes, with an
// optional trailing dot.
func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}
