package devcmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ports returns every port the layout binds: HTTP first, then Raft.
func (l devLayout) ports() []int {
	var ports []int
	for i := range l.Nodes {
		ports = append(ports, l.HTTPPort+i)
	}
	for i := range l.Nodes {
		ports = append(ports, l.RaftPort+i)
	}
	return ports
}

// takenPorts returns the layout's ports that cannot be bound now. It is a
// check made before starting, for a message that names every taken port at
// once; the nodes' own binds still decide.
func (l devLayout) takenPorts() []int {
	var taken []int
	for _, p := range l.ports() {
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(p)))
		if err != nil {
			taken = append(taken, p)
			continue
		}
		ln.Close()
	}
	return taken
}

// checkPorts refuses a layout whose ports are held (by another fencer dev,
// most often: a second `make run`), saying which ports and which flags
// would start beside it. --ephemeral alone is not the answer: it changes
// the data dir, not the ports.
func (l devLayout) checkPorts() error {
	taken := l.takenPorts()
	if len(taken) == 0 {
		return nil
	}
	var names []string
	for _, p := range taken {
		names = append(names, strconv.Itoa(p))
	}
	msg := fmt.Sprintf("%s %s %s held by another process (another fencer dev?); this cluster binds %s",
		plural(len(taken), "port", "ports"), strings.Join(names, ", "), plural(len(taken), "is", "are"), l.portRanges())
	if free, ok := l.freeShift(); ok {
		msg += fmt.Sprintf("; stop that process, or start on other ports: fencer dev --http-port %d --raft-port %d --ephemeral"+
			" (make run DEV_FLAGS='--http-port %d --raft-port %d --ephemeral'), and point the CLI at it with FENCER_ENDPOINTS=%s",
			free.HTTPPort, free.RaftPort, free.HTTPPort, free.RaftPort, free.endpoints())
	} else {
		msg += "; stop that process, or pick free ports with --http-port and --raft-port (each the first node's; the others follow)"
	}
	return errors.New(msg)
}

// portRanges is "HTTP 127.0.0.1:7001-7003, Raft 8001-8003".
func (l devLayout) portRanges() string {
	span := func(first int) string {
		if l.Nodes == 1 {
			return strconv.Itoa(first)
		}
		return fmt.Sprintf("%d-%d", first, first+l.Nodes-1)
	}
	return fmt.Sprintf("HTTP %s:%s, Raft %s", l.Host, span(l.HTTPPort), span(l.RaftPort))
}

// endpoints is the FENCER_ENDPOINTS value for the layout's nodes.
func (l devLayout) endpoints() string {
	var eps []string
	for i := range l.Nodes {
		eps = append(eps, net.JoinHostPort(l.Host, strconv.Itoa(l.HTTPPort+i)))
	}
	return strings.Join(eps, ",")
}

// freeShift finds the layout moved by 10, 20, … ports (7011, 8011 for the
// default) with every port free, so the advice can be pasted as it is.
func (l devLayout) freeShift() (devLayout, bool) {
	for shift := 10; shift <= 200; shift += 10 {
		moved := l
		moved.HTTPPort += shift
		moved.RaftPort += shift
		if moved.RaftPort+moved.Nodes > 65536 || moved.HTTPPort+moved.Nodes > 65536 {
			break
		}
		if overlaps(moved, l) {
			continue
		}
		if len(moved.takenPorts()) == 0 {
			return moved, true
		}
	}
	return devLayout{}, false
}

// overlaps reports whether two layouts share a port.
func overlaps(a, b devLayout) bool {
	in := map[int]bool{}
	for _, p := range b.ports() {
		in[p] = true
	}
	for _, p := range a.ports() {
		if in[p] {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
