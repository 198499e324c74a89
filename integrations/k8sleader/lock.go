package k8sleader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// Errors a caller can test with errors.Is; Code names each for machines.
// A refusal by fencer keeps the client's error (client.ErrLockHeld,
// client.ErrLockDelay, client.ErrLeaseLost) wrapped inside.
var (
	// ErrInvalidConfig: New was given a Config it cannot use.
	ErrInvalidConfig = errors.New("k8sleader: invalid config")
	// ErrNotIdentity: a record to write names a holder other than the
	// lock's identity; an elector writes only its own.
	ErrNotIdentity = errors.New("k8sleader: record names another holder")
	// ErrNotGranted: fencer did not grant the election to this elector.
	ErrNotGranted = errors.New("k8sleader: election not granted")
	// ErrTermEnded: the grant of the term being renewed is lost (expired,
	// or fencer refused its renewal); only a new campaign, under a new
	// term, can lead again.
	ErrTermEnded = errors.New("k8sleader: term ended")
)

// Code returns a stable machine-readable code for an error from this
// package: invalid_config, not_identity, not_granted or term_ended, and ""
// for any other.
func Code(err error) string {
	switch {
	case errors.Is(err, ErrInvalidConfig):
		return "invalid_config"
	case errors.Is(err, ErrNotIdentity):
		return "not_identity"
	case errors.Is(err, ErrNotGranted):
		return "not_granted"
	case errors.Is(err, ErrTermEnded):
		return "term_ended"
	}
	return ""
}

// Config describes a Lock.
type Config struct {
	// Client reaches the fencer cluster.
	Client *client.Client
	// Election is the fencer election (lock) name: wire.NameRule.
	Election string
	// Identity names this elector, unique among those of the election
	// (a pod's name, say); it is the grant's holder.
	Identity string
	// TTL is the grant's time to live. Zero takes the elector's
	// LeaseDuration from the records it writes (whole seconds); otherwise
	// set it to that LeaseDuration.
	TTL time.Duration
	// LockDelay, if set, keeps the election from being granted for that
	// long after a grant expires (not after a resignation): a leader that
	// lost its lease without noticing has that long to stop before the
	// next one starts. At most wire.MaxLockDelay.
	LockDelay time.Duration
	// OnEvent, if set, receives the elector's events ("became leader",
	// "stopped leading"); there is no Kubernetes object to record them on.
	OnEvent func(event string)
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: no client", ErrInvalidConfig)
	case !wire.ValidName(c.Election):
		return fmt.Errorf("%w: election %q: want %s", ErrInvalidConfig, c.Election, wire.NameRule)
	case c.Identity == "" || len(c.Identity) > 200:
		return fmt.Errorf("%w: identity %q: want 1-200 bytes", ErrInvalidConfig, c.Identity)
	case c.TTL != 0 && (c.TTL < wire.MinTTL || c.TTL > wire.MaxTTL):
		return fmt.Errorf("%w: ttl %v: want 0 (the elector's lease duration) or %v to %v", ErrInvalidConfig, c.TTL, wire.MinTTL, wire.MaxTTL)
	case c.LockDelay < 0 || c.LockDelay > wire.MaxLockDelay:
		return fmt.Errorf("%w: lock delay %v: want 0 to %v", ErrInvalidConfig, c.LockDelay, wire.MaxLockDelay)
	}
	return nil
}

// Lock is a resourcelock.Interface on a fencer election. Its methods are
// safe for concurrent use: the elector calls Get, Create and Update while
// the controller reads Term and Context.
type Lock struct {
	cfg Config

	mu sync.Mutex
	// grant is this elector's current or last grant, nil before its first
	// and after a resignation. A lost grant is kept, so that renewals of
	// its term keep failing.
	grant *client.Lease
	// acquired is the AcquireTime of the campaign grant belongs to.
	acquired metav1.Time
}

var _ resourcelock.Interface = (*Lock)(nil)

// New returns a Lock for cfg.
func New(cfg Config) (*Lock, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Lock{cfg: cfg}, nil
}

// campaignValue is the election value a grant publishes: the record fields
// that only the elector knows, so that every elector's Get builds the same
// record.
type campaignValue struct {
	AcquireTime       metav1.Time `json:"acquireTime"`
	LeaderTransitions int         `json:"leaderTransitions"`
}

// Get returns the election's record as fencer has it. A free election is a
// record with no holder.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	st, err := l.cfg.Client.ElectionLeader(ctx, l.cfg.Election)
	if err != nil {
		return nil, nil, err
	}
	rec := record(st, time.Now())
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	return &rec, raw, nil
}

