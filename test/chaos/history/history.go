// Package history is the record of a chaos run that the checker judges:
// client operations with their call and return times, nemesis events, final
// reads, the resource's log of accepted writes, election observations,
// the watcher's stream and the members' state digests, with its JSON file.
package history

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// OpKind names what a client asked for.
type OpKind string

// The operations a chaos client performs. Acquire, Renew, Release and Read
// act on a lock; Put and Get act on a fenced key; SemAcquire, SemRenew and
// SemRelease on a semaphore's permits; Campaign, Proclaim and Resign on an
// election (a lock whose holder publishes a value).
const (
	Acquire OpKind = "acquire"
	Renew   OpKind = "renew"
	Release OpKind = "release"
	Read    OpKind = "read"
	Put     OpKind = "put"
	Get     OpKind = "get"

	SemAcquire OpKind = "sem_acquire"
	SemRenew   OpKind = "sem_renew"
	SemRelease OpKind = "sem_release"

	Campaign OpKind = "campaign"
	Proclaim OpKind = "proclaim"
	Resign   OpKind = "resign"

	// Sessions: one lease for many grants. An acquire or sem_acquire with
	// Op.Session set was made under that session; a session's ops carry
	// its id in Op.Session.
	SessionCreate OpKind = "session_create"
	SessionRenew  OpKind = "session_renew"
	SessionClose  OpKind = "session_close"

	// Multi-locks: several lock names in one grant (Op.Names; Target is
	// the names joined by commas).
	MultiAcquire OpKind = "multi_acquire"
	MultiRenew   OpKind = "multi_renew"
	MultiRelease OpKind = "multi_release"
	// Revoke is an operator's revoke of a lock's grant (Target the lock,
	// Token the grant's): issue 28's revoke.
	Revoke OpKind = "revoke"
	// RWAcquire and RWRelease act on a lock taken in a mode (Op.Mode:
	// shared or exclusive, issue 28): kept apart from Acquire and Release,
	// whose lock model allows one holder.
	RWAcquire OpKind = "rw_acquire"
	RWRelease OpKind = "rw_release"
)

// OnLock reports whether k acts on a lock rather than a fenced key.
func (k OpKind) OnLock() bool {
	return k == Acquire || k == Renew || k == Release || k == Read || k == Revoke
}

// Outcome is what the client was told.
type Outcome string

// Outcomes. Unknown and OtherError are indeterminate: the operation may or
// may not have taken effect. They differ in when: an Unknown operation (a
// timeout, a dropped connection) may take effect at any later time, even after
// the client gave up, while an OtherError was answered by the service, so if
// it took effect at all it did so before the answer.
//
// Each definite refusal the models reason about has an outcome of its own,
// named after its code: StaleToken alone says that a put's stamp is not
// admitted by the key's mark. Refused is every other definite refusal of a
// put: it did not take effect, and its code (Op.Code) says why, which the
// models read nothing into (unissued_token, missing_token, kv_full, ...).
const (
	OK            Outcome = "ok"
	LockHeld      Outcome = "lock_held"
	LeaseLost     Outcome = "lease_lost"
	StaleToken    Outcome = "stale_token"
	NotLockHolder Outcome = "not_lock_holder"
	SemaphoreFull Outcome = "semaphore_full"
	// LockDelay: the only free permits were in a lock-delay.
	LockDelay Outcome = "lock_delay"
	// SessionExpired: the session had ended (expired or closed), and
	// every grant under it with it.
	SessionExpired Outcome = "session_expired"
	// Revoked: an operator revoked the grant (a renew or release of it, a
	// second revoke).
	Revoked    Outcome = "revoked"
	Refused    Outcome = "refused"
	Unknown    Outcome = "unknown"
	OtherError Outcome = "error"
)

// outcomeCodes maps each outcome named after a code to that code: an op with
// one of these outcomes that records a code must record this one.
var outcomeCodes = map[Outcome]string{
	LockHeld:      wire.CodeLockHeld,
	LeaseLost:     wire.CodeLeaseLost,
	StaleToken:    wire.CodeStaleToken,
	NotLockHolder: wire.CodeNotLockHolder,
	SemaphoreFull: wire.CodeSemaphoreFull,
	LockDelay:     wire.CodeLockDelay,

	SessionExpired: wire.CodeSessionExpired,
	Revoked:        wire.CodeRevoked,
}

