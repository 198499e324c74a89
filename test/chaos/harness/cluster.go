package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/test/chaos/netfault"
	"github.com/fencer-io/fencer/test/diskfault"
)

// Options describe a Cluster.
type Options struct {
	Bin    string // fencer binary
	Dir    string // parent of the nodes' data dirs
	LogDir string // one log file per node
	Nodes  int    // members started at first
	// Spares are extra node slots, not started at first, for membership
	// changes.
	Spares int
	// Clients is how many client processes will dial the nodes, named
	// ClientName(0..Clients-1): each gets links of its own into every node.
	Clients int
	Group   *Group
	// LogStore is the members' --log-store: bolt (default), wal, or mixed
	// (odd-numbered slots bolt, even ones wal).
	LogStore string
}

// ClientName is the process name of client i, by which the HTTP mesh knows
// it.
func ClientName(i int) string { return fmt.Sprintf("client-%d", i) }

// Node is one node slot: fixed id and addresses, a data dir, and the
// process currently running on them, if any.
type Node struct {
	ID string
	// HTTPAddr is where the node's API listens: only the harness dials it,
	// so that its own view is never cut off.
	HTTPAddr string
	// Gate is the HTTP address the node advertises, its netfault Gate:
	// every other node and client that learns of it from the cluster
	// dials it, and reaches the node through its own link.
	Gate     string
	RaftAddr string
	DataDir  string
	PeerFile string
	// DiskFile switches the node's log store (test/diskfault): the
	// nemesis writes a mode to it, the node acknowledges it.
	DiskFile string
	// LogStore is the kind of log store the node runs.
	LogStore string

	member bool     // in the configuration, as far as the harness knows
	proc   *Proc    // nil before the first start
	args   []string // how it was last started: its join flags
}

// Running reports whether the node's process is running (or stopped).
func (n *Node) Running() bool { return n.proc != nil && n.proc.Running() }

// Cluster is a set of node slots, their fault proxies, and the processes
// running on them. Its methods are not safe for concurrent use: one
// nemesis drives it.
type Cluster struct {
	opts  Options
	net   *netfault.Net
	http  *netfault.HTTPMesh
	nodes []*Node
}

// NewCluster allocates ports, data dirs and proxies for every slot. It
// starts nothing.
func NewCluster(opts Options) (*Cluster, error) {
	if opts.Nodes < 1 || opts.Bin == "" || opts.Group == nil {
		return nil, errors.New("harness: cluster needs nodes, a binary and a group")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts}
	targets := map[string]string{}
	for i := 1; i <= opts.Nodes+opts.Spares; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i)}
		var err error
		if n.HTTPAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
		if n.RaftAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
		n.DataDir = filepath.Join(opts.Dir, n.ID)
		n.PeerFile = filepath.Join(opts.Dir, n.ID+".peers")
		n.DiskFile = filepath.Join(opts.Dir, n.ID+".disk")
		if n.LogStore, err = slotLogStore(opts.LogStore, i); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		targets[n.ID] = n.RaftAddr
	}
	net, err := netfault.NewNet(targets)
	if err != nil {
		return nil, err
	}
	c.net = net
	httpTargets := map[string]string{}
	var sources []string
	for _, n := range c.nodes {
		httpTargets[n.ID] = n.HTTPAddr
		sources = append(sources, n.ID)
	}
	for i := range opts.Clients {
		sources = append(sources, ClientName(i))
	}
	if c.http, err = netfault.NewHTTPMesh(httpTargets, sources, c.identify(sources)); err != nil {
		return nil, errors.Join(err, net.Close())
	}
	for _, n := range c.nodes {
		n.Gate = c.http.GateAddr(n.ID)
	}
	for _, n := range c.nodes {
		var lines []string
		for peer, addr := range net.PeerAddrs(n.ID) {
			lines = append(lines, peer+"="+addr)
		}
		slices.Sort(lines)
		if err := os.WriteFile(n.PeerFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	return c, nil
}

// identify tells a Gate which of sources dialed a connection, by asking
// the kernel which running process holds its other end.
func (c *Cluster) identify(sources []string) netfault.Identify {
	known := map[string]bool{}
	for _, s := range sources {
		known[s] = true
	}
	return func(conn net.Conn) (string, bool) {
		names := map[int]string{}
		var pids []int
		for _, p := range c.opts.Group.Running() {
			if known[p.Name()] {
				names[p.Pid()] = p.Name()
				pids = append(pids, p.Pid())
			}
		}
		pid, err := netfault.DialerPID(conn, pids)
		if err != nil {
			return "", false
		}
		return names[pid], true
	}
}

// Net is the mesh of Raft fault proxies.
func (c *Cluster) Net() *netfault.Net { return c.net }

// HTTP is the mesh of HTTP fault proxies: the nodes' gates, and every
// node's and client's links into every node.
func (c *Cluster) HTTP() *netfault.HTTPMesh { return c.http }

// ClientEndpoints are client i's own addresses of every node slot.
func (c *Cluster) ClientEndpoints(i int) []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, c.http.Addr(ClientName(i), n.ID))
	}
	return out
}

