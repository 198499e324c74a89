package fsm

import (
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/kv"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/permits"
	"github.com/fencer-io/fencer/fsm/internal/requests"
	"github.com/fencer-io/fencer/fsm/internal/revoked"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
)

// state is everything the FSM replicates. It is only touched under FSM.mu.
type state struct {
	clusterID string
	epoch     uint64
	// floor is the oldest epoch whose tokens a fenced write may carry: the
	// epoch a restore or forced recovery moved to (0: none yet). Every
	// grant of an earlier epoch was voided then, whatever the key's mark.
	floor     uint64
	lastToken uint64           // highest token ever granted
	locks     *locktable.Table // the held locks (fsm/internal/locktable)
	// shared are the locks held in shared mode, by their shared grants
	// (shared.go).
	shared  *locktable.Shared
	keys    *kv.Table // the fenced keys (fsm/internal/kv)
	members map[string]entry.Member
	// requests are the tokens granted per request id (by
	// locktable.RequestKey or semRequestKey), bounded (fsm/internal/requests).
	requests *requests.Table
	delays   map[string]entry.Delay
	sems     *permits.Table // the semaphores (fsm/internal/permits)
	// sessions are the live sessions and their grants, and the ids of
	// those that ended lately (fsm/internal/sessions; session.go).
	sessions *sessions.Table
	// multis are the names of each live multi-grant, by its token
	// (multilock.go); each name's grant is in locks.
	multis map[uint64][]string
	// revoked are the tokens of the grants and sessions revoked lately
	// (fsm/internal/revoked; revoke.go).
	revoked *revoked.Set
	// durable are the durable waiters' FIFOs, by kind and name, each in
	// log order, durableCount their number; waited the Enqueue index of
	// each live grant a durable waiter got, by token (durable.go).
	durable      map[waitKey][]*entry.Waiter
	durableCount int
	waited       map[uint64]uint64
	// history is the grant history, nil until SetGrantHistory (history.go).
	history *grants.History
	// restoredAt is the index at which a restore or recovery installed
	// this state (0: none), and voided the grants it dropped there, which
	// every member that installs it reports as events (events.go); voided
	// is forgotten once a later entry is applied.
	restoredAt uint64
	voided     []entry.VoidedGrant
}

func newState() *state {
	return &state{
		locks:    locktable.New(0),
		shared:   locktable.NewShared(),
		keys:     kv.New(),
		members:  map[string]entry.Member{},
		requests: requests.New(),
		delays:   map[string]entry.Delay{},
		sems:     permits.New(),
		sessions: sessions.New(),
		multis:   map[uint64][]string{},
		revoked:  revoked.New(),
		durable:  map[waitKey][]*entry.Waiter{},
		waited:   map[uint64]uint64{},
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