// Indeterminate reports whether o leaves open whether the operation happened.
func (o Outcome) Indeterminate() bool { return o == Unknown || o == OtherError }

// outcomesByKind lists the outcomes each kind can have. Anything else is a
// malformed history: guessing what an unexpected outcome means would let a
// typo pass as an indeterminate result.
var outcomesByKind = map[OpKind][]Outcome{
	Acquire: {OK, LockHeld, SessionExpired, Unknown, OtherError},
	Renew:   {OK, LeaseLost, Revoked, Unknown, OtherError},
	Release: {OK, LeaseLost, Revoked, Unknown, OtherError},
	Read:    {OK, Unknown, OtherError},
	Put:     {OK, StaleToken, NotLockHolder, Refused, Unknown, OtherError},
	Get:     {OK, Unknown, OtherError},

	SemAcquire: {OK, SemaphoreFull, LockDelay, SessionExpired, Unknown, OtherError},
	SemRenew:   {OK, LeaseLost, Unknown, OtherError},
	SemRelease: {OK, LeaseLost, Unknown, OtherError},

	Campaign: {OK, Unknown, OtherError},
	Proclaim: {OK, LeaseLost, Unknown, OtherError},
	Resign:   {OK, LeaseLost, Unknown, OtherError},

	SessionCreate: {OK, Unknown, OtherError},
	SessionRenew:  {OK, SessionExpired, Unknown, OtherError},
	SessionClose:  {OK, SessionExpired, Unknown, OtherError},

	MultiAcquire: {OK, LockHeld, LockDelay, Unknown, OtherError},
	MultiRenew:   {OK, LeaseLost, Unknown, OtherError},
	MultiRelease: {OK, LeaseLost, Unknown, OtherError},
	Revoke:       {OK, LeaseLost, Revoked, Unknown, OtherError},
	RWAcquire:    {OK, LockHeld, Unknown, OtherError},
	RWRelease:    {OK, LeaseLost, Unknown, OtherError},
}

// Op is one client operation: what was asked, what came back, and when.
//
// Call and Return are nanoseconds on one monotonic clock shared by every
// client of the run (any origin will do). The meaning of Token depends on the
// kind and outcome: the granted token for acquire ok, the current holder's
// token for acquire lock_held, the token presented for renew, release and put,
// and the token observed for read and get. Semaphore and election ops read
// like their lock counterparts: the granted token for sem_acquire and
// campaign ok, the token presented for the others.
type Op struct {
	Kind   OpKind `json:"kind"`
	Target string `json:"target"` // lock name, or key for put and get; a session op's holder
	Client int    `json:"client"` // zero-based client index
	Holder string `json:"holder,omitempty"`
	// HeldBy is the holder an acquire lock_held reported, if the service
	// said; empty means not reported.
	HeldBy string `json:"held_by,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	// Seq numbers the writes made under one token; 0 means none. See Stamp.
	Seq   uint64 `json:"seq,omitempty"`
	Lease string `json:"lease,omitempty"`
	Value string `json:"value,omitempty"`
	Held  bool   `json:"held,omitempty"`  // read ok: the lock is held
	Found bool   `json:"found,omitempty"` // get ok: the key has a value
	// Limit is the semaphore's limit a sem_acquire asked for, and TTL the
	// lease it asked for, in milliseconds (sem_acquire and campaign).
	Limit int   `json:"limit,omitempty"`
	TTL   int64 `json:"ttl_ms,omitempty"`
	// Session is the session an op acts on (session_create ok: the id it
	// was given), or the session an acquire or sem_acquire asked to hold
	// its grant under; 0: none. A session's grants have no TTL of their
	// own: a sem_acquire under one records the session's.
	Session uint64 `json:"session,omitempty"`
	// Lock is the lock a put was bound to (Fencing-Lock): such a write is
	// accepted only while its token is the lock's current grant.
	Lock string `json:"lock,omitempty"`
	// Released lists the tokens a session_close ok reported it ended.
	Released []uint64 `json:"released,omitempty"`
	// Names are a multi-lock's names, in the order asked; on a
	// multi_acquire lock_held, Lock is the held name the service named.
	Names []string `json:"names,omitempty"`
	// Mode is the mode an rw_acquire asked for: shared or exclusive.
	Mode string `json:"mode,omitempty"`
	// Durable: an rw_acquire that asked for a durable wait; WaitIndex is
	// the log index of its Enqueue that its grant reported (0: granted
	// without queueing durably).
	Durable   bool   `json:"durable,omitempty"`
	WaitIndex uint64 `json:"wait_index,omitempty"`

	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome Outcome `json:"outcome"`
	// Code is the "code" of the error body the service answered with
	// (wire.Code*), whatever the outcome: a refusal's reason, or the last
	// answer of an indeterminate op (no_leader, outcome_unknown). Empty
	// when there was no such answer.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"` // message for unknown and error outcomes
}

