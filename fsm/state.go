package fsm

import (
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/permits"
)

// MaxRequestIDs bounds the idempotency table of acquire request ids; the
// oldest entries are forgotten first, in log order, so every replica forgets
// the same ones.
const MaxRequestIDs = 1 << 16

// state is everything the FSM replicates. It is only touched under FSM.mu.
type state struct {
	clusterID string
	epoch     uint64
	// floor is the oldest epoch whose tokens a fenced write may carry: the
	// epoch a restore or forced recovery moved to (0: none yet). Every
	// grant of an earlier epoch was voided then, whatever the key's mark.
	floor     uint64
	lastToken uint64                      // highest token ever granted
	locks     *locktable.Table            // the held locks (fsm/internal/locktable)
	keys      map[string]*entry.FencedKey // a *FencedKey is never modified once stored
	members   map[string]entry.Member
	requests  map[string]uint64 // locktable.RequestKey(lock, holder, request id, principal) → token
	// reqOrder is the request table in log order, oldest first. It only
	// grows at the end and is cut at the front, never written in place, so
	// a snapshot keeps the slice as it was without copying it.
	reqOrder []entry.RequestRecord
	// kvBytes and kvByPrincipal are the value bytes stored, in all and per
	// writer; derived from keys, not snapshotted.
	kvBytes       int64
	kvByPrincipal map[string]int64
	delays        map[string]entry.Delay
	sems          *permits.Table // the semaphores (fsm/internal/permits)
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
		locks:         locktable.New(0),
		keys:          map[string]*entry.FencedKey{},
		members:       map[string]entry.Member{},
		requests:      map[string]uint64{},
		kvByPrincipal: map[string]int64{},
		delays:        map[string]entry.Delay{},
		sems:          permits.New(),
	}
}

// setKey stores k, replacing the key of that name, and keeps the byte
// counts.
func (s *state) setKey(k *entry.FencedKey) {
	s.deleteKey(k.Key)
	s.keys[k.Key] = k
	s.charge(k.Principal, int64(len(k.Value)))
}

// deleteKey removes a key, if any, and returns it.
func (s *state) deleteKey(name string) (*entry.FencedKey, bool) {
	old, ok := s.keys[name]
	if ok {
		delete(s.keys, name)
		s.charge(old.Principal, -int64(len(old.Value)))
	}
	return old, ok
}

func (s *state) charge(principal string, n int64) {
	s.kvBytes += n
	if s.kvByPrincipal[principal] += n; s.kvByPrincipal[principal] == 0 {
		delete(s.kvByPrincipal, principal)
	}
}

func (s *state) remember(key string, token uint64) {
	if _, ok := s.requests[key]; ok {
		return
	}
	s.requests[key] = token
	s.reqOrder = append(s.reqOrder, entry.RequestRecord{Key: key, Token: token})
	if len(s.reqOrder) > MaxRequestIDs {
		// Not zeroed: a snapshot may share the slot. The backing array is
		// replaced, with only the live records, when append outgrows it.
		delete(s.requests, s.reqOrder[0].Key)
		s.reqOrder = s.reqOrder[1:]
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