// Close closes the proxies. Processes belong to the Group.
func (c *Cluster) Close() error { return errors.Join(c.net.Close(), c.http.Close()) }

// Nodes returns every slot.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the slot named id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Members returns the slots the harness believes are members.
func (c *Cluster) Members() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.member {
			out = append(out, n)
		}
	}
	return out
}

// Spares returns the slots that are not members.
func (c *Cluster) Spares() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if !n.member {
			out = append(out, n)
		}
	}
	return out
}

// HTTPAddrs returns every slot's HTTP address: what clients are given, so
// that they can reach members added later.
func (c *Cluster) HTTPAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.HTTPAddr)
	}
	return out
}

// Start starts the initial members together with --initial-cluster and
// waits until they have a leader and are ready.
func (c *Cluster) Start(ctx context.Context) error {
	var peers []string
	for _, n := range c.nodes[:c.opts.Nodes] {
		peers = append(peers, fmt.Sprintf("%s=%s@%s", n.ID, n.RaftAddr, n.Gate))
	}
	for _, n := range c.nodes[:c.opts.Nodes] {
		if err := c.start(n, "--initial-cluster", strings.Join(peers, ",")); err != nil {
			return err
		}
		n.member = true
	}
	return c.WaitHealthy(ctx)
}

func (c *Cluster) start(n *Node, mode ...string) error {
	args := []string{"serve", "--id", n.ID, "--data-dir", n.DataDir,
		"--http-addr", n.HTTPAddr, "--http-advertise-addr", n.Gate,
		"--raft-addr", n.RaftAddr, "--peer-proxy-file", n.PeerFile, "--stall-timeout", StallTimeout.String(),
		"--log-store", n.LogStore}
	args = append(args, mode...)
	p, err := c.opts.Group.Start(Spec{Name: n.ID, Path: c.opts.Bin, Args: args, Log: c.LogPath(n),
		Env: []string{diskfault.ControlEnv + "=" + n.DiskFile}})
	if err != nil {
		return err
	}
	n.proc, n.args = p, mode
	return nil
}

// slotLogStore is the log store of slot i (from 1) for the cluster's
// LogStore option.
func slotLogStore(opt string, i int) (string, error) {
	switch opt {
	case "", "bolt":
		return "bolt", nil
	case "wal":
		return "wal", nil
	case "mixed":
		return map[bool]string{true: "bolt", false: "wal"}[i%2 == 1], nil
	}
	return "", fmt.Errorf("harness: log store %q: want bolt, wal or mixed", opt)
}

// LogPath is the node's log file.
func (c *Cluster) LogPath(n *Node) string { return filepath.Join(c.opts.LogDir, n.ID+".log") }

// Kill SIGKILLs the node's process and waits until it is gone.
func (c *Cluster) Kill(n *Node) {
	if n.proc != nil {
		n.proc.Kill()
	}
}

// Restart starts the node again on its data dir, with the flags it was
// last started with (which an existing data dir makes moot).
func (c *Cluster) Restart(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	return c.start(n, n.args...)
}

// StallTimeout is the members' --stall-timeout: shorter than fencer's
// default, so that a disk fault runs its course within a few seconds.
const StallTimeout = 2 * time.Second

// Disk modes of SetDisk.
const (
	DiskHealthy = ""
	DiskStall   = "stall"  // writes hang
	DiskFull    = "enospc" // writes fail with ENOSPC
)

// SetDisk switches the node's log store to mode. A running node must
// acknowledge it within 2s (a fencer built without -tags diskfault does
// not); a node that is down reads it when it starts.
func (c *Cluster) SetDisk(n *Node, mode string) error {
	_ = os.Remove(n.DiskFile + ".ack") // an earlier answer is no answer
	if err := os.WriteFile(n.DiskFile, []byte(mode), 0o644); err != nil {
		return err
	}
	if !n.Running() {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if ack, err := os.ReadFile(n.DiskFile + ".ack"); err == nil && string(ack) == mode {
			return nil
		}
		if !n.Running() {
			return nil // it exited meanwhile: a restart reads the file
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not switch its disk to %q: is fencer built with -tags diskfault?", n.ID, mode)
		}
		time.Sleep(20 * time.Millisecond) // polling the acknowledgement
	}
}

// WaitExit waits up to timeout for the node's process to exit on its own,
// reporting whether it did.
func (c *Cluster) WaitExit(n *Node, timeout time.Duration) bool {
	return n.proc == nil || n.proc.WaitExit(timeout)
}

// Pause SIGSTOPs the node.
func (c *Cluster) Pause(n *Node) error { return n.proc.Pause() }

// Resume SIGCONTs the node.
func (c *Cluster) Resume(n *Node) error { return n.proc.Resume() }

// Wipe deletes the data dir of a node that is not running.
func (c *Cluster) Wipe(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	return os.RemoveAll(n.DataDir)
}

