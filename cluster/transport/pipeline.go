package transport

import (
	"sync"

	"github.com/hashicorp/raft"
)

// AppendEntriesPipeline opens hashicorp/raft's pipeline to a follower with
// its answers drained all the time, so that the pipeline cannot deadlock.
//
// hashicorp/raft's netPipeline hands each answer to Consumer over a channel
// of MaxRPCsInFlight-2 slots (none by default), and its reader stops when
// a follower answers Success=false (its log is shorter than the leader
// thought: it restarted after a failed write, say). The sender may still
// pick one more trigger before it notices and send again; that send waits
// for the reader of responses, which waits for a Consumer nobody reads, and
// only the pipeline's Close, deferred in the stuck sender, would free them.
// The follower then gets heartbeats but never another entry: it neither
// catches up nor stands for election (hashicorp/raft issue 612; the chaos
// suite's soak met it after a follower's disk filled). Here every answer
// is taken off the pipeline at once and queued until Raft reads it or the
// pipeline closes, so a send never waits for a reader that left.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline is an AppendPipeline whose answers are drained into an
// unbounded queue as they arrive.
type drainedPipeline struct {
	raft.AppendPipeline
	out       chan raft.AppendFuture
	closed    chan struct{}
	closeOnce sync.Once
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture), closed: make(chan struct{})}
	go d.drain()
	return d
}

// drain moves answers from the inner pipeline to out, in order, never
// blocking the inner pipeline's reader on Raft's.
func (d *drainedPipeline) drain() {
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var send chan raft.AppendFuture
		var head raft.AppendFuture
		if len(queue) > 0 {
			send, head = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case send <- head:
			queue[0] = nil
			queue = queue[1:]
		case <-d.closed:
			return
		}
	}
}

// Consumer returns the answers, in the order the requests were sent.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the inner pipeline and stops draining it.
func (d *drainedPipeline) Close() error {
	err := d.AppendPipeline.Close()
	d.closeOnce.Do(func() { close(d.closed) })
	return err
}
