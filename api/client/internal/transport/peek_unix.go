//go:build linux || darwin || freebsd || netbsd || openbsd

package transport

import (
	"net"
	"syscall"
)

// peekIdle reports whether c's socket would block on a read: no close and
// no bytes have arrived. One non-blocking MSG_PEEK, taking nothing.
func peekIdle(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return peekIdleByDeadline(c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	idle := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		idle = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true // answered either way: never wait for readiness
	})
	return err == nil && idle
}
