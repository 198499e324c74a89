package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// args are every op's arguments (PROTOCOL.md's table); an op reads its own.
type args struct {
	Name    string   `json:"name"`
	Names   []string `json:"names"`
	Holder  string   `json:"holder"`
	TTLMs   *int64   `json:"ttl_ms"`
	WaitMs  int64    `json:"wait_ms"`
	Mode    string   `json:"mode"`
	Session string   `json:"session"`
	Limit   int      `json:"limit"`
	Value   string   `json:"value"`
	Handle  string   `json:"handle"`
	Key     string   `json:"key"`
	Token   *uint64  `json:"token"`
	Lock    string   `json:"lock"`
	Kind    string   `json:"kind"`
	From    *uint64  `json:"from"`
	Prefix  string   `json:"prefix"`
	Watch   string   `json:"watch"`
}

// opTimeout bounds a call that does not wait: the client's own retries end
// well before it.
const opTimeout = 30 * time.Second

func (a *agent) run(r request) (any, error) {
	var x args
	if len(r.Args) > 0 {
		if err := json.Unmarshal(r.Args, &x); err != nil {
			return nil, fmt.Errorf("%w: args: %v", errHarness, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout+time.Duration(x.WaitMs)*time.Millisecond)
	defer cancel()
	switch r.Op {
	case "acquire":
		return a.acquire(ctx, x)
	case "multi_acquire":
		return a.multiAcquire(ctx, x)
	case "sem_acquire":
		return a.semAcquire(ctx, x)
	case "campaign":
		return a.campaign(ctx, x)
	case "proclaim":
		return a.proclaim(ctx, x)
	case "leader":
		return a.leader(ctx, x)
	case "release":
		return a.release(ctx, x)
	case "lease_state":
		return a.leaseState(x)
	case "session_open":
		return a.sessionOpen(ctx, x)
	case "session_close":
		return a.sessionClose(ctx, x)
	case "put":
		return a.put(ctx, x)
	case "get":
		return a.get(ctx, x)
	case "check":
		return a.check(ctx, x)
	case "token_info":
		return a.tokenInfo(ctx, x)
	case "history":
		return a.history(ctx, x)
	case "revoke":
		return a.revoke(ctx, x)
	case "watch":
		return a.watch(x)
	case "watch_stop":
		return a.watchStop(x)
	}
	return nil, fmt.Errorf("%w: op %q", errUnsupported, r.Op)
}

// opts turns the acquire arguments into the client's options; ttl_ms is
// left out under a session (the session's TTL) and when absent (the
// client's default).
func (x args) opts() []client.AcquireOption {
	o := []client.AcquireOption{client.Holder(x.Holder)}
	if x.TTLMs != nil {
		o = append(o, client.TTL(time.Duration(*x.TTLMs)*time.Millisecond))
	}
	if x.WaitMs > 0 {
		o = append(o, client.Wait(time.Duration(x.WaitMs)*time.Millisecond))
	}
	if x.Mode != "" {
		o = append(o, client.Mode(x.Mode))
	}
	return o
}

func leaseResult(handle string, l *client.Lease) map[string]any {
	return map[string]any{"handle": handle, "token": l.Token(), "ttl_ms": l.TTL().Milliseconds()}
}

func (a *agent) acquire(ctx context.Context, x args) (any, error) {
	var l *client.Lease
	var err error
	if x.Session != "" {
		s, serr := a.session(x.Session)
		if serr != nil {
			return nil, serr
		}
		l, err = s.Lock(ctx, x.Name, x.opts()...)
	} else {
		l, err = a.c.Acquire(ctx, x.Name, x.opts()...)
	}
	if err != nil {
		return nil, err
	}
	return leaseResult(a.hold(&held{lease: l}), l), nil
}

func (a *agent) multiAcquire(ctx context.Context, x args) (any, error) {
	m, err := a.c.MultiLock(ctx, x.Names, x.opts()...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"handle": a.hold(&held{multi: m}), "token": m.Token()}, nil
}

func (a *agent) semAcquire(ctx context.Context, x args) (any, error) {
	var l *client.Lease
	var err error
	if x.Session != "" {
		s, serr := a.session(x.Session)
		if serr != nil {
			return nil, serr
		}
		l, err = s.AcquirePermit(ctx, x.Name, x.Limit, x.opts()...)
	} else {
		l, err = a.c.AcquirePermit(ctx, x.Name, x.Limit, x.opts()...)
	}
	if err != nil {
		return nil, err
	}
	return leaseResult(a.hold(&held{lease: l}), l), nil
}

// campaign queues until elected; wait_ms (when given) bounds the whole
// campaign, and a campaign that runs out of it is a timeout.
func (a *agent) campaign(ctx context.Context, x args) (any, error) {
	if x.WaitMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(x.WaitMs)*time.Millisecond)
		defer cancel()
	}
	x.WaitMs = 0 // Campaign queues in attempts of its own
	var l *client.Lease
	var err error
	if x.Session != "" {
		s, serr := a.session(x.Session)
		if serr != nil {
			return nil, serr
		}
		l, err = s.Campaign(ctx, x.Name, x.Value, x.opts()...)
	} else {
		l, err = a.c.Campaign(ctx, x.Name, x.Value, x.opts()...)
	}
	if err != nil {
		return nil, err
	}
	return leaseResult(a.hold(&held{lease: l}), l), nil
}

