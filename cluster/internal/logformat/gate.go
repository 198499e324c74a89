// Package logformat is the leader's entry-format gate: it encodes each
// command in the newest log format every member of the configuration has
// recorded.
//
// In a rolling upgrade a member still running an older build is thus never
// sent an entry it cannot decode (it would stop rather than diverge). A
// member records its format (entry.Member.LogFormat) when it registers; an
// upgraded member re-registers because its record no longer matches. Until
// every member has, entries stay JSON.
//
// The gate never drops below what the members run: a new cluster's first
// leader records every member of the bootstrap configuration at its own
// build's format before it names the cluster (cluster.establish), a joiner's
// record is written before it is added, and a restarted member keeps the
// record it had. A member without a record (an operator's add of a node that
// has not registered yet) counts as JSON-only: its build is unknown.
//
// Reading the configuration goes through Raft, so the answer is cached for a
// second and dropped (Invalidate) whenever the node changes the records or
// the configuration itself, or gains the leadership; a join that adds a
// member lowers it at once (Hold), before the member is added and until the
// join ends, to the format the joiner says it reads (JSON from builds that do
// not say). A join that
// adds nothing (a member registering again, a replayed join) holds nothing.
package logformat

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
)

// refresh is how long the gate trusts the format it computed.
const refresh = time.Second

// Gate chooses the format of the entries a leader writes.
type Gate struct {
	// configuration reads Raft's configuration; member, the member record
	// of an id.
	configuration func() (raft.Configuration, error)
	member        func(id string) (entry.Member, bool)
	refresh       time.Duration

	mu      sync.Mutex
	format  int
	checked time.Time // zero: recompute on next use
	// holds are the formats of the joins under way (Hold): none of them
	// may be exceeded until it is released, whatever the cache.
	holds map[*int]struct{}
}

// New is a gate over the configuration Raft reports and the members' records.
func New(configuration func() (raft.Configuration, error), member func(id string) (entry.Member, bool)) *Gate {
	return &Gate{configuration: configuration, member: member, refresh: refresh}
}

// Encode encodes cmd in the format every member reads. A command that format
// cannot carry is refused, with the members to upgrade first, unless every
// member's record reads it: then the cached format predates the last
// registration, and Encode waits it out, once (a join's hold is not waited
// out: it lasts until the join ends, and the command is refused meanwhile).
func (g *Gate) Encode(cmd entry.Command) ([]byte, error) {
	data, err := entry.EncodeFormat(cmd, g.Format())
	if errors.Is(err, entry.ErrFormatTooOld) {
		if behind := g.membersBelow(entry.LogFormat); len(behind) > 0 {
			return nil, fmt.Errorf("%w; upgrade these members to this build first: %s", err, strings.Join(behind, ", "))
		}
		data, err = entry.EncodeFormat(cmd, g.fresh())
	}
	return data, err
}

// Format is the format of the next entry this leader proposes.
func (g *Gate) Format() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checked.IsZero() || time.Since(g.checked) >= g.refresh {
		g.format, g.checked = g.clusterFormat(), time.Now()
	}
	f := g.format
	for h := range g.holds {
		f = min(f, *h)
	}
	return f
}

// Hold makes the leader write at most format, the one a member about to
// join says it reads, until release is called (when the join is over and
// the joiner's record and membership are both in the state): a hold that
// lasted only as long as the cache let a join slower than the refresh add
// an older joiner while newer entries went out.
func (g *Gate) Hold(format int) (release func()) {
	h := &format
	g.mu.Lock()
	if g.holds == nil {
		g.holds = map[*int]struct{}{}
	}
	g.holds[h] = struct{}{}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.holds, h)
		g.checked = time.Time{} // read the records as the join left them
		g.mu.Unlock()
	}
}

// Invalidate makes the next Format read the configuration and the records
// again: the node changed one of them, or now leads.
func (g *Gate) Invalidate() {
	g.mu.Lock()
	g.checked = time.Time{}
	g.mu.Unlock()
}

// Members reads the configuration and the records now, uncached: the
// newest format every member has recorded, and the members without a record,
// whose format is unknown (counted as JSON).
func (g *Gate) Members() (format int, unrecorded []string, err error) {
	conf, err := g.configuration()
	if err != nil {
		return entry.LogFormatJSON, nil, err
	}
	format = entry.LogFormat
	for _, s := range conf.Servers {
		m, ok := g.member(string(s.ID))
		if !ok {
			unrecorded = append(unrecorded, string(s.ID))
			m.LogFormat = entry.LogFormatJSON
		}
		format = min(format, m.LogFormat)
	}
	return format, unrecorded, nil
}

// clusterFormat is the newest format that every member in the configuration
// has recorded; a member without a record counts as JSON-only.
func (g *Gate) clusterFormat() int {
	format, _, _ := g.Members()
	return format
}

// fresh is Format once its cached answer has expired (at most the refresh
// from now), for a command the cached format cannot carry although every
// member's record reads it.
func (g *Gate) fresh() int {
	g.mu.Lock()
	wait := g.refresh - time.Since(g.checked)
	g.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	return g.Format()
}

// membersBelow lists the members in the configuration whose recorded log
// format is below format, for an operator who must upgrade them.
func (g *Gate) membersBelow(format int) []string {
	conf, err := g.configuration()
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range conf.Servers {
		if m, ok := g.member(string(s.ID)); !ok || m.LogFormat < format {
			out = append(out, fmt.Sprintf("%s (log format %d)", s.ID, m.LogFormat))
		}
	}
	return out
}