// Join starts a node with an empty data dir that joins through the
// running members; replace adds --replace. It does not wait.
func (c *Cluster) Join(n *Node, replace bool) error {
	if n.Running() {
		return fmt.Errorf("%s is running", n.ID)
	}
	var via []string
	for _, m := range c.Members() {
		if m != n && m.Running() {
			via = append(via, m.Gate)
		}
	}
	mode := []string{"--join", strings.Join(via, ",")}
	if replace {
		mode = append(mode, "--replace")
	}
	if err := c.start(n, mode...); err != nil {
		return err
	}
	n.member = true
	return nil
}

// ExpectRefusal waits for a node started by Join to exit, and checks that
// it exited non-zero saying its join was refused.
func (c *Cluster) ExpectRefusal(n *Node, timeout time.Duration) error {
	if !n.proc.WaitExit(timeout) {
		return fmt.Errorf("%s still running after %v: a wiped voter was not refused", n.ID, timeout)
	}
	if n.proc.ExitErr() == nil {
		return fmt.Errorf("%s exited with status 0: a wiped voter was not refused", n.ID)
	}
	log, err := os.ReadFile(c.LogPath(n))
	if err != nil {
		return err
	}
	last := string(log)
	if i := strings.LastIndex(last, "=== "); i > 0 {
		if j := strings.LastIndex(last[:i], "=== "); j >= 0 {
			last = last[j:]
		}
	}
	if !strings.Contains(last, "refused") {
		return fmt.Errorf("%s exited (%v) without saying its join was refused; see %s", n.ID, n.proc.ExitErr(), c.LogPath(n))
	}
	return nil
}

// Remove asks the leader to remove member id (retrying across leader
// changes until ctx ends); the node's process is left alone.
func (c *Cluster) Remove(ctx context.Context, n *Node) error {
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		leader, _, err := c.Leader(ctx)
		if err != nil {
			return false, err
		}
		if err := send(ctx, "DELETE", leader.HTTPAddr, "/v1/cluster/members/"+n.ID); err != nil {
			if strings.Contains(err.Error(), "404") {
				return true, nil // already gone: an earlier attempt landed
			}
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", n.ID, err)
	}
	n.member = false
	return nil
}

// Leader returns the running member that claims leadership with the
// highest term, and its status.
func (c *Cluster) Leader(ctx context.Context) (*Node, wire.ClusterStatus, error) {
	var best *Node
	var bestSt wire.ClusterStatus
	var errs []error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		st, err := status(ctx, n.HTTPAddr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.State == "Leader" && st.Leader == n.ID && (best == nil || st.Term > bestSt.Term) {
			best, bestSt = n, st
		}
	}
	if best == nil {
		return nil, bestSt, fmt.Errorf("no leader: %w", errors.Join(errs...))
	}
	return best, bestSt, nil
}

// WaitHealthy waits until there is a leader whose configuration holds
// exactly the members the harness believes in, every member has registered
// itself (its record carries its incarnation and this build's log format:
// until then a wipe of its disk cannot be told apart from a fresh start),
// and every running member is ready (knows the leader and has applied what
// was committed).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		_, st, err := c.Leader(ctx)
		if err != nil {
			return false, err
		}
		if st.LogFormat != entry.LogFormat {
			return false, fmt.Errorf("the leader writes log format %d, not yet %d", st.LogFormat, entry.LogFormat)
		}
		var have, want []string
		for _, m := range st.Members {
			have = append(have, m.ID)
			if m.LogFormat != entry.LogFormat {
				return false, fmt.Errorf("%s has not registered itself yet", m.ID)
			}
		}
		for _, n := range c.Members() {
			want = append(want, n.ID)
			if n.Running() && !ready(ctx, n.HTTPAddr) {
				return false, fmt.Errorf("%s not ready", n.ID)
			}
		}
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return false, fmt.Errorf("leader's members %v, want %v", have, want)
		}
		return true, nil
	})
}

// Digests returns GET /v1/debug/state of every running member, once they
// all report the same applied index.
func (c *Cluster) Digests(ctx context.Context) (map[string]wire.StateDigest, error) {
	var out map[string]wire.StateDigest
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		out = map[string]wire.StateDigest{}
		index := uint64(0)
		for _, n := range c.Members() {
			if !n.Running() {
				continue
			}
			d, err := digest(ctx, n.HTTPAddr)
			if err != nil {
				return false, err
			}
			if len(out) > 0 && d.AppliedIndex != index {
				return false, fmt.Errorf("applied indexes differ: %s at %d, another at %d", n.ID, d.AppliedIndex, index)
			}
			index = d.AppliedIndex
			out[n.ID] = d
		}
		return true, nil
	})
	return out, err
}

// TransferLeader asks leader to hand leadership to another voter.
func (c *Cluster) TransferLeader(ctx context.Context, leader *Node) error {
	return send(ctx, "POST", leader.HTTPAddr, "/v1/cluster/leader/transfer")
}