// String renders op in one line for reports and visualizations.
func (op Op) String() string {
	var in string
	switch op.Kind {
	case Acquire:
		in = fmt.Sprintf("acquire(%s, %s%s)", op.Target, op.Holder, op.underSession())
	case Renew, Release:
		in = fmt.Sprintf("%s(%s, t%d)", op.Kind, op.Target, op.Token)
	case Read:
		in = fmt.Sprintf("read(%s)", op.Target)
	case Put:
		in = fmt.Sprintf("put(%s, %q, %s)", op.Target, op.Value, op.Stamp())
		if op.Lock != "" {
			in = fmt.Sprintf("put(%s, %q, %s, lock %s)", op.Target, op.Value, op.Stamp(), op.Lock)
		}
	case Get:
		in = fmt.Sprintf("get(%s)", op.Target)
	case SemAcquire:
		in = fmt.Sprintf("sem_acquire(%s, %s, limit %d, ttl %dms%s)", op.Target, op.Holder, op.Limit, op.TTL, op.underSession())
	case SemRenew, SemRelease, Resign:
		in = fmt.Sprintf("%s(%s, t%d)", op.Kind, op.Target, op.Token)
	case Campaign:
		in = fmt.Sprintf("campaign(%s, %s, %q)", op.Target, op.Holder, op.Value)
	case Proclaim:
		in = fmt.Sprintf("proclaim(%s, t%d, %q)", op.Target, op.Token, op.Value)
	case SessionCreate:
		in = fmt.Sprintf("session_create(%s, ttl %dms)", op.Holder, op.TTL)
	case SessionRenew, SessionClose:
		in = fmt.Sprintf("%s(s%d)", op.Kind, op.Session)
	case RWAcquire:
		in = fmt.Sprintf("rw_acquire(%s, %s, %s, ttl %dms)", op.Target, op.Holder, op.Mode, op.TTL)
		if op.Durable {
			in = fmt.Sprintf("rw_acquire(%s, %s, %s, ttl %dms, durable)", op.Target, op.Holder, op.Mode, op.TTL)
		}
	case RWRelease:
		in = fmt.Sprintf("rw_release(%s, t%d)", op.Target, op.Token)
	default:
		in = fmt.Sprintf("%s(%s)", op.Kind, op.Target)
	}
	var out string
	switch {
	case op.Kind == RWAcquire && op.Outcome == OK && op.WaitIndex != 0:
		out = fmt.Sprintf("ok t%d queued at %d", op.Token, op.WaitIndex)
	case (op.Kind == Acquire || op.Kind == SemAcquire || op.Kind == Campaign || op.Kind == RWAcquire) && op.Outcome == OK:
		out = fmt.Sprintf("ok t%d", op.Token)
	case op.Kind == SessionCreate && op.Outcome == OK:
		out = fmt.Sprintf("ok s%d", op.Session)
	case op.Kind == SessionClose && op.Outcome == OK:
		out = fmt.Sprintf("ok released %v", op.Released)
	case op.Kind == Acquire && op.Outcome == LockHeld:
		out = fmt.Sprintf("lock_held by %s t%d", orDash(op.HeldBy), op.Token)
	case op.Kind == Read && op.Outcome == OK && op.Held:
		out = fmt.Sprintf("held t%d", op.Token)
	case op.Kind == Read && op.Outcome == OK:
		out = "free"
	case op.Kind == Get && op.Outcome == OK && op.Found:
		out = fmt.Sprintf("%q %s", op.Value, op.Stamp())
	case op.Kind == Get && op.Outcome == OK:
		out = "not found"
	case op.Outcome == Refused:
		out = fmt.Sprintf("refused %s", op.Code)
	case op.Outcome.Indeterminate() && op.Error != "":
		out = fmt.Sprintf("%s (%s)", op.Outcome, op.Error)
	default:
		out = string(op.Outcome)
	}
	return fmt.Sprintf("c%d %s -> %s [%d, %d]", op.Client, in, out, op.Call, op.Return)
}

