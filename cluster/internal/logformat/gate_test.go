package logformat

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
)

// cluster is a fake configuration with the members' records.
type cluster struct {
	mu      sync.Mutex
	servers []raft.Server
	records map[string]entry.Member
}

func (c *cluster) configuration() (raft.Configuration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return raft.Configuration{Servers: append([]raft.Server(nil), c.servers...)}, nil
}

func (c *cluster) member(id string) (entry.Member, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.records[id]
	return m, ok
}

func (c *cluster) set(id string, format int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records[id] = entry.Member{ID: id, LogFormat: format}
}

func newCluster(formats map[string]int) *cluster {
	c := &cluster{records: map[string]entry.Member{}}
	for _, id := range []string{"n1", "n2", "n3"} {
		c.servers = append(c.servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
		if f, ok := formats[id]; ok {
			c.records[id] = entry.Member{ID: id, LogFormat: f}
		}
	}
	return c
}

func newGate(c *cluster) *Gate {
	g := New(c.configuration, c.member)
	g.refresh = 50 * time.Millisecond
	return g
}

// The leader writes the newest format every member has recorded; a member
// without a record reads JSON only.
func TestFormatIsTheOldestMembers(t *testing.T) {
	all := map[string]int{"n1": entry.LogFormat, "n2": entry.LogFormat, "n3": entry.LogFormat}
	if f := newGate(newCluster(all)).Format(); f != entry.LogFormat {
		t.Fatalf("every member at %d: %d", entry.LogFormat, f)
	}
	behind := map[string]int{"n1": entry.LogFormat, "n2": entry.LogFormatPrincipal, "n3": entry.LogFormat}
	if f := newGate(newCluster(behind)).Format(); f != entry.LogFormatPrincipal {
		t.Fatalf("n2 at %d: %d", entry.LogFormatPrincipal, f)
	}
	unrecorded := map[string]int{"n1": entry.LogFormat, "n2": entry.LogFormat}
	if f := newGate(newCluster(unrecorded)).Format(); f != entry.LogFormatJSON {
		t.Fatalf("n3 unrecorded: %d, want JSON", f)
	}
}

// A command the members cannot read is refused, naming the members to
// upgrade, and nothing is encoded; a command they read is encoded.
func TestEncodeRefusesWhatAMemberCannotRead(t *testing.T) {
	g := newGate(newCluster(map[string]int{"n1": entry.LogFormat, "n2": entry.LogFormatPrincipal, "n3": entry.LogFormat}))
	data, err := g.Encode(&entry.SetGrantHistory{})
	if !errors.Is(err, entry.ErrFormatTooOld) || !strings.Contains(err.Error(), "n2 (log format 2)") || strings.Contains(err.Error(), "n1") || data != nil {
		t.Fatalf("Encode needing format %d with n2 at %d: %q, %v", entry.LogFormatHistory, entry.LogFormatPrincipal, data, err)
	}
	if _, err := g.Encode(&entry.DeleteKey{Key: "k"}); err != nil {
		t.Fatalf("Encode of a format-%d command: %v", entry.LogFormatPrincipal, err)
	}
}

// A join holds the format at what the joiner reads until the records are
// read again; a command the hold cannot carry, though every record reads it,
// waits the hold out rather than failing.
func TestHoldLowersTheFormatUntilTheJoinEnds(t *testing.T) {
	c := newCluster(map[string]int{"n1": entry.LogFormat, "n2": entry.LogFormat, "n3": entry.LogFormat})
	g := newGate(c)
	release := g.Hold(entry.LogFormatJSON)
	if f := g.Format(); f != entry.LogFormatJSON {
		t.Fatalf("held at JSON: %d", f)
	}
	// Past the refresh the records are read again, and the hold still
	// stands (a review found a replace slower than the refresh adding an
	// older joiner while newer entries went out). Fails with the hold kept
	// in the cache alone.
	time.Sleep(2 * g.refresh) // let the cache expire; not a wait for a state
	if f := g.Format(); f != entry.LogFormatJSON {
		t.Fatalf("held at JSON past the refresh: %d", f)
	}
	if _, err := g.Encode(&entry.SetGrantHistory{}); !errors.Is(err, entry.ErrFormatTooOld) {
		t.Fatalf("Encode of a newer command while a JSON joiner joins: %v", err)
	}
	release()
	if f := g.Format(); f != entry.LogFormat {
		t.Fatalf("after the hold: %d, want %d", f, entry.LogFormat)
	}

	// A hold never raises the format above what the records say.
	c.set("n3", entry.LogFormatBinary)
	defer g.Hold(entry.LogFormat)()
	g.Invalidate()
	if f := g.Format(); f != entry.LogFormatBinary {
		t.Fatalf("hold above the records: %d, want %d", f, entry.LogFormatBinary)
	}
}
