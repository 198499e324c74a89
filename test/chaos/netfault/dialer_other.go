//go:build !linux

package netfault

import (
	"errors"
	"net"
)

// DialerPID needs Linux's /proc; elsewhere no dialer is ever identified,
// and a Gate lets every connection through unfaulted.
func DialerPID(net.Conn, []int) (int, error) {
	return 0, errors.New("netfault: DialerPID needs /proc (Linux)")
}