// record builds the elector's record from the election's status read at
// now. The elector compares the raw record between reads to see renewals,
// so the renew time must move when, and only when, the grant is renewed:
// it is now less the lease's elapsed time, which the leader reports
// (remaining_ms); metav1.Time keeps whole seconds, which hides the read's
// own latency.
func record(st wire.LockStatus, now time.Time) resourcelock.LeaderElectionRecord {
	if !st.Held {
		return resourcelock.LeaderElectionRecord{}
	}
	ttl := time.Duration(st.TTLMillis) * time.Millisecond
	// A value that is not a campaign's (the election taken by another kind
	// of client) gives no acquire time: the record still names the holder.
	var v campaignValue
	_ = json.Unmarshal([]byte(st.Value), &v)
	renewed := now
	if st.RemainingMillis != nil {
		renewed = now.Add(time.Duration(*st.RemainingMillis)*time.Millisecond - ttl)
	}
	return resourcelock.LeaderElectionRecord{
		HolderIdentity:       st.Holder,
		LeaseDurationSeconds: int((ttl + time.Second - 1) / time.Second),
		AcquireTime:          v.AcquireTime,
		RenewTime:            metav1.NewTime(renewed),
		LeaderTransitions:    v.LeaderTransitions,
	}
}

// Create takes the election for ler, as Update does for a new leader.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

// Update writes ler: it renews this elector's grant if ler renews the
// campaign that won it, resigns if ler names no holder, and otherwise
// campaigns, succeeding only if fencer grants the election.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	switch ler.HolderIdentity {
	case "":
		return l.resign(ctx)
	case l.cfg.Identity:
	default:
		return fmt.Errorf("%w: %q, this lock is %q's", ErrNotIdentity, ler.HolderIdentity, l.cfg.Identity)
	}
	l.mu.Lock()
	grant, acquired := l.grant, l.acquired
	l.mu.Unlock()
	if grant != nil && sameSecond(acquired, ler.AcquireTime) {
		return renew(ctx, grant)
	}
	if grant != nil {
		// A new campaign while an old grant is kept: the elector no longer
		// counts on it, so neither may anyone else.
		if err := l.resign(ctx); err != nil {
			return err
		}
	}
	return l.campaign(ctx, ler)
}

// renew renews grant, the current term's.
func renew(ctx context.Context, grant *client.Lease) error {
	err := grant.Renew(ctx)
	if err != nil && grant.Err() != nil {
		// Lost for good (refused, or past its local deadline): the
		// elector must stop leading, not carry on under another term.
		return fmt.Errorf("%w: term %d: %w", ErrTermEnded, grant.Token(), err)
	}
	return err
}

// campaign asks fencer for the election, without waiting in its queue: the
// elector retries every RetryPeriod.
func (l *Lock) campaign(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	ttl := l.cfg.TTL
	if ttl == 0 {
		ttl = time.Duration(ler.LeaseDurationSeconds) * time.Second
	}
	value, err := json.Marshal(campaignValue{AcquireTime: ler.AcquireTime.Rfc3339Copy(), LeaderTransitions: ler.LeaderTransitions})
	if err != nil {
		return err
	}
	grant, err := l.cfg.Client.Acquire(ctx, l.cfg.Election, client.Holder(l.cfg.Identity), client.TTL(ttl),
		client.LockDelay(l.cfg.LockDelay), client.Value(string(value)), client.NoKeepAlive())
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotGranted, l.cfg.Election, err)
	}
	l.mu.Lock()
	l.grant, l.acquired = grant, ler.AcquireTime
	l.mu.Unlock()
	return nil
}

// resign releases this elector's grant, if it has one. A grant already
// lost has nothing left to release: fencer has ended it, or will within
// its TTL, and that is no failure of the resignation.
func (l *Lock) resign(ctx context.Context) error {
	l.mu.Lock()
	grant := l.grant
	l.grant, l.acquired = nil, metav1.Time{}
	l.mu.Unlock()
	if grant == nil {
		return nil
	}
	if err := grant.Resign(ctx); err != nil && !errors.Is(err, client.ErrLeaseLost) && !errors.Is(err, client.ErrLeaseExpired) {
		return err
	}
	return nil
}

// sameSecond compares acquire times as records carry them, in whole
// seconds: the elector echoes the one it last read (from Get, whole
// seconds) or wrote (to Update, full precision).
func sameSecond(a, b metav1.Time) bool { return a.Unix() == b.Unix() }

// Term is the fencing token of this elector's grant: its term of office,
// to send with every write the leadership protects. It is 0 when this
// elector holds no grant, or its grant may be lost (past the local
// deadline, or refused).
func (l *Lock) Term() uint64 {
	l.mu.Lock()
	grant := l.grant
	l.mu.Unlock()
	if grant == nil || grant.Err() != nil {
		return 0
	}
	return grant.Token()
}

// Context is the context of this elector's grant: cancelled as soon as the
// grant may be lost, which can be before the elector stops leading. With
// no grant it is a cancelled context.
func (l *Lock) Context() context.Context {
	l.mu.Lock()
	grant := l.grant
	l.mu.Unlock()
	if grant == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrTermEnded)
		return ctx
	}
	return grant.Context()
}

// RecordEvent passes the elector's event to Config.OnEvent.
func (l *Lock) RecordEvent(event string) {
	if l.cfg.OnEvent != nil {
		l.cfg.OnEvent(event)
	}
}

// Identity is the elector's identity, the grant's holder.
func (l *Lock) Identity() string { return l.cfg.Identity }

// Describe names the lock in the elector's logs.
func (l *Lock) Describe() string { return "fencer election " + l.cfg.Election }
