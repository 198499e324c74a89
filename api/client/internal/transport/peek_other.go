//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package transport

import "net"

// peekIdle reports whether a read on c would block; without a
// non-blocking peek, a read with a short deadline tells.
func peekIdle(c net.Conn) bool { return peekIdleByDeadline(c) }
