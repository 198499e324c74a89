package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// Config is one client's part of the workload.
type Config struct {
	Client    int      `json:"client"`
	Endpoints []string `json:"endpoints"` // fencer nodes' HTTP addresses
	Resource  string   `json:"resource"`  // base URL of the external resource
	// Role is what the client does: RoleLocks (the default), RoleSemaphore,
	// RoleElection or RoleSession.
	Role  Role     `json:"role,omitempty"`
	Locks []string `json:"locks,omitempty"`
	// Semaphore and Limit are a semaphore client's semaphore and the limit
	// it asks for; Election is an election client's election. A session
	// client holds every one of Locks and a permit of Semaphore (of Limit)
	// under one session.
	Semaphore string `json:"semaphore,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Election  string `json:"election,omitempty"`
	Seed      uint64 `json:"seed"`
	// MinTTL and MaxTTL bound the leases the client asks for.
	MinTTL time.Duration `json:"min_ttl"`
	MaxTTL time.Duration `json:"max_ttl"`
	// Replays makes the client sometimes write to the resource with a token
	// of an earlier grant, which the resource must refuse once it has
	// accepted a newer one.
	Replays bool `json:"replays,omitempty"`
	// MissingToken makes the client sometimes write with no token at all,
	// which every fence must refuse.
	MissingToken bool `json:"missing_token,omitempty"`
	// Revokes makes the client sometimes revoke another's grant of one of
	// its locks, as an operator (revoke.go).
	Revokes bool `json:"revokes,omitempty"`
	// Durable makes an rw client's waiting acquires durable waiters
	// (issue 28): their places are kept in the log across leader changes.
	Durable bool `json:"durable,omitempty"`
}

// Role is what a client process does.
type Role string

// The roles. A locks client takes locks and writes under them; a semaphore
// client takes permits of one semaphore and holds them; an election client
// campaigns in one election, writes to the resource with its term while it
// leads, proclaims new values and resigns, and meanwhile observes the
// election; a session client holds its locks and a permit under one
// session (sessions.go); an rw client takes its locks shared or
// exclusive (rwlocks.go).
const (
	RoleLocks     Role = ""
	RoleSemaphore Role = "semaphore"
	RoleElection  Role = "election"
	RoleSession   Role = "session"
	RoleRW        Role = "rw"
)

// Validate reports a configuration the client cannot run.
func (c Config) Validate() error {
	switch {
	case len(c.Endpoints) == 0:
		return errors.New("workload: no endpoints")
	case c.Resource == "" && c.Role != RoleSemaphore && c.Role != RoleRW:
		return errors.New("workload: no resource")
	case c.Role == RoleLocks && len(c.Locks) == 0:
		return errors.New("workload: no locks")
	case c.Role == RoleSemaphore && (c.Semaphore == "" || c.Limit < 1):
		return errors.New("workload: a semaphore client needs a semaphore and a limit")
	case c.Role == RoleElection && c.Election == "":
		return errors.New("workload: an election client needs an election")
	case c.Role == RoleSession && (len(c.Locks) == 0 || c.Semaphore == "" || c.Limit < 1):
		return errors.New("workload: a session client needs locks, a semaphore and a limit")
	case c.Role == RoleRW && len(c.Locks) == 0:
		return errors.New("workload: an rw client needs locks")
	case c.Role != RoleLocks && c.Role != RoleSemaphore && c.Role != RoleElection && c.Role != RoleSession && c.Role != RoleRW:
		return fmt.Errorf("workload: unknown role %q", c.Role)
	case c.MinTTL <= 0 || c.MaxTTL < c.MinTTL:
		return fmt.Errorf("workload: bad TTL range %v..%v", c.MinTTL, c.MaxTTL)
	}
	return nil
}

// KVKey is the cluster key written under lock.
func KVKey(lock string) string { return "kv." + lock }

// ResourceKey is the resource key written under lock.
func ResourceKey(lock string) string { return "res." + lock }

// opTimeout bounds each operation, retries included. It is short enough
// that a client notices a stuck call within a fault, and long enough for
// the client library to find a new leader.
const opTimeout = 6 * time.Second

// worker is one client's state.
type worker struct {
	cfg  Config
	rng  *rand.Rand
	c    *client.Client // retries across nodes
	once *client.Client // a single attempt: see release
	raw  *RawAPI        // the session calls, as plain HTTP
	res  *http.Client
	out  io.Writer
	mu   sync.Mutex // serializes lines on out
	// id numbers the ops; atomic, as a session client records its
	// renewals from a goroutine of their own.
	id   atomic.Int64
	old  map[string][]uint64 // tokens of earlier grants, per lock
	vals int                 // values published so far (elections)
}

// Run runs the client loop until ctx is done, writing its lines to out. The
// iteration in progress when ctx ends is finished (its lease released),
// so that no lease outlives the client by more than its TTL.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	opts := []client.Option{client.WithTimeout(2 * time.Second), client.WithLogger(log)}
	c, err := client.New(cfg.Endpoints, opts...)
	if err != nil {
		return err
	}
	once, err := client.New(cfg.Endpoints, append(opts, client.WithRetry(client.Retry{Attempts: 1}))...)
	if err != nil {
		return err
	}
	w := &worker{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Client))),
		c:    c,
		once: once,
		raw:  NewRawAPI(cfg.Endpoints, 2*time.Second),
		res:  &http.Client{Timeout: 3 * time.Second},
		out:  out,
		old:  map[string][]uint64{},
	}
	iteration := w.iteration
	switch cfg.Role {
	case RoleSemaphore:
		iteration = w.permitIteration
	case RoleSession:
		iteration = w.sessionIteration
	case RoleRW:
		iteration = w.rwIteration
	case RoleElection:
		iteration = w.campaignIteration
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			w.observe(ctx)
		}()
	}
	for ctx.Err() == nil {
		iteration(ctx)
		w.sleep(ctx, time.Duration(w.rng.IntN(100))*time.Millisecond)
	}
	return nil
}

// leaseTTL picks a lease's TTL in the configured range.
func (w *worker) leaseTTL() time.Duration {
	ttl := w.cfg.MinTTL + time.Duration(w.rng.Int64N(int64(w.cfg.MaxTTL-w.cfg.MinTTL)+1))
	return ttl.Truncate(time.Millisecond)
}

// iteration is one pass: maybe read, acquire, write, hold, write again,
// read back, release, and sometimes misbehave.
func (w *worker) iteration(ctx context.Context) {
	if len(w.cfg.Locks) > 1 && w.chance(multiChance) {
		w.multiIteration(ctx) // multilocks.go
		return
	}
	lock := w.cfg.Locks[w.rng.IntN(len(w.cfg.Locks))]
	if w.chance(0.3) {
		w.read(lock)
	}
	if w.cfg.MissingToken && w.chance(0.05) {
		w.putResource(lock, 0, 0)
		w.putKV(lock, 0, false)
	}
	if w.cfg.Revokes && w.chance(revokeChance) {
		w.revokeOther(w.cfg.Locks[w.rng.IntN(len(w.cfg.Locks))])
	}
	ttl := w.leaseTTL()
	var wait time.Duration
	if w.chance(0.5) {
		wait = time.Duration(w.rng.IntN(1000)) * time.Millisecond
	}
	lease := w.acquire(lock, ttl, wait)
	if lease == nil {
		if w.chance(0.3) {
			w.getKV(lock)
			w.getResource(lock)
		}
		return
	}
	token := lease.Token()
	seq := uint64(1)
	w.putResource(lock, token, seq)
	if w.chance(0.3) {
		w.putKV(lock, token, w.chance(0.7))
	}
	w.emit(Line{Ev: Hold, Lock: lock, Token: token, TTLMillis: ttl.Milliseconds()})
	w.sleep(ctx, w.holdTime(ttl))
	w.emit(Line{Ev: Unhold})
	if w.chance(0.5) {
		w.renew(lease)
	}
	seq++
	w.putResource(lock, token, seq)
	w.putKV(lock, token, w.chance(0.7))
	if w.chance(0.5) {
		w.getKV(lock)
		w.getResource(lock)
	}
	w.release(lease)
	if w.cfg.Replays && w.chance(0.15) {
		if old := w.old[lock]; len(old) > 0 {
			w.putResource(lock, old[w.rng.IntN(len(old))], 0)
		}
	}
	w.old[lock] = append(w.old[lock], token)
	if len(w.old[lock]) > 8 {
		w.old[lock] = w.old[lock][1:]
	}
}

// holdTime is how long the client sits on a lock between its writes:
// mostly briefly, sometimes for most of the TTL, sometimes past it (the
// keep-alive should carry the lease through).
func (w *worker) holdTime(ttl time.Duration) time.Duration {
	switch r := w.rng.Float64(); {
	case r < 0.6:
		return time.Duration(w.rng.Int64N(int64(ttl/3))) + 20*time.Millisecond
	case r < 0.9:
		return ttl/3 + time.Duration(w.rng.Int64N(int64(2*ttl/3)))
	default:
		return ttl + time.Duration(w.rng.Int64N(int64(ttl)))
	}
}

func (w *worker) chance(p float64) bool { return w.rng.Float64() < p }

func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// emit writes one line; a client that cannot report is useless, so a
// write error ends the process.
func (w *worker) emit(l Line) {
	b, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(append(b, '\n')); err != nil {
		panic(fmt.Sprintf("workload: report line: %v", err))
	}
}

// record announces op, runs it, and reports it with its outcome.
func (w *worker) record(op history.Op, run func(ctx context.Context, op *history.Op)) history.Op {
	id := int(w.id.Add(1))
	op.Client = w.cfg.Client
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	op.Call = Now()
	w.emit(Line{Ev: Invoke, ID: id, Op: &op})
	run(ctx, &op)
	op.Return = Now()
	w.emit(Line{Ev: Complete, ID: id, Op: &op})
	return op
}

func (w *worker) holder() string { return "c" + strconv.Itoa(w.cfg.Client) }

func (w *worker) value(token, seq uint64) string {
	return fmt.Sprintf("c%d.%d.t%d.s%d", w.cfg.Client, w.id.Load()+1, token, seq)
}

func (w *worker) read(lock string) {
	w.record(history.Op{Kind: history.Read, Target: lock}, func(ctx context.Context, op *history.Op) {
		st, err := w.c.Lock(ctx, lock)
		w.settle(op, err)
		if err == nil {
			op.Held, op.Token = st.Held, st.Token
		}
	})
}

func (w *worker) acquire(lock string, ttl, wait time.Duration) *client.Lease {
	var lease *client.Lease
	w.record(history.Op{Kind: history.Acquire, Target: lock, Holder: w.holder()}, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		l, err := w.c.Acquire(ctx, lock, client.TTL(ttl), client.Wait(wait), client.Holder(w.holder()))
		w.settle(op, err)
		var ae *client.APIError
		switch {
		case err == nil:
			lease = l
			op.Token, op.Lease = l.Token(), l.Secret()
		case op.Outcome == history.LockHeld && errors.As(err, &ae):
			op.Token, op.HeldBy = ae.Token, ae.Holder
		}
	})
	return lease
}

func (w *worker) renew(l *client.Lease) {
	op := history.Op{Kind: history.Renew, Target: l.Name(), Token: l.Token(), Lease: l.Secret()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		_, err := w.c.RenewRaw(ctx, l.Name(), l.Token(), l.Secret())
		w.settle(op, err)
	})
}

// release uses a single attempt: the client library reports a retried
// release that finds the lease gone as a success (the first attempt must
// have freed it), which is right for applications but would tell the
// checker the lease was current when it may have expired instead.
func (w *worker) release(l *client.Lease) { w.releaseOnce(history.Release, l) }

// releaseOnce releases l in a single attempt, recorded as an op of kind
// (a release, or an election's resign).
func (w *worker) releaseOnce(kind history.OpKind, l *client.Lease) {
	op := history.Op{Kind: kind, Target: l.Name(), Token: l.Token(), Lease: l.Secret()}
	got := w.record(op, func(ctx context.Context, op *history.Op) {
		_, err := w.once.ReleaseRaw(ctx, l.Name(), l.Token(), l.Secret())
		w.settle(op, err)
	})
	if got.Outcome != history.OK && got.Outcome != history.LeaseLost && got.Outcome != history.Revoked {
		// Stop the keep-alive, which would otherwise renew a lease whose
		// release went astray for as long as the run lasts. Unrecorded,
		// this release looks to the checker like an expiry, which the lock
		// model allows at any time.
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = l.Release(ctx)
	}
}

func (w *worker) putKV(lock string, token uint64, withLock bool) history.Op {
	key := KVKey(lock)
	op := history.Op{Kind: history.Put, Target: key, Token: token, Value: w.value(token, 0)}
	if withLock {
		op.Lock = lock
	}
	return w.record(op, func(ctx context.Context, op *history.Op) {
		var opts []client.PutOption
		if withLock {
			opts = append(opts, client.WithLock(lock))
		}
		w.settle(op, w.c.PutFenced(ctx, key, []byte(op.Value), token, opts...))
	})
}

func (w *worker) getKV(lock string) {
	key := KVKey(lock)
	w.record(history.Op{Kind: history.Get, Target: key}, func(ctx context.Context, op *history.Op) {
		v, token, err := w.c.Get(ctx, key)
		if errors.Is(err, client.ErrNotFound) {
			op.Outcome = history.OK
			return
		}
		w.settle(op, err)
		if err == nil {
			op.Found, op.Value, op.Token = true, string(v), token
		}
	})
}

// putResource writes through the external resource; token 0 sends no
// token at all and seq 0 no sequence.
func (w *worker) putResource(lock string, token, seq uint64) {
	key := ResourceKey(lock)
	op := history.Op{Kind: history.Put, Target: key, Token: token, Seq: seq, Value: w.value(token, seq)}
	w.record(op, func(ctx context.Context, op *history.Op) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, w.cfg.Resource+"/v1/data/"+key, strings.NewReader(op.Value))
		if err != nil {
			panic(err)
		}
		if token != 0 {
			req.Header.Set(wire.HeaderToken, strconv.FormatUint(token, 10))
		}
		if seq != 0 {
			req.Header.Set(wire.HeaderSequence, strconv.FormatUint(seq, 10))
		}
		resp, err := w.res.Do(req)
		if err != nil {
			op.Outcome, op.Error = history.Unknown, err.Error()
			return
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			op.Outcome = history.OK
			return
		}
		op.Code, op.Error = errorCode(body), resp.Status+": "+string(body)
		op.Outcome = resourceOutcome(resp.StatusCode, op.Code)
	})
}

// resourceOutcome classifies the resource's answer to a write, made in one
// attempt (net/http does not resend a PUT), so that an answer with a code
// is a definite refusal; a 5xx may hide a write that landed.
func resourceOutcome(status int, code string) history.Outcome {
	switch {
	case status >= 500:
		return history.Unknown
	case code == wire.CodeStaleToken:
		return history.StaleToken
	case status >= 400 && code != "":
		return history.Refused
	}
	return history.OtherError
}

// errorCode reads the code of a wire.Error body; empty if it is none.
func errorCode(body []byte) string {
	var e wire.Error
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Code
}

func (w *worker) getResource(lock string) {
	key := ResourceKey(lock)
	w.record(history.Op{Kind: history.Get, Target: key}, func(ctx context.Context, op *history.Op) {
		found, value, stamp, err := GetResource(ctx, w.res, w.cfg.Resource, key)
		if err != nil {
			op.Outcome, op.Error = history.Unknown, err.Error()
			return
		}
		op.Outcome, op.Found = history.OK, found
		if found {
			op.Value, op.Token, op.Seq = value, stamp.Token, stamp.Seq
		}
	})
}

// GetResource reads key from the resource at base: whether it has a value,
// the value, and the stamp of the write that stored it.
func GetResource(ctx context.Context, hc *http.Client, base, key string) (bool, string, history.Stamp, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/data/"+key, nil)
	if err != nil {
		return false, "", history.Stamp{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, "", history.Stamp{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return false, "", history.Stamp{}, err
	case resp.StatusCode == http.StatusNotFound:
		return false, "", history.Stamp{}, nil
	case resp.StatusCode != http.StatusOK:
		return false, "", history.Stamp{}, fmt.Errorf("GET %s: %s: %s", key, resp.Status, body)
	}
	token, err := strconv.ParseUint(resp.Header.Get(wire.HeaderToken), 10, 64)
	if err != nil {
		return false, "", history.Stamp{}, fmt.Errorf("GET %s: bad %s header: %w", key, wire.HeaderToken, err)
	}
	var seq uint64
	if raw := resp.Header.Get(wire.HeaderSequence); raw != "" {
		if seq, err = strconv.ParseUint(raw, 10, 64); err != nil {
			return false, "", history.Stamp{}, fmt.Errorf("GET %s: bad %s header: %w", key, wire.HeaderSequence, err)
		}
	}
	return true, string(body), history.Stamp{Token: token, Seq: seq}, nil
}

// settle sets op's outcome from a client call's error. Only answers that
// say for certain what happened are definite; a timeout, a connection
// error or a 5xx is unknown, and any other error answer is an error.
func (w *worker) settle(op *history.Op, err error) {
	op.Outcome = outcomeOf(op.Kind, err)
	if err != nil {
		op.Error = err.Error()
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		op.Code = ae.Code
	}
}

func outcomeOf(kind history.OpKind, err error) history.Outcome {
	if err == nil {
		return history.OK
	}
	if errors.Is(err, client.ErrOutcomeUnknown) {
		return history.Unknown
	}
	switch kind {
	case history.Renew, history.Release, history.Revoke:
		// Before lease_lost, which a revoked answer matches too.
		if errors.Is(err, client.ErrRevoked) {
			return history.Revoked
		}
	}
	switch kind {
	case history.Renew, history.Release, history.SemRenew, history.SemRelease, history.Proclaim, history.Resign, history.Revoke, history.RWRelease:
		if errors.Is(err, client.ErrLeaseLost) {
			return history.LeaseLost
		}
	}
	switch {
	case (kind == history.Acquire || kind == history.RWAcquire) && errors.Is(err, client.ErrLockHeld):
		return history.LockHeld
	case kind == history.SemAcquire && errors.Is(err, client.ErrSemaphoreFull):
		return history.SemaphoreFull
	case kind == history.SemAcquire && errors.Is(err, client.ErrLockDelay):
		return history.LockDelay
	case kind == history.Put && errors.Is(err, client.ErrStaleToken):
		return history.StaleToken
	case kind == history.Put && errors.Is(err, client.ErrNotLockHolder):
		return history.NotLockHolder
	}
	var ae *client.APIError
	switch {
	case !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500:
		return history.Unknown
	case kind == history.Put && ae.Code != "":
		// PutFenced reports any refusal that follows an attempt which may
		// have landed as ErrOutcomeUnknown (above), so a put refused with
		// a code certainly did nothing, whatever the code: unissued_token,
		// missing_token, kv_full... The other kinds' clients do not
		// guarantee that, so their other refusals stay indeterminate.
		return history.Refused
	}
	return history.OtherError
}