func (a *agent) proclaim(ctx context.Context, x args) (any, error) {
	h, err := a.handle(x.Handle)
	if err != nil {
		return nil, err
	}
	if h.lease == nil {
		return nil, fmt.Errorf("%w: %s is a multi-lock", errHarness, x.Handle)
	}
	return map[string]any{}, h.lease.Proclaim(ctx, x.Value)
}

// leader reads the election's leader; none is the client's ErrNotFound.
func (a *agent) leader(ctx context.Context, x args) (any, error) {
	st, err := a.c.ElectionLeader(ctx, x.Name)
	if err != nil {
		return nil, err
	}
	if !st.Held {
		return nil, fmt.Errorf("%w: election %q has no leader", client.ErrNotFound, x.Name)
	}
	return map[string]any{"holder": st.Holder, "value": st.Value, "token": st.Token}, nil
}

// release releases the handle's grant; with name, one name of a
// multi-lock through the lock's own release (which the server refuses).
func (a *agent) release(ctx context.Context, x args) (any, error) {
	h, err := a.handle(x.Handle)
	if err != nil {
		return nil, err
	}
	switch {
	case x.Name != "" && h.multi != nil:
		_, err = a.c.ReleaseRaw(ctx, x.Name, h.multi.Token(), h.multi.Secret())
		return map[string]any{}, err
	case h.multi != nil:
		a.endQuietly(h)
		return map[string]any{}, h.multi.Release(ctx)
	}
	a.endQuietly(h)
	return map[string]any{}, h.lease.Release(ctx)
}

func (a *agent) leaseState(x args) (any, error) {
	h, err := a.handle(x.Handle)
	if err != nil {
		return nil, err
	}
	return map[string]any{"lost": h.err() != nil, "token": h.token()}, nil
}

func (a *agent) sessionOpen(ctx context.Context, x args) (any, error) {
	o := []client.SessionOption{client.SessionHolder(x.Holder)}
	if x.TTLMs != nil {
		o = append(o, client.SessionTTL(time.Duration(*x.TTLMs)*time.Millisecond))
	}
	s, err := a.c.NewSession(ctx, o...)
	if err != nil {
		return nil, err
	}
	name := a.name("s")
	a.mu.Lock()
	a.sessions[name] = s
	a.mu.Unlock()
	return map[string]any{"session": name, "id": s.ID()}, nil
}

func (a *agent) sessionClose(ctx context.Context, x args) (any, error) {
	s, err := a.session(x.Session)
	if err != nil {
		return nil, err
	}
	a.endQuietly(a.underSession(s)...)
	_, err = s.Close(ctx)
	return map[string]any{}, err
}

// put is a fenced write: the Go client has no unfenced one, so a put
// without a token is refused as the server refuses a malformed one.
func (a *agent) put(ctx context.Context, x args) (any, error) {
	if x.Token == nil {
		return nil, &client.APIError{Status: 400, Code: wire.CodeInvalidToken, Message: "the Go client writes fenced only: a put needs a token"}
	}
	var o []client.PutOption
	if x.Lock != "" {
		o = append(o, client.WithLock(x.Lock))
	}
	if err := a.c.PutFenced(ctx, x.Key, []byte(x.Value), *x.Token, o...); err != nil {
		return nil, err
	}
	return map[string]any{"token": *x.Token}, nil
}

