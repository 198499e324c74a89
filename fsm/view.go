package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// View is a consistent, read-only capture of the state, taken in time
// proportional to the number of locks and keys but without copying them:
// locks and keys are immutable once stored, so the view keeps pointers to
// them, and the request table is append-only, so the view keeps its slice.
// Writing a view streams it record by record, so a snapshot never holds a
// second copy of the state nor its encoding in memory.
type View struct {
	Header snapshot.Header
	locks  []*locktable.Entry // sorted by name (sorted outside the FSM's lock)
	keys   []*entry.FencedKey // sorted by key
	// rest holds the records written between the keys and the grants:
	// members sorted by id, the request table in log order, lock-delays
	// sorted by lock then slot delays, permits sorted by semaphore and
	// token, voided grants.
	rest snapshot.Image
	// The grant history as captured (sorted outside the FSM's lock).
	grants grants.Captured
}

// View captures the state; see View.
func (f *FSM) View() *View {
	f.mu.RLock()
	v := f.viewLocked()
	f.mu.RUnlock()
	locktable.Sort(v.locks)
	v.grants.Sort()
	slices.SortFunc(v.keys, func(a, b *entry.FencedKey) int { return strings.Compare(a.Key, b.Key) })
	return v
}

// viewLocked takes the pointers; View sorts them after releasing the lock.
func (f *FSM) viewLocked() *View {
	s := f.s
	v := &View{Header: snapshot.Header{
		Format:       snapshot.Format,
		Version:      snapshot.Version,
		ClusterID:    s.clusterID,
		Epoch:        s.epoch,
		EpochFloor:   s.floor,
		LastToken:    s.lastToken,
		AppliedIndex: f.applied,
		Term:         f.term,
		Locks:        s.locks.Len(),
		Keys:         s.keys.Len(),
		Members:      len(s.members),
		Requests:     s.requests.Len(),
		Delays:       len(s.delays),
	}}
	v.locks = s.locks.Entries()
	v.keys = s.keys.All()
	v.rest.Members = make([]entry.Member, 0, len(s.members))
	for _, id := range sortedKeys(s.members) {
		v.rest.Members = append(v.rest.Members, s.members[id])
	}
	v.Header.MemberKeys = snapshot.MemberKeys(v.rest.Members)
	v.rest.Requests = s.requests.Records()
	for _, name := range sortedKeys(s.delays) {
		v.rest.Delays = append(v.rest.Delays, s.delays[name])
	}
	v.rest.Delays = append(v.rest.Delays, s.sems.SlotDelays()...)
	v.Header.Delays = len(v.rest.Delays)
	// Copied: permits are few next to locks (a semaphore's limit bounds
	// them), and copying keeps the view simple.
	v.rest.Permits = s.sems.Permits()
	v.Header.Permits = len(v.rest.Permits)
	if h := s.history; h != nil {
		cfg := h.Settings()
		v.Header.GrantHistory, v.Header.GrantsFrom, v.Header.PermitsFrom = &cfg, h.From(), h.PermitsFrom()
		v.grants = h.Capture()
		v.Header.Grants, v.Header.GrantRing = v.grants.Len(), v.grants.RingLen()
		v.Header.SharedGrants = v.grants.Shared()
	}
	for _, e := range s.shared.Entries() {
		v.rest.Shared = append(v.rest.Shared, sharedLock(e))
	}
	v.Header.SharedLocks = len(v.rest.Shared)
	v.rest.Sessions = s.sessions.Records()
	v.rest.EndedSessions = s.sessions.EndedIDs()
	v.Header.Sessions, v.Header.EndedSessions = len(v.rest.Sessions), len(v.rest.EndedSessions)
	v.rest.MultiLocks = s.multiRecords()
	v.Header.MultiLocks = len(v.rest.MultiLocks)
	v.rest.Revoked = s.revoked.Tokens()
	v.Header.Revoked = len(v.rest.Revoked)
	v.rest.DurableWaiters, v.rest.Waited = s.durableWaiters(), s.waitedRecords()
	v.Header.DurableWaiters, v.Header.Waited = len(v.rest.DurableWaiters), len(v.rest.Waited)
	// Never written in place: a restore replaces the slice.
	v.rest.Voided = s.voided
	v.Header.RestoredAt, v.Header.Voided, v.Header.VoidedPermits = s.restoredAt, len(s.voided), voidedPermits(s.voided)
	v.Header = v.Header.Written()
	return v
}

