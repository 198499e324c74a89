package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The leader writes each entry in the newest format every member of the
// configuration has recorded (entry.Member.LogFormat), so that in a rolling
// upgrade a member still running an older build is never sent an entry it
// cannot decode (it would stop rather than diverge). A member records its
// format when it registers; an upgraded member re-registers because its
// record no longer matches (registered). Until every member has, entries
// stay JSON.
//
// Reading the configuration goes through Raft's main loop, so the answer is
// cached for formatRefresh; a join lowers it at once, before the new member
// is added, to the format the joiner says it reads (JSON from builds that
// do not say), and it is recomputed from the records afterwards. (Lowering
// it to JSON for every join would leave a second after each one in which
// acquires carry no principal.)
const formatRefresh = time.Second

type entryFormat struct {
	mu      sync.Mutex
	format  int
	checked time.Time // zero: recompute on next use
}

// entryFormat is the format of the next entry this leader proposes.
func (n *Node) entryFormat() int {
	f := &n.format
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.checked.IsZero() && time.Since(f.checked) < formatRefresh {
		return f.format
	}
	f.format, f.checked = n.clusterFormat(), time.Now()
	return f.format
}

// clusterFormat is the newest format that every member in the configuration
// has recorded; a member without a record counts as JSON-only.
func (n *Node) clusterFormat() int {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return entry.LogFormatJSON
	}
	format := entry.LogFormat
	for _, s := range cf.Configuration().Servers {
		m, ok := n.fsm.Member(string(s.ID))
		if !ok {
			return entry.LogFormatJSON
		}
		format = min(format, m.LogFormat)
	}
	return format
}

// freshEntryFormat is entryFormat once its cached answer has expired (at
// most formatRefresh from now), for a command the cached format cannot
// carry although every member's record reads it.
func (n *Node) freshEntryFormat() int {
	f := &n.format
	f.mu.Lock()
	wait := formatRefresh - time.Since(f.checked)
	f.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	return n.entryFormat()
}

// holdFormat makes the leader write at most format, the one a member about
// to join says it reads, from now until the records are read again after
// formatRefresh: the joiner's format is not recorded yet.
func (n *Node) holdFormat(format int) {
	format = min(format, n.clusterFormat())
	f := &n.format
	f.mu.Lock()
	f.format, f.checked = format, time.Now()
	f.mu.Unlock()
}

// membersBelow lists the members in the configuration whose recorded log
// format is below format, for an operator who must upgrade them.
func (n *Node) membersBelow(format int) []string {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	var out []string
	for _, s := range cf.Configuration().Servers {
		if m, ok := n.fsm.Member(string(s.ID)); !ok || m.LogFormat < format {
			out = append(out, fmt.Sprintf("%s (log format %d)", s.ID, m.LogFormat))
		}
	}
	return out
}
