package nemesis

import (
	"slices"
	"sync"

	"github.com/fencer-io/fencer/test/chaos/history"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// EventLog collects the nemesis's events on the clients' clock.
type EventLog struct {
	mu     sync.Mutex
	events []history.Event
}

// Add records an event of kind, now.
func (e *EventLog) Add(kind history.EventKind, desc string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, history.Event{Kind: kind, Time: workload.Now(), Description: desc})
}

// List returns the events recorded so far.
func (e *EventLog) List() []history.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}