// Image returns a copy of the view's state.
func (v *View) Image() *snapshot.Image {
	img := &snapshot.Image{Header: v.Header}
	if len(v.locks) > 0 {
		img.Locks = make([]entry.Lock, len(v.locks))
		for i, e := range v.locks {
			img.Locks[i] = e.Lock()
		}
	}
	for _, k := range v.keys {
		img.Keys = append(img.Keys, *k)
	}
	if len(v.rest.Members) > 0 {
		img.Members = slices.Clone(v.rest.Members)
	}
	if len(v.rest.Requests) > 0 {
		img.Requests = slices.Clone(v.rest.Requests)
	}
	img.Delays = slices.Clone(v.rest.Delays)
	img.Permits = slices.Clone(v.rest.Permits)
	img.Voided = slices.Clone(v.rest.Voided)
	img.Sessions = slices.Clone(v.rest.Sessions)
	img.EndedSessions = slices.Clone(v.rest.EndedSessions)
	img.MultiLocks = slices.Clone(v.rest.MultiLocks)
	img.Revoked = slices.Clone(v.rest.Revoked)
	img.Shared = slices.Clone(v.rest.Shared)
	img.DurableWaiters = slices.Clone(v.rest.DurableWaiters)
	img.Waited = slices.Clone(v.rest.Waited)
	if v.grants.Len() > 0 {
		img.Grants = v.grants.Records()
	}
	return img
}

// WriteTo writes the view in snapshot format, the same bytes as its Image's
// WriteTo, one record at a time.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	sw := snapshot.NewWriter(w)
	sw.Encode(v.Header.Written())
	var l entry.Lock // one, not one per lock: &l escapes into the writer
	for _, e := range v.locks {
		l = e.Lock()
		sw.Lock(&l)
	}
	for _, k := range v.keys {
		sw.Encode(snapshot.Record{Key: k})
	}
	sw.Middle(&v.rest)
	v.grants.Each(sw.Grant)
	return sw.Close()
}

