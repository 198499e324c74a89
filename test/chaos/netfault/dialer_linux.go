package netfault

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// errNoDialer is DialerPID's answer when none of the candidates holds the
// dialing end (it may have closed it already, or be someone else).
var errNoDialer = errors.New("netfault: no candidate process holds the dialing socket")

// DialerPID returns which of pids holds the dialing end of conn, a loopback
// TCP connection accepted by this process. The kernel knows and /proc
// tells: the dialer's socket is the one whose local address is conn's
// remote address, /proc/net/tcp gives its inode, and the candidate whose
// /proc/PID/fd links to socket:[inode] owns it. Only processes of the same
// user can be looked into, which is all a chaos harness starts.
func DialerPID(conn net.Conn, pids []int) (int, error) {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || local.IP.To4() == nil || remote.IP.To4() == nil {
		return 0, fmt.Errorf("netfault: %v: not an IPv4 TCP connection", conn.RemoteAddr())
	}
	inode, err := socketInode(remote, local)
	if err != nil {
		return 0, err
	}
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // exited, or not ours
		}
		for _, fd := range fds {
			if target, err := os.Readlink(dir + fd.Name()); err == nil && target == want {
				return pid, nil
			}
		}
	}
	return 0, errNoDialer
}

// socketInode finds the IPv4 TCP socket from local to remote in
// /proc/net/tcp and returns its inode.
func socketInode(local, remote *net.TCPAddr) (uint64, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	l, r := procAddr(local), procAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[1] != l || fields[2] != r {
			continue
		}
		inode, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil || inode == 0 {
			return 0, fmt.Errorf("netfault: socket %s->%s has no inode (closing)", local, remote)
		}
		return inode, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("netfault: no socket %s->%s in /proc/net/tcp", local, remote)
}

// procAddr formats an IPv4 address as /proc/net/tcp does: the address as
// a host-order 32-bit word in hex, a colon, the port in hex.
func procAddr(a *net.TCPAddr) string {
	ip := binary.NativeEndian.Uint32(a.IP.To4())
	return fmt.Sprintf("%08X:%04X", ip, a.Port)
}