func (a *agent) get(ctx context.Context, x args) (any, error) {
	v, token, err := a.c.Get(ctx, x.Key)
	if err != nil {
		return nil, err
	}
	return map[string]any{"value": string(v), "token": token}, nil
}

func (a *agent) check(ctx context.Context, x args) (any, error) {
	if x.Token == nil {
		return nil, fmt.Errorf("%w: check needs a token", errHarness)
	}
	r, err := a.c.Check(ctx, x.Name, *x.Token)
	if err != nil {
		return nil, err
	}
	return map[string]any{"current": r.Current}, nil
}

func (a *agent) tokenInfo(ctx context.Context, x args) (any, error) {
	if x.Token == nil {
		return nil, fmt.Errorf("%w: token_info needs a token", errHarness)
	}
	g, err := a.c.Token(ctx, *x.Token)
	if err != nil {
		return nil, err
	}
	res := map[string]any{"kind": "lock", "name": g.Lock, "holder": g.Holder}
	if g.Semaphore != "" {
		res["kind"], res["name"] = "semaphore", g.Semaphore
	}
	if g.Mode != "" {
		res["mode"] = g.Mode
	}
	return res, nil
}

func (a *agent) history(ctx context.Context, x args) (any, error) {
	gs, err := a.c.History(ctx, x.Name, 0)
	if err != nil {
		return nil, err
	}
	grants := make([]map[string]any, 0, len(gs))
	for _, g := range gs {
		grants = append(grants, map[string]any{"token": g.Token, "holder": g.Holder, "ended": g.Ended})
	}
	return map[string]any{"grants": grants}, nil
}

func (a *agent) revoke(ctx context.Context, x args) (any, error) {
	var err error
	switch x.Kind {
	case "lock", "semaphore":
		if x.Token == nil {
			return nil, fmt.Errorf("%w: revoke needs a token", errHarness)
		}
		if x.Kind == "lock" {
			_, err = a.c.RevokeLock(ctx, x.Name, *x.Token)
		} else {
			_, err = a.c.RevokePermit(ctx, x.Name, *x.Token)
		}
	case "session":
		id, perr := a.sessionID(x.Name)
		if perr != nil {
			return nil, perr
		}
		_, err = a.c.RevokeSession(ctx, id)
	default:
		return nil, fmt.Errorf("%w: revoke kind %q", errHarness, x.Kind)
	}
	return map[string]any{}, err
}

// sessionID reads a session handle, or a session's id in decimal.
func (a *agent) sessionID(name string) (uint64, error) {
	if s, err := a.session(name); err == nil {
		return s.ID(), nil
	}
	id, err := strconv.ParseUint(name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is neither a session handle nor an id", errHarness, name)
	}
	return id, nil
}

// watch starts a watch on its own goroutine and answers at once; its
// events follow as lines of their own.
func (a *agent) watch(x args) (any, error) {
	since := client.FromNow
	if x.From != nil {
		since = *x.From
	}
	name := a.name("w")
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	a.watches[name] = cancel
	a.mu.Unlock()
	go func() {
		for ev, err := range a.c.Watch(ctx, x.Prefix, since) {
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					code, _ := classify(err)
					a.emit(map[string]any{"event": "watch_error", "watch": name, "code": code})
				}
				return
			}
			line := map[string]any{"event": "watch", "watch": name, "index": ev.Index, "type": ev.Type, "key": ev.Key, "name": ev.Lock, "token": ev.Token}
			if ev.Semaphore != "" {
				line["name"] = ev.Semaphore
			}
			a.emit(line)
		}
	}()
	return map[string]any{"watch": name}, nil
}

func (a *agent) watchStop(x args) (any, error) {
	a.mu.Lock()
	cancel, ok := a.watches[x.Watch]
	delete(a.watches, x.Watch)
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no watch %q", errHarness, x.Watch)
	}
	cancel()
	return map[string]any{}, nil
}