// readState decodes a snapshot straight into a new state, each lock record
// into its grant with no Image in between (a million locks would be a
// million entry.Locks and five million strings to collect and then copy),
// with the checks snapshot.ReadImage makes.
func readState(r io.Reader) (*state, *snapshot.Header, error) {
	rest := &snapshot.Image{} // everything but the locks
	var s *state
	locks := 0
	// The locks held under a session, attached to it once the sessions
	// (which follow the locks) are read.
	var underSession []*locktable.Entry
	err := snapshot.Decode(r, rest, func(l *snapshot.LockRecord) error {
		if s == nil {
			s = headerState(&rest.Header)
		}
		locks++
		e := locktable.EntryOf(l)
		if err := rest.Header.CheckLock(e.Name(), e.Token(), e.TTLMillis()); err != nil {
			return err
		}
		if _, dup := s.locks.Get(e.Name()); dup {
			return fmt.Errorf("snapshot is inconsistent: duplicate lock %q", e.Name())
		}
		s.locks.Add(e)
		if e.Session() != 0 {
			underSession = append(underSession, e)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := rest.CheckCounts(locks); err != nil {
		return nil, nil, err
	}
	if err := rest.Check(); err != nil {
		return nil, nil, err
	}
	if s == nil {
		s = headerState(&rest.Header)
	}
	err = rest.CheckHeldGrants(func(lock string) uint64 {
		if e, ok := s.locks.Get(lock); ok {
			return e.Token()
		}
		return 0
	})
	if err != nil {
		return nil, nil, err
	}
	if err := checkRevokedLocks(s, rest.Revoked, rest.MultiLocks); err != nil {
		return nil, nil, err
	}
	for _, l := range rest.Shared {
		if _, dup := s.locks.Get(l.Name); dup {
			return nil, nil, fmt.Errorf("snapshot is inconsistent: lock %q is held both exclusively and in shared mode", l.Name)
		}
	}
	fill(s, rest)
	if err := s.restoreMultis(rest.MultiLocks); err != nil {
		return nil, nil, err
	}
	if err := s.checkWaited(); err != nil {
		return nil, nil, err
	}
	for _, e := range underSession {
		if s.sessions.Get(e.Session()) == nil {
			return nil, nil, fmt.Errorf("snapshot is inconsistent: lock %q held under session %d, which is not live", e.Name(), e.Session())
		}
		s.sessions.Attach(e.Session(), sessions.Grant{Kind: sessions.Lock, Name: e.Name(), Token: e.Token()})
	}
	return s, &rest.Header, nil
}

// maxLocksHint bounds the lock table sized from a header's count, so that a
// header that lies costs little before the count check refuses it.
const maxLocksHint = 1 << 21

// headerState is a state with the header's fields and nothing else, its
// lock table sized for the header's count.
func headerState(h *snapshot.Header) *state {
	s := newState()
	s.clusterID = h.ClusterID
	s.epoch = h.Epoch
	s.floor = h.EpochFloor
	s.lastToken = h.LastToken
	if h.Locks > 0 {
		s.locks = locktable.New(min(h.Locks, maxLocksHint))
	}
	return s
}

// fill adds everything but the locks of img to s.
func fill(s *state, img *snapshot.Image) {
	for i := range img.Keys {
		k := img.Keys[i]
		s.keys.Set(&k)
	}
	for _, m := range img.Members {
		s.members[m.ID] = m
	}
	for _, r := range img.Requests {
		s.requests.Remember(s.shareKey(r.Key), r.Token)
	}
	for _, d := range img.Delays {
		if d.Semaphore != "" {
			s.sems.AddSlotDelay(d)
			continue
		}
		s.delays[d.Lock] = d
	}
	for _, rec := range img.Sessions {
		s.sessions.Open(rec)
	}
	s.sessions.RestoreEnded(img.EndedSessions)
	for _, t := range img.Revoked {
		s.revoked.Add(t)
	}
	for i := range img.Permits {
		p := img.Permits[i]
		s.sems.Add(&p)
		if p.Session != 0 {
			s.sessions.Attach(p.Session, sessions.Grant{Kind: sessions.Permit, Name: p.Semaphore, Token: p.Token})
		}
	}
	for i := range img.Shared {
		e := locktable.NewEntry(&img.Shared[i])
		s.shared.Add(e)
		if e.Session() != 0 {
			s.sessions.Attach(e.Session(), sessions.Grant{Kind: sessions.Lock, Name: e.Name(), Token: e.Token()})
		}
	}
	for _, l := range img.Locks { // an Image's (ReadImage); readState streams them
		if l.Session != 0 {
			s.sessions.Attach(l.Session, sessions.Grant{Kind: sessions.Lock, Name: l.Name, Token: l.Token})
		}
	}
	if cfg, ok := img.Header.Settings(); ok {
		s.history = grants.Rebuild(cfg, img.Header.GrantsFrom, img.Grants, img.Header.GrantRing, s.heldGrant)
		if cfg.Permits {
			s.history.RecordsPermits(img.Header.PermitsFrom)
		}
	}
	for i := range img.DurableWaiters {
		w := img.DurableWaiters[i]
		if w.Acquire != nil {
			w.Acquire.Principal = w.Principal
		}
		key := waitKey{waiterKind(&w), w.Name()}
		s.durable[key] = append(s.durable[key], &w)
		s.durableCount++
	}
	for _, g := range img.Waited {
		s.waited[g.Token] = g.WaitIndex
	}
	s.restoredAt = img.Header.RestoredAt
	s.voided = slices.Clone(img.Voided)
}

// heldGrant returns the name and holder of lock's held grant if its token
// is token, for a restored grant history to share.
func (s *state) heldGrant(lock string, token uint64) (name, holder string, ok bool) {
	if e, ok := s.locks.Get(lock); ok && e.Token() == token {
		return e.Name(), e.Holder(), true
	}
	return "", "", false
}

// shareKey returns key, or the same string inside the held lock it belongs
// to, so a restored request table costs no string per held lock.
func (s *state) shareKey(key string) string {
	if i := strings.IndexByte(key, 0); i >= 0 {
		if e, ok := s.locks.Get(key[:i]); ok && e.RequestKey() == key {
			return e.RequestKey()
		}
	}
	return key
}

// Image returns a copy of the whole state.
func (f *FSM) Image() *snapshot.Image { return f.View().Image() }

// Digest is a hash of the replicated state, equal on replicas that applied
// the same log. The applied index is left out: replicas compare state, not
// progress.
func (f *FSM) Digest() string {
	_, d := f.DigestAt()
	return d
}

// DigestAt returns the applied index and the digest of the same state.
func (f *FSM) DigestAt() (uint64, string) {
	v := f.View()
	applied := v.Header.AppliedIndex
	v.Header.AppliedIndex, v.Header.Term = 0, 0
	h := sha256.New()
	if _, err := v.WriteTo(h); err != nil {
		panic(err) // hashing never fails
	}
	return applied, hex.EncodeToString(h.Sum(nil))
}

type raftSnapshot struct{ v *View }

// Persist writes the snapshot; on any error the sink is cancelled so raft
// never keeps half a snapshot.
func (s *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.v.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *raftSnapshot) Release() {}

// voidedPermits counts the permits among a restore's voided grants.
func voidedPermits(voided []entry.VoidedGrant) int {
	n := 0
	for _, v := range voided {
		if v.Semaphore != "" {
			n++
		}
	}
	return n
}
