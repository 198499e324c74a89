package transport

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultPeerWait is how long an AppendEntries or InstallSnapshot whose
// connection could not be opened waits for the peer to accept one, unless
// Config.PeerWait says otherwise. See waitForPeer.
const DefaultPeerWait = 30 * time.Second

// peerPoll is how often a waiting call tries the peer again: the delay
// between a peer's return and the leader reaching it.
var peerPoll = 100 * time.Millisecond

// AppendEntries sends an AppendEntries RPC (replication and heartbeats),
// waiting for a peer that cannot be connected to (waitForPeer).
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.waitForPeer(func() error { return t.NetworkTransport.AppendEntries(id, target, args, resp) })
}

// InstallSnapshot sends a snapshot, waiting for a peer that cannot be
// connected to (waitForPeer). Nothing is read from data before the
// connection is open, so a call tried again sends the whole snapshot.
func (t *Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.waitForPeer(func() error { return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data) })
}

// waitForPeer runs rpc; if it failed because no connection to the peer
// could be opened (nothing was sent), it tries again every peerPoll until
// the peer accepts a connection, and returns what that attempt returns, or
// returns the failure once the wait is over: after PeerWait, or at once when
// the transport closes, is severed, or the node stops leading (SetLeading).
//
// Why: hashicorp/raft's replication to a follower sleeps before each try
// after a failed RPC, 10 ms doubling per failure up to 10.24 s, and only a
// successful RPC resets it. A follower that was down for a minute was
// retried every 10 s, so its return went unnoticed for up to 10 s. Each
// wait here is one failure however long it lasts, so the count climbs one
// per PeerWait instead of one per sleep, and a follower back within a few
// minutes of going down is reached within peerPoll. A call held here is a
// request delayed in the network, which Raft is built to tolerate.
func (t *Transport) waitForPeer(rpc func() error) error {
	err := rpc()
	if err == nil || !unreachable(err) {
		return err
	}
	end, ok := t.wait.begin()
	if !ok {
		return err
	}
	deadline := time.NewTimer(t.wait.max)
	defer deadline.Stop()
	tick := time.NewTicker(peerPoll)
	defer tick.Stop()
	for {
		select {
		case <-end:
			return err
		case <-deadline.C:
			return err
		case <-tick.C:
		}
		if err = rpc(); err == nil || !unreachable(err) {
			return err
		}
	}
}

// unreachable reports whether err is a failure to open a connection (the
// peer refused it, could not be routed to, did not answer the dial, or its
// name does not resolve), as opposed to one on a connection that was open
// or a TLS handshake the peer failed.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}

// SetLeading tells the transport whether this node leads. Only a leader
// sends AppendEntries and snapshots; when the node stops leading, the calls
// its old replication left waiting end at once instead of outliving its
// term, and none waits until it leads again.
func (t *Transport) SetLeading(leading bool) { t.wait.setOn(leading) }

// StopWaiting ends every wait for good. Call it before Raft's Shutdown,
// which waits for the replication goroutines a wait would hold.
func (t *Transport) StopWaiting() { t.wait.stop() }

// Close ends every wait and closes the transport.
func (t *Transport) Close() error {
	t.wait.stop()
	return t.NetworkTransport.Close()
}

// peerWait holds the state of the waits: whether calls may wait, and a
// channel closed to end the ones in progress.
type peerWait struct {
	max time.Duration // <= 0: no waiting

	mu      sync.Mutex
	off     bool // the node does not lead
	stopped bool // for good
	end     chan struct{}
}

func newPeerWait(max time.Duration) *peerWait {
	return &peerWait{max: max, end: make(chan struct{})}
}

// begin returns the channel that ends a wait starting now, or false if
// calls may not wait.
func (w *peerWait) begin() (<-chan struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max <= 0 || w.off || w.stopped {
		return nil, false
	}
	return w.end, true
}

func (w *peerWait) setOn(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !on && !w.off {
		w.release()
	}
	w.off = !on
}

func (w *peerWait) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		w.release()
	}
}

// release ends the waits in progress; w.mu is held.
func (w *peerWait) release() {
	close(w.end)
	w.end = make(chan struct{})
}