// underSession renders the session an acquire asked to hold its grant
// under, if any.
func (op Op) underSession() string {
	if op.Session == 0 {
		return ""
	}
	return fmt.Sprintf(", session s%d", op.Session)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (op Op) Stamp() Stamp { return Stamp{Token: op.Token, Seq: op.Seq} }

// Stamp is what a fenced write carries: a token and, optionally, a sequence
// numbering the writes made under that token (0 means none).
type Stamp struct {
	Token uint64 `json:"token"`
	Seq   uint64 `json:"seq,omitempty"`
}

// Admits reports whether a fence whose last accepted write is s would accept
// a write stamped w: a greater token, or the same token with a greater,
// non-zero sequence. Without sequences this is plain w.Token > s.Token, so an
// equal token is a replay and refused.
func (s Stamp) Admits(w Stamp) bool {
	switch {
	case w.Token > s.Token:
		return true
	case w.Token == s.Token:
		return w.Seq != 0 && w.Seq > s.Seq
	}
	return false
}

func (s Stamp) String() string {
	if s.Seq == 0 {
		return fmt.Sprintf("t%d", s.Token)
	}
	return fmt.Sprintf("t%d/s%d", s.Token, s.Seq)
}

// EventKind names something the nemesis or the harness did.
type EventKind string

// Epoch events are those after which the service must keep issuing tokens
// above every token it had acknowledged: the state that backs the token
// sequence was rebuilt. Any other kind (partition, heal, pause, ...) is
// recorded for the reader and annotates the visualization.
const (
	EventRestart EventKind = "restart" // a member or the whole cluster restarted
	EventRestore EventKind = "restore" // state restored from a snapshot or backup
	EventReplace EventKind = "replace" // a member was removed and a new one joined
)

// IsEpoch reports whether k rebuilds token-bearing state.
func (k EventKind) IsEpoch() bool {
	return k == EventRestart || k == EventRestore || k == EventReplace
}

// Event is a fault or harness action at a point in time, on the clock of
// Op.Call and Op.Return.
type Event struct {
	Kind        EventKind `json:"kind"`
	Time        int64     `json:"time"`
	Description string    `json:"description,omitempty"`
}

// FinalRead is the read of a key made after the cluster healed and the
// workload stopped.
type FinalRead struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	Value string `json:"value,omitempty"`
	Token uint64 `json:"token,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
}

func (r FinalRead) Stamp() Stamp { return Stamp{Token: r.Token, Seq: r.Seq} }

// History is everything a chaos run recorded.
type History struct {
	Ops    []Op    `json:"ops"`
	Events []Event `json:"events,omitempty"`
	// FinalReads holds one read per key; nil means they were not taken and
	// the lost-write check is skipped.
	FinalReads []FinalRead `json:"final_reads"`
	// Accepted is, per key, every write the external resource accepted, in
	// the order it accepted them, as the resource itself reports.
	Accepted map[string][]Stamp `json:"accepted,omitempty"`
	// MemberHashes maps each member to a hash of its state machine taken
	// after the run, once every member had applied the same log.
	MemberHashes map[string]string `json:"member_hashes,omitempty"`
	// Observations are what the election observers saw, each observer's
	// in the order it saw them.
	Observations []Observation `json:"observations,omitempty"`
	// Watch is what a watcher of the event stream saw through the run
	// (nil: none watched).
	Watch *Watch `json:"watch,omitempty"`
}

// Observation is one leadership an election observer was told of: who
// leads, in which term (token), publishing which value. An observer
// watches in sessions: when its stream ends (a node died, a link was cut)
// it starts another, which first reports the leader as it is then.
type Observation struct {
	Observer int    `json:"observer"`
	Session  int    `json:"session"`
	Election string `json:"election"`
	Holder   string `json:"holder"`
	Token    uint64 `json:"token"`
	Value    string `json:"value"`
	Time     int64  `json:"time"`
}

func (o Observation) String() string {
	return fmt.Sprintf("observer %d session %d saw %s led by %s in t%d with %q at %d",
		o.Observer, o.Session, o.Election, o.Holder, o.Token, o.Value, o.Time)
}

// Validate reports every op that cannot be checked: an unknown kind, an
// outcome the kind cannot have, a missing target, or a return before its call.
func (h History) Validate() error {
	var problems []string
	for i, op := range h.Ops {
		allowed, ok := outcomesByKind[op.Kind]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("op %d: unknown kind %q", i, op.Kind))
			continue
		case op.Target == "":
			problems = append(problems, fmt.Sprintf("op %d: no target", i))
		case op.Return < op.Call:
			problems = append(problems, fmt.Sprintf("op %d: returns at %d before its call at %d", i, op.Return, op.Call))
		case op.Client < 0:
			problems = append(problems, fmt.Sprintf("op %d: negative client %d", i, op.Client))
		case op.Kind == SemAcquire && (op.Limit < 1 || op.TTL < 1):
			problems = append(problems, fmt.Sprintf("op %d: sem_acquire without a limit and a TTL", i))
		case op.Kind == RWAcquire && (op.TTL < 1 || (op.Mode != "shared" && op.Mode != "exclusive")):
			problems = append(problems, fmt.Sprintf("op %d: rw_acquire without a TTL or a mode", i))
		case op.Kind == SessionCreate && op.TTL < 1:
			problems = append(problems, fmt.Sprintf("op %d: session_create without a TTL", i))
		case op.Kind == SessionCreate && op.Outcome == OK && op.Session == 0:
			problems = append(problems, fmt.Sprintf("op %d: session_create ok without the session's id", i))
		case (op.Kind == SessionRenew || op.Kind == SessionClose) && op.Session == 0:
			problems = append(problems, fmt.Sprintf("op %d: %s without a session", i, op.Kind))
		}
		if !slices.Contains(allowed, op.Outcome) {
			problems = append(problems, fmt.Sprintf("op %d: %s cannot have outcome %q", i, op.Kind, op.Outcome))
		}
		if p := op.codeProblem(allowed); p != "" {
			problems = append(problems, fmt.Sprintf("op %d: %s", i, p))
		}
	}
	for i, o := range h.Observations {
		if o.Election == "" || o.Token == 0 {
			problems = append(problems, fmt.Sprintf("observation %d: no election or no token", i))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("malformed history: %s", strings.Join(problems, "; "))
	}
	return nil
}

// codeProblem says what is wrong with op's code for its outcome, if
// anything. A refusal that has an outcome of its own must be recorded as
// that outcome, so that a model cannot miss it as a mere Refused; an ok has
// no error code; a Refused says which refusal it was. A definite outcome
// without a code is allowed: histories from before codes were recorded
// have none.
func (op Op) codeProblem(allowed []Outcome) string {
	switch {
	case op.Outcome == OK && op.Code != "":
		return fmt.Sprintf("%s ok with error code %q", op.Kind, op.Code)
	case op.Outcome == Refused && op.Code == "":
		return fmt.Sprintf("%s refused without a code", op.Kind)
	}
	if want, ok := outcomeCodes[op.Outcome]; ok && op.Code != "" && op.Code != want {
		return fmt.Sprintf("%s %s with code %q", op.Kind, op.Outcome, op.Code)
	}
	if !op.Outcome.Indeterminate() {
		for o, code := range outcomeCodes {
			if op.Code == code && o != op.Outcome && slices.Contains(allowed, o) {
				return fmt.Sprintf("%s %s with code %q, which is outcome %s", op.Kind, op.Outcome, op.Code, o)
			}
		}
	}
	return ""
}

// WriteFile writes h as indented JSON to path.
func (h History) WriteFile(path string) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadHistory reads a history written by History.WriteFile, so that a failed
// run's artifact can be checked again.
func ReadHistory(path string) (History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return History{}, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return History{}, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, nil
}
