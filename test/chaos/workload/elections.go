package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// campaignTimeout bounds a campaign: long enough to outwait a leader that
// resigns, short enough that a campaigner still moves on within a fault.
const campaignTimeout = 5 * time.Second

// campaignIteration is one pass of an election client: campaign; once
// elected, write to the resource with the term's token, hold (the nemesis
// may pause the client here, past its lease, so that another campaigner
// takes over and the old leader's next write must be refused), maybe
// proclaim a new value, write again, and resign.
func (w *worker) campaignIteration(ctx context.Context) {
	ttl := w.leaseTTL()
	lease := w.campaign(ttl)
	if lease == nil {
		return
	}
	token := lease.Token()
	w.putResource(w.cfg.Election, token, 1)
	w.emit(Line{Ev: Hold, Lock: w.cfg.Election, Token: token, TTLMillis: ttl.Milliseconds()})
	w.sleep(ctx, w.holdTime(ttl))
	w.emit(Line{Ev: Unhold})
	if w.chance(0.6) {
		w.proclaim(lease)
	}
	w.putResource(w.cfg.Election, token, 2)
	w.resign(lease)
}

// nextValue is a value this client never published before: the checker
// tells a term's values apart by them.
func (w *worker) nextValue() string {
	w.vals++
	return fmt.Sprintf("%s.v%d", w.holder(), w.vals)
}

func (w *worker) campaign(ttl time.Duration) *client.Lease {
	var lease *client.Lease
	op := history.Op{Kind: history.Campaign, Target: w.cfg.Election, Holder: w.holder(), Value: w.nextValue(), TTL: ttl.Milliseconds()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, campaignTimeout)
		defer cancel()
		l, err := w.c.Campaign(ctx, w.cfg.Election, op.Value, client.TTL(ttl), client.Holder(w.holder()))
		w.settle(op, err)
		if err == nil {
			lease = l
			op.Token, op.Lease = l.Token(), l.Secret()
		}
	})
	return lease
}

func (w *worker) proclaim(l *client.Lease) {
	op := history.Op{Kind: history.Proclaim, Target: l.Name(), Token: l.Token(), Lease: l.Secret(), Value: w.nextValue()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		w.settle(op, l.Proclaim(ctx, op.Value))
	})
}

// resign makes a single attempt, as release does.
func (w *worker) resign(l *client.Lease) { w.releaseOnce(history.Resign, l) }

// observe watches the election until ctx ends, reporting every leadership
// it is told of. When a watch ends (every endpoint failed in a row, say),
// it starts a new session, which first reports the leader as it is then.
func (w *worker) observe(ctx context.Context) {
	for session := 0; ctx.Err() == nil; session++ {
		for l, err := range w.c.Observe(ctx, w.cfg.Election) {
			if err != nil {
				break
			}
			w.emit(Line{Ev: Observe, Obs: &history.Observation{
				Observer: w.cfg.Client, Session: session, Election: w.cfg.Election,
				Holder: l.Holder, Token: l.Token, Value: l.Value, Time: Now(),
			}})
		}
		w.sleep(ctx, 200*time.Millisecond)
	}
}
